"""Finished runs -> the paper's Tables 2b, 2c and 2d, with the paper's numbers beside ours.

Numbers first, rendering second: `ptb_frame`, `ud_macro_frame` and `ud_treebank_frame`
compute each table as a DataFrame (what goes to CSV); `ptb_table`, ... render it to
Markdown with its notes as a `Table`.

    build_tables(runs)       every table the runs allow (the efficiency tables too)
    write_tables(root, out)  Markdown and CSV files in `out` (`make tables`); returns
                             the files and the notes, which the CLI prints

Tables show percent with two decimals, as the paper. Over seeds: mean and standard
deviation (`convatt.results.stats`). Table 2c, as the paper: per treebank the mean and
standard deviation over seeds, then the mean over treebanks of both ("subscript is
average standard deviation"). A metric with no tokens (no OOV token, say) is null in
result.json and left out of its means.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from convatt.data.formats import PTB, UD
from convatt.model.variants import PAPER_VARIANTS
from convatt.results import efficiency, protocol_comparison, significance
from convatt.results import summary as run_summary
from convatt.results.frames import (
    METRICS,
    label_of,
    load_curves,
    load_histories,
    load_records_to_report,
    model_name,
    model_order,
)
from convatt.results.markdown import Table, fmt, markdown_table, page
from convatt.results.output import Written
from convatt.results.paper import N_PAPER_TREEBANKS, OUR_LABELS, PAPER_EPOCHS, PAPER_SEEDS, paper_table, paper_table2d
from convatt.results.sequence_tables import sequence_tables
from convatt.results.stats import STD_DDOF, nanmean, range_text, seed_stats
from convatt.rundir.storage import write_text

METRIC_NAMES = {"all": "All", "oov": "OOV", "ambiguous": "Ambig."}
STAT_COLUMNS = [c for m in METRICS for c in (m, f"{m}_std")]
BESIDE_COLUMNS = [c for m in METRICS for c in (m, f"{m}_std", f"paper_{m}", f"paper_{m}_std", f"diff_{m}")]


# ---------------------------------------------------------------- numbers


def summarize(runs: pd.DataFrame, by: list[str], split: str = "test") -> pd.DataFrame:
    """Per group of `by`: seeds (count and list), the setting's mask_padding, mean / std in
    percent of each metric, the parameter count (if one) and the mean best epoch."""
    rows = []
    for key, group in runs.groupby(by, sort=False, dropna=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row.update(
            n_seeds=len(group),
            seeds=" ".join(str(s) for s in sorted(group["seed"])),
            mask_padding=bool(group["mask_padding"].iloc[0]),
        )
        for m in METRICS:
            row[m], row[f"{m}_std"], _ = seed_stats(100 * group[f"{split}_{m}"])
        params = group["parameters"].dropna().unique()
        row["parameters"] = int(params[0]) if len(params) == 1 else None
        row["best_epoch"] = nanmean(group["best_epoch"])
        rows.append(row)
    return pd.DataFrame(
        rows, columns=by + ["n_seeds", "seeds", "mask_padding"] + STAT_COLUMNS + ["parameters", "best_epoch"]
    )


def _with_paper(frame: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """`frame` (a `label` column, ours in STAT_COLUMNS) with the paper's numbers and ours − paper."""
    frame = frame.copy()
    for m in METRICS:
        frame[f"paper_{m}"] = frame["label"].map(paper[m]).astype(float)
        frame[f"paper_{m}_std"] = frame["label"].map(paper[f"{m}_std"]).astype(float)
        frame[f"diff_{m}"] = frame[m] - frame[f"paper_{m}"]
    return frame


def _filled(skeleton: pd.DataFrame, ours: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """The rows of `skeleton` (what the table lists) with ours where run: 0 seeds otherwise."""
    frame = skeleton.merge(ours.drop(columns="mask_padding"), on=on, how="left")
    frame["n_seeds"] = frame["n_seeds"].fillna(0).astype(int)
    frame["seeds"] = frame["seeds"].fillna("")
    frame["label"] = frame["variant"].map(label_of)
    frame["model"] = [model_name(label, setting) for label, setting in zip(frame["label"], frame["setting"])]
    return frame


def ptb_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 2b's numbers: per corpus, setting and variant (every variant of the paper, run or
    not, and the others that were run), ours and the paper's test accuracy and the difference."""
    ours = summarize(runs[runs["preset"] == PTB.name], ["corpus", "setting", "variant"])
    sections = ours[["corpus", "setting", "mask_padding"]].drop_duplicates()
    if sections.empty:
        sections = pd.DataFrame([{"corpus": None, "setting": "", "mask_padding": False}])
    skeleton = []
    for section in sections.itertuples(index=False):
        run = ours.loc[(ours["corpus"] == section.corpus) & (ours["setting"] == section.setting), "variant"]
        for variant in sorted(set(run) | set(PAPER_VARIANTS), key=lambda v: model_order(("", v))):
            skeleton.append({**section._asdict(), "variant": variant})
    frame = _filled(pd.DataFrame(skeleton), ours, ["corpus", "setting", "variant"])
    frame = _with_paper(frame, paper_table("table2b_ptb").set_index("model"))
    return frame[
        ["corpus", "setting", "mask_padding", "model", "variant", "n_seeds", "seeds"]
        + BESIDE_COLUMNS
        + ["parameters", "best_epoch"]
    ]


def ud_per_treebank(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, variant, treebank): seeds, and mean / std over seeds in percent."""
    return summarize(runs[runs["preset"] == UD.name], ["setting", "variant", "treebank"])


def _ud_models(per_tb: pd.DataFrame) -> pd.DataFrame:
    """The (setting, variant, mask_padding) of the UD tables: those that have runs, in model order."""
    models = per_tb[["setting", "variant", "mask_padding"]].drop_duplicates(["setting", "variant"])
    order = sorted(range(len(models)), key=lambda i: model_order(tuple(models.iloc[i][["setting", "variant"]])))
    return models.iloc[order].reset_index(drop=True)


PAPER47_COLUMNS = [f"paper47_{c}" for c in STAT_COLUMNS]


def ud_macro_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 2c's numbers: per model that has runs, the mean over the paper's treebanks that were
    run of the per-treebank mean over seeds (± the mean of the per-treebank stds), beside the
    paper's mean over the same treebanks (Table 2d, all words: `paper_all`, `diff_all`), and
    the paper's Table 2c (its 47 treebanks: `paper47_*`), which the page gives as a note."""
    paper_d = paper_table2d()
    paper_c = paper_table("table2c_ud_macro").set_index("model")
    per_tb = ud_per_treebank(runs)
    per_tb = per_tb[per_tb["treebank"].isin(paper_d.index)]
    rows = []
    for (setting, variant), group in per_tb.groupby(["setting", "variant"], sort=False):
        label = label_of(variant)
        same = paper_d.loc[list(group["treebank"]), label] if label in paper_d.columns else pd.Series(dtype=float)
        in_c = label in paper_c.index
        rows.append(
            {
                "setting": setting,
                "variant": variant,
                "mask_padding": bool(group["mask_padding"].iloc[0]),
                "model": model_name(label, setting),
                "n_treebanks": len(group),
                "seeds_per_treebank": range_text(group["n_seeds"]),
                **{c: nanmean(group[c]) for c in STAT_COLUMNS},
                "paper_all": nanmean(same),
                **{f"paper47_{c}": float(paper_c.at[label, c]) if in_c else math.nan for c in STAT_COLUMNS},
            }
        )
    columns = ["setting", "mask_padding", "model", "variant", "n_treebanks", "seeds_per_treebank"] + STAT_COLUMNS
    frame = pd.DataFrame(rows, columns=columns + ["paper_all"] + PAPER47_COLUMNS)
    frame["diff_all"] = frame["all"] - frame["paper_all"]
    frame = frame.iloc[
        sorted(range(len(frame)), key=lambda i: model_order(tuple(frame.iloc[i][["setting", "variant"]])))
    ]
    return frame[columns + ["paper_all", "diff_all"] + PAPER47_COLUMNS].reset_index(drop=True)


def ud_treebank_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Table 2d's numbers: per treebank (any that was run) and model, ours beside the paper's."""
    paper_d = paper_table2d()
    per_tb = ud_per_treebank(runs)
    if per_tb.empty:
        return pd.DataFrame()
    models = _ud_models(per_tb)
    treebanks = pd.DataFrame({"treebank": sorted(per_tb["treebank"].unique())})
    frame = _filled(treebanks.merge(models, how="cross"), per_tb, ["setting", "variant", "treebank"])
    frame["paper_all"] = [
        paper_d.at[tb, label] if tb in paper_d.index and label in paper_d.columns else math.nan
        for tb, label in zip(frame["treebank"], frame["label"])
    ]
    frame["diff_all"] = frame["all"] - frame["paper_all"]
    frame["paper_uppsala"] = frame["treebank"].map(paper_d["Uppsala"])
    return frame[
        ["treebank", "setting", "mask_padding", "model", "variant", "n_seeds", "seeds"]
        + STAT_COLUMNS
        + ["paper_all", "diff_all", "paper_uppsala"]
    ]


# ---------------------------------------------------------------- notes


def common_notes(runs: pd.DataFrame) -> list[str]:
    """What makes runs of any preset not comparable to the paper: seeds, smoke runs, settings."""
    notes = []
    n_seeds = runs.groupby(["preset", "corpus", "variant", "setting"]).size()
    if (n_seeds < PAPER_SEEDS).any():
        notes.append(
            f"{int((n_seeds < PAPER_SEEDS).sum())} model(s) have fewer than {PAPER_SEEDS} seeds "
            f"(the paper: {PAPER_SEEDS})."
        )
    smoke = runs["limit"].notna() | (pd.to_numeric(runs["max_epochs"], errors="coerce") < PAPER_EPOCHS)
    if smoke.any():
        notes.append(
            f"{int(smoke.sum())} of {len(runs)} runs are smoke runs (--limit, or --epochs below "
            f"{PAPER_EPOCHS}), marked [limit N] / [max N epochs]: not comparable to the paper. Runs "
            "of different settings are shown apart, never averaged together."
        )
    if runs["mask_padding"].any():
        notes.append("Models marked [mask] ran with --mask-padding; the paper lets pads take part in attention.")
    if (runs["protocol"] != "original").any():
        notes.append(
            "Models marked [keras3] (or with protocol items) trained with Keras 3's optimizer and loss "
            "rather than the paper's code's (`convatt train --protocol`, docs/protocol.md); "
            "runs made before convatt had protocols count as keras3."
        )
    return notes


def ptb_notes(runs: pd.DataFrame) -> list[str]:
    runs = runs[runs["preset"] == PTB.name]
    if runs.empty:
        return ["No finished PTB runs: only the paper's numbers are shown."]
    notes = []
    if runs["is_sample"].any():
        how = " ".join(n for n in runs.loc[runs["is_sample"], "corpus_note"].unique() if n)
        notes.append(
            "Results are on the PTB sample, not the paper's full WSJ (train 00-18, dev 19-21, "
            f"test 22-24): NOT comparable to the paper. {how}".rstrip()
        )
    notes += [f"PTB: {n}" for n in runs.loc[~runs["is_sample"], "corpus_note"].unique() if n]
    if runs["embeddings"].isna().any():
        notes.append(
            f"{int(runs['embeddings'].isna().sum())} PTB runs trained without pretrained word "
            "vectors (the paper: fastText wiki-news-300d-1M-subword.vec, frozen)."
        )
    return notes + common_notes(runs)


def ud_notes(runs: pd.DataFrame) -> list[str]:
    runs = runs[runs["preset"] == UD.name]
    if runs.empty:
        return ["No finished UD runs: only the paper's numbers are shown."]
    paper_tbs = paper_table2d().index
    notes = []
    treebanks = sorted(runs["treebank"].unique())
    inside = [t for t in treebanks if t in paper_tbs]
    if len(inside) < N_PAPER_TREEBANKS:
        notes.append(
            f"UD results cover {len(inside)} of the paper's {N_PAPER_TREEBANKS} treebanks: the macro "
            f"means are compared with the paper's Table 2d averaged over the same treebanks, not with "
            f"its {N_PAPER_TREEBANKS}-treebank Table 2c."
        )
    outside = [t for t in treebanks if t not in paper_tbs]
    if outside:
        notes.append(f"Treebanks not in the paper (left out of macro means): {', '.join(outside)}.")
    per_model = runs[runs["treebank"].isin(paper_tbs)].groupby(["setting", "variant"])["treebank"]
    if per_model.apply(frozenset).nunique() > 1:
        notes.append(
            "The models cover different sets of treebanks, so their macro means differ in what "
            "they average; compare each with its own \"Paper (same treebanks)\"."
        )
    return notes + common_notes(runs)


# ---------------------------------------------------------------- rendering


def _metric_header() -> list[str]:
    return [c for m in METRICS for c in (METRIC_NAMES[m], "Paper", "Δ")]


def _beside_cells(row) -> list[str]:
    """Ours (± std), the paper's (± std) and ours − paper, for each metric."""
    return [
        cell
        for m in METRICS
        for cell in (
            fmt(row[m], row[f"{m}_std"]),
            fmt(row[f"paper_{m}"], row[f"paper_{m}_std"]),
            fmt(row[f"diff_{m}"], signed=True),
        )
    ]


def _reference_rows(paper: pd.DataFrame, lead: int, trail: int = 0) -> list[list[str]]:
    """The paper's rows that are no variant of ours (Meta-Bi-LSTM, Uppsala...): its numbers only."""
    return [
        [name] + ["–"] * lead + [c for m in METRICS for c in ("–", fmt(p[m], p[f"{m}_std"]), "–")] + ["–"] * trail
        for name, p in paper.iterrows()
        if name not in OUR_LABELS
    ]


def ptb_markdown(frame: pd.DataFrame, n_runs: int, notes: list[str], title: str) -> str:
    """Table 2b's page: a section per corpus and setting, variants by the paper's label."""
    paper = paper_table("table2b_ptb").set_index("model")
    sections = list(frame.groupby(["corpus", "setting"], sort=False, dropna=False))
    texts = []
    for (corpus, setting), section in sections:
        rows = [[label_of(r["variant"]), str(r["n_seeds"])] + _beside_cells(r) for _, r in section.iterrows()]
        rows += _reference_rows(paper, lead=1)
        heading = f"### {corpus}{f' [{setting}]' if setting else ''}\n\n" if len(sections) > 1 or setting else ""
        texts.append(heading + markdown_table(["Model", "Seeds"] + _metric_header(), rows))
    intro = (
        f"Ours: mean ± standard deviation over seeds (ddof={STD_DDOF}) of {n_runs} finished "
        "PTB run(s); Paper: Dufter, Schmitt & Schütze (2020), Table 2b; Δ = ours − paper."
    )
    return page(title, intro, notes, *texts)


def _paper47_note(frame: pd.DataFrame) -> str:
    """The paper's Table 2c (its 47 treebanks) for the models shown, as one note."""
    parts = [
        f"{label} {fmt(p['all'], p['all_std'])} / {fmt(p['oov'], p['oov_std'])} / "
        f"{fmt(p['ambiguous'], p['ambiguous_std'])}"
        for label, p in paper_table("table2c_ud_macro").set_index("model").iterrows()
        if label in set(frame["model"]) or label not in OUR_LABELS
    ]
    return (
        f"The paper's Table 2c, the mean over its {N_PAPER_TREEBANKS} treebanks (all / OOV / ambiguous): "
        + "; ".join(parts)
        + ". It gives OOV and ambiguous accuracies only as these means, so they have no same-treebank "
        "comparison here."
    )


def ud_macro_markdown(frame: pd.DataFrame, notes: list[str], title: str) -> str:
    """Table 2c's page: ours beside the paper's mean over the same treebanks; its 47-treebank means as a note."""
    rows = [
        [r["model"], str(r["n_treebanks"]), r["seeds_per_treebank"]]
        + [fmt(r["all"], r["all_std"]), fmt(r["paper_all"]), fmt(r["diff_all"], signed=True)]
        + [fmt(r["oov"], r["oov_std"]), fmt(r["ambiguous"], r["ambiguous_std"])]
        for _, r in frame.iterrows()
    ]
    header = ["Model", "Treebanks", "Seeds", "All", "Paper (same treebanks)", "Δ", "OOV", "Ambig."]
    intro = (
        f"Ours: per treebank the mean and standard deviation over seeds (ddof={STD_DDOF}), then the mean "
        "over the paper's treebanks that were run, of both (± is the average standard deviation, as the "
        "paper). Paper (same treebanks): the paper's Table 2d averaged over the same treebanks as ours; "
        "Δ = ours − that."
    )
    return page(title, intro, notes + [_paper47_note(frame)], markdown_table(header, rows))


def ud_treebank_markdown(frame: pd.DataFrame, notes: list[str], title: str) -> str:
    """Table 2d's page: a row per treebank, a cell per model, and the mean over the paper's treebanks."""
    if frame.empty:
        return page(title, "", notes)
    models = frame[["setting", "variant", "model"]].drop_duplicates()
    cell = lambda ours, std, paper: f"{fmt(ours, std)} / {fmt(paper)} / {fmt(ours - paper, signed=True)}"
    rows = []
    for treebank, group in frame.groupby("treebank", sort=False):
        rows.append(
            [treebank.replace("_", " ")]
            + [cell(r["all"], r["all_std"], r["paper_all"]) for _, r in group.iterrows()]
            + [fmt(group["paper_uppsala"].iloc[0])]
        )
    in_paper = frame[frame["paper_uppsala"].notna()]  # the paper's treebanks
    mean_row = ["**Mean (paper's treebanks above)**"]
    for _, model in models.iterrows():
        ran = in_paper[
            (in_paper["setting"] == model["setting"])
            & (in_paper["variant"] == model["variant"])
            & in_paper["all"].notna()
        ]
        mean_row.append(cell(nanmean(ran["all"]), None, nanmean(ran["paper_all"])))
    rows.append(mean_row + [fmt(nanmean(in_paper.drop_duplicates("treebank")["paper_uppsala"]))])
    header = ["Treebank"] + list(models["model"]) + ["Uppsala (paper)"]
    intro = (
        f"Each cell: ours (mean ± standard deviation over seeds, ddof={STD_DDOF}) / paper (Table 2d) / "
        "Δ = ours − paper. Uppsala: Smith et al. (2018), as the paper quotes it."
    )
    return page(title, intro, notes, markdown_table(header, rows))


# ---------------------------------------------------------------- the tables


def ptb_table(runs: pd.DataFrame) -> Table:
    """Table 2b: PTB test accuracy (all / OOV / ambiguous), ours beside the paper's."""
    title, notes, frame = "Table 2b: PTB test accuracy (%)", ptb_notes(runs), ptb_frame(runs)
    n_runs = int((runs["preset"] == PTB.name).sum())
    return Table("table2b_ptb", title, frame, ptb_markdown(frame, n_runs, notes, title), notes)


def ud_macro_table(runs: pd.DataFrame) -> Table:
    """Table 2c: UD test accuracy, macro mean over treebanks, beside the paper's."""
    title = "Table 2c: UD test accuracy (%), macro mean over treebanks"
    return _ud_table("table2c_ud_macro", title, runs, ud_macro_frame, ud_macro_markdown)


def ud_treebank_table(runs: pd.DataFrame) -> Table:
    """Table 2d: test accuracy (all words) per treebank and variant, beside the paper's."""
    title = "Table 2d: UD test accuracy (%) per treebank, all words"
    return _ud_table("table2d_ud_per_treebank", title, runs, ud_treebank_frame, ud_treebank_markdown)


def _ud_table(name: str, title: str, runs: pd.DataFrame, to_frame, to_markdown) -> Table:
    """A UD table: its numbers (`to_frame`), then their Markdown (`to_markdown`), with the UD notes."""
    notes, frame = ud_notes(runs), to_frame(runs)
    return Table(name, title, frame, to_markdown(frame, notes, title), notes)


def build_tables(
    runs: pd.DataFrame, histories: pd.DataFrame | None = None, curves: pd.DataFrame | None = None
) -> list[Table]:
    """The tables the runs allow: 2b and the PTB efficiency table when there are PTB runs, 2c, 2d
    and the UD efficiency tables when there are UD runs, the protocol comparison when some corpus
    and variant ran under both protocols; always the summary of the runs (`run_summary`).
    Histories and curves: read again if not given (`load_records` gives all three from one reading)."""
    histories = load_histories(None, runs) if histories is None else histories
    curves = load_curves(None, runs) if curves is None else curves
    tables = []
    if (runs["preset"] == PTB.name).any():
        tables += [ptb_table(runs), efficiency.ptb_efficiency_table(runs, histories, curves)]
    if (runs["preset"] == UD.name).any():
        tables += [ud_macro_table(runs), ud_treebank_table(runs)]
        tables += efficiency.ud_efficiency_tables(runs, histories, curves)
    tables += sequence_tables(runs, histories, curves)
    comparison = protocol_comparison.protocol_table(runs, histories, curves)
    tables += significance.significance_tables(runs)
    return tables + ([comparison] if comparison else []) + [run_summary.summary_table(runs)]


def write_tables(runs: Path, out: Path, settings: list[str] | None = None) -> Written:
    """The tables of the finished runs under `runs`, as Markdown and CSV in `out`; only the runs of
    `settings` when given (`run_table.only_settings`: "paper", "keras3", ...)."""
    records = load_records_to_report(runs, settings)  # each run's files read once, here
    frame = records.runs
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths, notes = [], []
    for table in build_tables(frame, records.histories, records.curves):
        md, csv = out / f"{table.name}.md", out / f"{table.name}.csv"
        write_text(md, table.markdown)
        write_text(csv, table.frame.to_csv(index=False, float_format="%.4f"))
        paths += [md, csv]
        notes += [n for n in table.notes if n not in notes]
    if not (frame["preset"] == UD.name).any():
        notes.append("no finished UD runs, so Tables 2c and 2d were not written")
    if not (frame["preset"] == PTB.name).any():
        notes.append("no finished PTB runs, so Table 2b was not written")
    return Written(paths, notes)
