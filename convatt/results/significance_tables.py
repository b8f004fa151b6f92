"""The significance and equivalence tables as Markdown (`Table`s), from the numbers of
`convatt.results.significance`.

    significance_tables(runs) the `Table`s `convatt tables` writes beside Tables 2b-2d
"""

from __future__ import annotations

import pandas as pd

from convatt.data.formats import FORMATS
from convatt.results.markdown import Table, fmt, markdown_table, page
from convatt.results.significance import (
    CONFIDENCE,
    MARGIN,
    MIN_WILCOXON_TREEBANKS,
    N_RESAMPLES,
    NO_SENTENCES,
    across_treebanks_frame,
    comparison_frame,
    equivalence_frame,
)


def p_text(p: float) -> str:
    return "–" if pd.isna(p) else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def interval(low: float, high: float, signed: bool = False) -> str:
    return "–" if pd.isna(low) else f"[{fmt(low, signed=signed)}, {fmt(high, signed=signed)}]"


def reading(row) -> str:
    """What the bootstrap CI says about the difference, or why there is no CI."""
    if row["bootstrap_note"]:
        return row["bootstrap_note"]
    if row["ci_low"] > 0:
        return "higher (CI above 0)"
    return "lower (CI below 0)" if row["ci_high"] < 0 else "no difference shown (CI covers 0)"


def _where(row) -> list[str]:
    place = row["treebank"] if row["preset"] == "ud" else row["corpus"]
    return [str(place).replace("_", " "), row["setting"] or "paper"]


def comparison_notes(frame: pd.DataFrame) -> list[str]:
    """What the user can do about missing intervals."""
    missing = int((frame["bootstrap_note"] == NO_SENTENCES).sum())
    if not missing:
        return []
    return [
        f"{missing} comparison(s) have no bootstrap interval: some of their runs were trained before runs "
        "kept per-sentence scores; `convatt evaluate RUN --sentences` writes them from the saved model."
    ]


def comparison_markdown(frame: pd.DataFrame, title: str, notes: list[str] | None = None) -> str:
    rows = [
        _where(r)
        + [
            f"{r['model']} − {r['against']}",
            f"{r['n_variant']} / {r['n_reference']} / {r['n_paired']}",
            fmt(r["diff"], signed=True),
            interval(r["ci_low"], r["ci_high"], signed=True),
            p_text(r["p_permutation"]),
            r["aso_note"] or f"{r['aso_epsilon']:.2f} ({r['aso_ratio']:.2f})",
            reading(r),
        ]
        for _, r in frame.iterrows()
    ]
    header = ["Corpus", "Setting", "Comparison", "Seeds (var. / ref. / paired)", "Δ (points)"]
    header += [f"{100 * CONFIDENCE:g}% CI (bootstrap)", "p (permutation)", "ASO ε_min (ε̂)", "Reading"]
    intro = (
        "Δ: the mean over paired seeds of the difference in test accuracy (all words, points). CI: "
        f"sentence-level bootstrap (BCa, {N_RESAMPLES} resamples) with the seeds paired; p: paired "
        "permutation test over sentences (H0: no difference). ASO over seeds (deepsig): ε̂ the share of "
        "the distance between the two seed distributions where the variant is lower (0.5: alike), ε_min its "
        "95% upper bound; ε_min below 0.5: the variant scores almost stochastically higher, 0: it dominates "
        "(with 3 seeds the bound is wide: 1 says nothing). "
        "See docs/statistics.md."
    )
    empty = "No comparison: no variant ran beside its reference."
    return page(title, intro, notes or [], markdown_table(header, rows) if rows else empty)


def across_markdown(frame: pd.DataFrame, title: str) -> str:
    rows = [
        [r["setting"] or "paper", f"{r['model']} − {r['against']}", str(r["n_treebanks"]), str(r["n_better"])]
        + [fmt(r["mean_diff"], signed=True), r["note"] or p_text(r["p_wilcoxon"])]
        for _, r in frame.iterrows()
    ]
    header = ["Setting", "Comparison", "Treebanks", "Higher on", "Mean Δ (points)", "p (Wilcoxon signed-rank)"]
    intro = (
        "Across treebanks: a Wilcoxon signed-rank test (two-sided) of the per-treebank mean differences "
        f"(H0: symmetric about 0). Below {MIN_WILCOXON_TREEBANKS} treebanks no p-value can fall below 0.05: "
        "the table says so instead."
    )
    return page(title, intro, [], markdown_table(header, rows) if rows else "No comparison across treebanks.")


def equivalence_markdown(frame: pd.DataFrame, title: str) -> str:
    rows = [
        _where(r)
        + [r["model"], r["metric"], str(r["n_seeds"]), fmt(r["mean"], r["std"]), fmt(r["paper"])]
        + [fmt(r["diff"], signed=True), interval(r["ci90_low"], r["ci90_high"])]
        + [p_text(r["p_tost"]), r["verdict"]]
        for _, r in frame.iterrows()
    ]
    header = ["Corpus", "Setting", "Model", "Metric", "Seeds", "Ours (± std, ddof=1)", "Paper", "Δ", "90% CI"]
    header += ["p (TOST)", "Verdict"]
    intro = (
        f"Two one-sided t-tests (TOST) per cell: H0 \"our mean is {MARGIN:g} point or more from the paper's "
        f"number\", rejected at 5% when the 90% t-interval of our seeds' mean lies within ±{MARGIN:g} of it. "
        "\"not shown\" is not \"different\": with few seeds the interval is wide. The paper's number is taken "
        "as exact (its own seed spread is not known per cell)."
    )
    return page(title, intro, [], markdown_table(header, rows) if rows else "No cell with a paper number.")


def significance_tables(runs: pd.DataFrame) -> list[Table]:
    """`significance_<preset>` and `equivalence_<preset>` (and, for UD, the test across treebanks)
    for each preset that has runs."""
    tables = []
    comparisons_all = comparison_frame(runs)
    equivalence_all = equivalence_frame(runs)
    for preset, name in (("ptb", "PTB"), ("ud", "UD")):
        if not (runs["preset"] == preset).any():
            continue
        ours = comparisons_all[comparisons_all["preset"] == preset].reset_index(drop=True)
        title = f"Significance: {name} variants against SAN+PE[add] (and +Conv2d against +Conv)"
        notes = comparison_notes(ours)
        tables.append(Table(f"significance_{preset}", title, ours, comparison_markdown(ours, title, notes), notes))
        if preset == "ud":
            across = across_treebanks_frame(ours)
            title = "Significance across UD treebanks"
            tables.append(Table("significance_ud_across_treebanks", title, across, across_markdown(across, title)))
        same = equivalence_all[equivalence_all["preset"] == preset].reset_index(drop=True)
        title = f"Equivalence with the paper: {name} (TOST, margin {MARGIN:g} point)"
        tables.append(Table(f"equivalence_{preset}", title, same, equivalence_markdown(same, title)))
    return tables + _sequence_significance(comparisons_all)


def _sequence_significance(comparisons_all: pd.DataFrame) -> list[Table]:
    """`significance_<preset>` of each causal sequence task with runs: its test accuracy (find-block:
    exact match, a "sentence" is a sample; char LM: next-character accuracy, a "sentence" is a chunk)."""
    tables = []
    for task in (f for f in FORMATS.values() if f.is_sequence_task):
        ours = comparisons_all[comparisons_all["preset"] == task.name].reset_index(drop=True)
        if ours.empty:
            continue
        what = "exact match per sample" if task.task == "find-block" else "next-character accuracy per chunk"
        title = f"Significance: {task.label} ({what}), variants against SAN+PE[add] (and the convolutions' pairs)"
        notes = comparison_notes(ours)
        tables.append(Table(f"significance_{task.name}", title, ours, comparison_markdown(ours, title, notes), notes))
    return tables
