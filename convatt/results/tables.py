"""Finished runs -> the paper's Tables 2b, 2c and 2d, with the paper's numbers beside ours.

Numbers first, rendering second: `convatt.results.table_frames` computes each table as a
DataFrame (what goes to CSV) and its notes; `ptb_table`, ... here render it to Markdown
with its notes as a `Table`.

    build_tables(runs)       every table the runs allow (the efficiency tables too)
    write_tables(root, out)  Markdown and CSV files in `out` (`make tables`); returns
                             the files and the notes, which the CLI prints
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from convatt.data.formats import PTB, UD
from convatt.results import efficiency, protocol_comparison, significance_tables
from convatt.results import summary as run_summary
from convatt.results.frames import METRICS, label_of, load_curves, load_histories, load_records_to_report
from convatt.results.markdown import Table, fmt, markdown_table, page
from convatt.results.output import Written
from convatt.results.paper import N_PAPER_TREEBANKS, OUR_LABELS, paper_table
from convatt.results.sequence_tables import sequence_tables
from convatt.results.stats import STD_DDOF, nanmean
from convatt.results.table_frames import (
    METRIC_NAMES,
    ptb_frame,
    ptb_notes,
    ud_macro_frame,
    ud_notes,
    ud_treebank_frame,
)
from convatt.rundir.storage import write_text

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
    tables += significance_tables.significance_tables(runs)
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
