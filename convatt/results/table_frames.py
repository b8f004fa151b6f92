"""The paper's Tables 2b, 2c and 2d as numbers: DataFrames (what goes to CSV) with the paper's
numbers beside ours, and the notes on what makes runs not comparable to the paper.

    ptb_frame(runs)           Table 2b: PTB test accuracy per variant and setting
    ud_macro_frame(runs)      Table 2c: UD test accuracy, macro mean over treebanks
    ud_treebank_frame(runs)   Table 2d: UD test accuracy per treebank, all words

Tables show percent with two decimals, as the paper. Over seeds: mean and standard
deviation (`convatt.results.stats`). Table 2c, as the paper: per treebank the mean and
standard deviation over seeds, then the mean over treebanks of both ("subscript is
average standard deviation"). A metric with no tokens (no OOV token, say) is null in
result.json and left out of its means. Their Markdown: `convatt.results.tables`.
"""

from __future__ import annotations

import math

import pandas as pd

from convatt.data.formats import PTB, UD
from convatt.model.variants import PAPER_VARIANTS
from convatt.results.frames import METRICS, label_of, model_name, model_order
from convatt.results.paper import N_PAPER_TREEBANKS, PAPER_EPOCHS, PAPER_SEEDS, paper_table, paper_table2d
from convatt.results.stats import nanmean, range_text, seed_stats

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
