"""The paper's code's protocol against Keras 3's, on the same data and seeds (docs/protocol.md).

For every corpus and variant that finished under both the paper's setting (`--protocol original`,
the default) and `--protocol keras3`: test accuracy beside the paper's, the best and the last
epoch, and the start of the dev curve (after the first epochs and the first batches), each as the
mean ± std over that protocol's seeds; on UD also the mean over the treebanks, and per corpus the
gain of each variant over SAN+PE[add] under each protocol beside the paper's gain.

    protocol_frame(runs, histories, curves)   the numbers, one row per corpus, variant, protocol
    gain_frame(frame)                          the gains over SAN+PE[add]
    protocol_table(runs, histories, curves)    both as a `Table` (`convatt tables` writes it)
"""

from __future__ import annotations

import math

import pandas as pd

from convatt.data.formats import UD, has_treebanks
from convatt.results.efficiency import REFERENCE_VARIANT
from convatt.results.frames import label_of, model_order
from convatt.results.markdown import Table, fmt, markdown_table, page
from convatt.results.paper import paper_table, paper_table2d
from convatt.results.stats import STD_DDOF, seed_stats

SETTINGS = {"": "original", "keras3": "keras3"}  # the runs frame's `setting` -> the protocol's name
DEV_EPOCHS = (1, 3, 5)
DEV_BATCHES = (100, 200)
UD_MEAN = "mean"  # the corpus of the UD mean rows
KEY = ["preset", "corpus", "variant"]
SPREADS = ["all", "best_epoch", "epochs_run"]
DEV_COLUMNS = [f"dev_epoch_{e}" for e in DEV_EPOCHS] + [f"dev_batch_{b}" for b in DEV_BATCHES]
COLUMNS = (
    KEY
    + ["label", "protocol", "n_seeds", "seeds"]
    + [c for s in SPREADS for c in (s, f"{s}_std")]
    + DEV_COLUMNS
    + ["paper_all", "diff_all"]
)


def paired_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the two protocols whose corpus and variant finished under both."""
    runs = runs[runs["setting"].isin(list(SETTINGS))].assign(
        corpus=lambda f: f["treebank"].where(f["preset"].map(has_treebanks), f["corpus"])
    )
    both = runs.groupby(KEY)["setting"].transform("nunique") == len(SETTINGS)
    return runs[both]


def _dev_at(records: pd.DataFrame, column: str, value: int) -> dict[str, float]:
    """Per run_dir, the exact dev accuracy (percent) where `column` equals `value`, if recorded."""
    if records.empty:
        return {}
    at = records[records[column] == value]
    return dict(zip(at["run_dir"], 100 * at["dev_accuracy"].astype(float)))


def with_paper(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with the paper's test accuracy (all words) of each row's corpus and model, Table 2d
    on UD and 2b on PTB (NaN where the paper has none), and ours − paper."""
    table2d, table2b = paper_table2d(), paper_table("table2b_ptb").set_index("model")["all"]

    def paper(preset: str, corpus: str, label: str) -> float:
        if has_treebanks(preset):
            ok = corpus in table2d.index and label in table2d.columns
            return float(table2d.at[corpus, label]) if ok else math.nan
        return float(table2b[label]) if label in table2b.index else math.nan

    paper_all = [paper(*key) for key in zip(frame["preset"], frame["corpus"], frame["label"])]
    return frame.assign(paper_all=paper_all, diff_all=frame["all"] - pd.Series(paper_all, index=frame.index))


def _group_row(key: tuple, setting: str, group: pd.DataFrame, dev: dict[str, dict]) -> dict:
    row = dict(
        zip(KEY, key),
        label=label_of(key[2]),
        protocol=SETTINGS[setting],
        n_seeds=len(group),
        seeds=" ".join(str(s) for s in sorted(group["seed"])),
    )
    scale = {"all": 100 * group["test_all"], "best_epoch": group["best_epoch"], "epochs_run": group["epochs_run"]}
    for name, values in scale.items():
        row[name], row[f"{name}_std"], _ = seed_stats(values)
    for column, by_run in dev.items():
        row[column] = seed_stats(group["run_dir"].map(by_run))[0]
    return row


def protocol_frame(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """One row per corpus, variant and protocol (COLUMNS; percent, epochs); on UD also the mean
    over the treebanks (corpus "mean", seeds: the total). Empty if nothing ran under both."""
    paired = paired_runs(runs)
    dev = {f"dev_epoch_{e}": _dev_at(histories, "epoch", e) for e in DEV_EPOCHS}
    dev |= {f"dev_batch_{b}": _dev_at(curves, "step", b) for b in DEV_BATCHES}
    rows = [_group_row(key[:3], key[3], group, dev) for key, group in paired.groupby(KEY + ["setting"], sort=False)]
    frame = with_paper(pd.DataFrame(rows, columns=COLUMNS))
    return _sorted(pd.concat([frame, _ud_means(frame)], ignore_index=True))


def _ud_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Per UD variant and protocol, the mean over treebanks of the per-treebank means (stds too)."""
    ud = frame[frame["preset"] == UD.name]
    if ud["corpus"].nunique() < 2:
        return pd.DataFrame(columns=COLUMNS)
    numbers = COLUMNS[COLUMNS.index("all") :]
    means = ud.groupby(["variant", "label", "protocol"], sort=False)[numbers].mean().reset_index()
    counts = ud.groupby(["variant", "protocol"], sort=False)["n_seeds"].sum().reset_index()
    means = means.merge(counts, on=["variant", "protocol"]).assign(preset=UD.name, corpus=UD_MEAN, seeds="")
    return means[COLUMNS]


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    def key(i: int) -> tuple:
        r = frame.iloc[i]
        return (
            r["preset"],
            r["corpus"] == UD_MEAN,
            r["corpus"],
            model_order(("", r["variant"])),
            r["protocol"] != "original",
        )

    return frame.iloc[sorted(range(len(frame)), key=key)].reset_index(drop=True)


def gain_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per corpus, variant (not SAN+PE[add]) and protocol: its test accuracy minus SAN+PE[add]'s,
    ours and the paper's; on UD also the mean of the treebanks' gains (corpus "mean")."""
    frame = frame[frame["corpus"] != UD_MEAN]
    reference = frame[frame["variant"] == REFERENCE_VARIANT].set_index(["preset", "corpus", "protocol"])
    others = frame[frame["variant"] != REFERENCE_VARIANT]
    at = pd.MultiIndex.from_frame(others[["preset", "corpus", "protocol"]])
    others, at = others[at.isin(reference.index)], at[at.isin(reference.index)]
    gains = others.assign(
        gain=others["all"].to_numpy() - reference["all"].reindex(at).to_numpy(),
        paper_gain=others["paper_all"].to_numpy() - reference["paper_all"].reindex(at).to_numpy(),
    )
    columns = ["preset", "corpus", "variant", "label", "protocol", "gain", "paper_gain"]
    ud = gains[gains["preset"] == UD.name]
    if frame.loc[frame["preset"] == UD.name, "corpus"].nunique() < 2:  # no mean rows in `frame` either
        return gains[columns].reset_index(drop=True)
    means = (
        ud.groupby(["preset", "variant", "label", "protocol"], sort=False)[["gain", "paper_gain"]]
        .mean()
        .reset_index()
        .assign(corpus=UD_MEAN)
    )
    return pd.concat([gains[columns], means[columns]], ignore_index=True)


# ---------------------------------------------------------------- rendering


def _epochs_cell(mean: float, std: float) -> str:
    if pd.isna(mean):
        return "–"
    return f"{mean:.1f}" + ("" if pd.isna(std) else f" ± {std:.1f}")


def _dev_cell(row, columns: list[str]) -> str:
    return " / ".join("–" if pd.isna(row[c]) else f"{row[c]:.1f}" for c in columns)


def _comparison_rows(frame: pd.DataFrame) -> list[list[str]]:
    return [
        [
            f"**{r['corpus']}**" if r["corpus"] == UD_MEAN else r["corpus"],
            r["label"],
            r["protocol"],
            str(r["n_seeds"]),
            fmt(r["all"], r["all_std"]),
            fmt(r["paper_all"]),
            fmt(r["diff_all"], signed=True),
            _epochs_cell(r["best_epoch"], r["best_epoch_std"]),
            _epochs_cell(r["epochs_run"], r["epochs_run_std"]),
            _dev_cell(r, DEV_COLUMNS[: len(DEV_EPOCHS)]),
            _dev_cell(r, DEV_COLUMNS[len(DEV_EPOCHS) :]),
        ]
        for _, r in frame.iterrows()
    ]


def _gain_rows(gains: pd.DataFrame) -> list[list[str]]:
    wide = gains.pivot_table(
        index=["preset", "corpus", "variant", "label"], columns="protocol", values=["gain", "paper_gain"], sort=False
    )
    return [
        [
            f"**{corpus}**" if corpus == UD_MEAN else corpus,
            label,
            *(fmt(wide.at[(preset, corpus, variant, label), ("gain", p)], signed=True) for p in SETTINGS.values()),
            fmt(wide.at[(preset, corpus, variant, label), ("paper_gain", "original")], signed=True),
        ]
        for preset, corpus, variant, label in wide.index
    ]


TITLE = "The paper's code's protocol against Keras 3's"
INTRO = (
    "The same corpora, variants and seeds trained under `--protocol original` (the default: the "
    "paper's code's optimizer, loss, dropout, +R, PAD inputs and early-stopping metric) and "
    "`--protocol keras3`. Mean ± standard deviation over each protocol's seeds "
    f"(ddof={STD_DDOF}); test accuracy in percent beside the paper's (Table 2d on UD, 2b on PTB), "
    "Δ = ours − paper; epochs: the best (restored) and the last one run; dev accuracy (exact, "
    "percent) after the first epochs and after the first batches (curve.csv). UD \"mean\": over "
    "the treebanks above (Seeds: runs in all)."
)


def protocol_markdown(frame: pd.DataFrame) -> str:
    """The comparison and the gains over SAN+PE[add] as one Markdown page."""
    dev_epochs = "Dev after epoch " + " / ".join(map(str, DEV_EPOCHS))
    dev_batches = "Dev after batch " + " / ".join(map(str, DEV_BATCHES))
    header = [
        "Corpus",
        "Model",
        "Protocol",
        "Seeds",
        "Test all",
        "Paper",
        "Δ",
        "Best epoch",
        "Epochs run",
        dev_epochs,
        dev_batches,
    ]
    sections = [markdown_table(header, _comparison_rows(frame))]
    gains = gain_frame(frame)
    if not gains.empty:
        gain_header = (
            ["Corpus", "Model"]
            + [f"Gain over {label_of(REFERENCE_VARIANT)}, {p}" for p in SETTINGS.values()]
            + ["Paper's gain"]
        )
        sections.append(
            f"### Test accuracy gained over {label_of(REFERENCE_VARIANT)}\n\n"
            + markdown_table(gain_header, _gain_rows(gains))
        )
    return page(TITLE, INTRO, [], *sections)


def protocol_table(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> Table | None:
    """The comparison as a `Table` ("protocol_comparison"), None when nothing ran under both protocols."""
    frame = protocol_frame(runs, histories, curves)
    if frame.empty:
        return None
    return Table("protocol_comparison", TITLE, frame, protocol_markdown(frame))
