"""Longer runs of a causal sequence task, finished or still training: does a lead at a small
budget last? Numbers first, then the table and the figure.

    progress_frame(records)   per run: finished or not, epochs and batches so far, dev bits per
                              symbol at the same batch counts (CHECKPOINTS) and at its last and
                              best curve point, test bits per symbol once finished
    progress_table(...)       the Markdown table (`Table` "lm_long"), with `summary_frame`'s
                              means over seeds at the same batch counts
    progress_figure(...)      dev bits per symbol against batches, one line per run, the n-gram
                              baselines' dev bits beside them
    write_progress(root, out) both, from the run directories under `root` (read, never written)
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from convatt.results.frames import RunRecords, in_model_order, load_records
from convatt.results.markdown import Table, markdown_table, page
from convatt.results.stats import seed_stats
from convatt.rundir.schema import DEV_BITS_COLUMN
from convatt.rundir.storage import write_text

CHECKPOINTS = (400, 1000, 2000, 3000, 4000)  # batches; 400: the 414-batch runs' last curve point; 60 epochs: 4,140
SHORT_BUDGET = 414  # batches of `make lm-all`'s 6 epochs


def _at_step(curve: pd.DataFrame, step: int) -> float:
    point = curve[curve["step"] == step]
    return float(point[DEV_BITS_COLUMN].iloc[0]) if len(point) else math.nan


def _run_row(run: pd.Series, curve: pd.DataFrame) -> dict:
    finished = not run["running"]
    epochs = int(run["epochs_run"])  # a running run's: the epochs history.csv holds
    row = dict(variant=run["variant"], setting=run["setting"], model=run["model"], seed=int(run["seed"]))
    row.update(finished=finished, epochs=epochs, max_epochs=run["max_epochs"])
    row["batches"] = int(curve["step"].max()) if len(curve) else 0
    for step in CHECKPOINTS:
        row[f"dev_bpc_{step}"] = _at_step(curve, step)
    best = curve.loc[curve[DEV_BITS_COLUMN].idxmin()] if len(curve) else None
    row["dev_bpc_last"] = float(curve[DEV_BITS_COLUMN].iloc[-1]) if len(curve) else math.nan
    row["dev_bpc_best"] = math.nan if best is None else float(best[DEV_BITS_COLUMN])
    row["best_step"] = math.nan if best is None else int(best["step"])
    row["test_bpc"] = float(run["test_bits_per_symbol"]) if finished else math.nan
    row["parameters"] = run["parameters"] if finished else math.nan
    return row


def progress_frame(records: RunRecords) -> pd.DataFrame:
    """One row per run (finished or running) that has a dev bits-per-symbol curve."""
    curves = records.curves
    rows = []
    for _, run in records.runs.iterrows():
        curve = curves[curves["run_dir"] == run["run_dir"]].sort_values("step") if len(curves) else curves
        if curve.empty or DEV_BITS_COLUMN not in curve or curve[DEV_BITS_COLUMN].isna().all():
            continue
        rows.append(_run_row(run, curve.dropna(subset=[DEV_BITS_COLUMN])))
    frame = pd.DataFrame(rows)
    return in_model_order(frame, []).sort_values(["seed"], kind="stable") if rows else frame


def _bits(value: float) -> str:
    return "–" if pd.isna(value) else f"{value:.3f}"


def _status(r: pd.Series) -> str:
    if r["finished"]:
        return f"finished, {r['epochs']} epoch{'s' if r['epochs'] != 1 else ''}"
    return f"running, epoch {r['epochs']} of {int(r['max_epochs'])} done" if not pd.isna(r["max_epochs"]) else "running"


def progress_table(frame: pd.DataFrame, baselines: pd.DataFrame | None, when: str) -> Table:
    """`lm_long`: each run's dev bits per character at the same batch counts, then its last and best."""
    frame = in_model_order(frame, []) if len(frame) else frame
    header = ["Model", "Seed", "Status", "Batches", *[f"Dev bpc at {s:,}" for s in CHECKPOINTS]]
    header += ["Dev bpc, last", "Dev bpc, best (batch)", "Test bpc"]
    rows = [
        [r["model"], str(r["seed"]), _status(r), f"{r['batches']:,}", *[_bits(r[f"dev_bpc_{s}"]) for s in CHECKPOINTS],
         _bits(r["dev_bpc_last"]), f"{_bits(r['dev_bpc_best'])} ({int(r['best_step']):,})", _bits(r["test_bpc"])]
        for _, r in frame.iterrows()
    ]  # fmt: skip
    for _, b in (baselines if baselines is not None else pd.DataFrame()).iterrows():
        dev = _bits(b["dev_bpc"])
        rows.append(
            [b["model"], "–", "counted on train", "–", *["–"] * len(CHECKPOINTS), dev, dev, _bits(b["test_bpc"])]
        )
    title = "Character language model, longer training: dev bits per character by batches"
    intro = (
        f"Read {when}. Each run's dev bits per character (curve.csv, every 100 batches) at the same "
        f"batch counts ({SHORT_BUDGET} batches = the 6-epoch runs' budget, whose last curve point is 400), "
        "at its last curve point and at its best; test bits once the run has finished (early stopping on "
        "dev accuracy, patience 3). \"running\": the run was still training, its numbers are partial; "
        "–: not reached (yet). The n-gram rows: the same text's Kneser-Ney models (their dev and test "
        "bits per character), for scale."
    )
    summary = f"## {OVER_SEEDS}\n\n{SUMMARY_INTRO}\n\n{summary_markdown(summary_frame(frame))}"
    return Table("lm_long", title, frame, page(title, intro, [], markdown_table(header, rows), summary))


OVER_SEEDS = "Per setting, over seeds"
SUMMARY_INTRO = (
    "Mean ± standard deviation (ddof=0) over the seeds that have reached each batch count, "
    "(k/n): only k of the setting's n runs have; test bits over the finished runs."
)


def summary_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per setting: at each checkpoint, and for test bits, the mean, std and number of the runs
    that have a value (`seed_stats`), with the setting's number of runs."""
    rows = []
    for (setting, variant), group in frame.groupby(["setting", "variant"], sort=False) if len(frame) else []:
        row = dict(setting=setting, variant=variant, model=group["model"].iloc[0], runs=len(group))
        for column in [*(f"dev_bpc_{s}" for s in CHECKPOINTS), "test_bpc"]:
            row[column], row[f"{column}_std"], row[f"{column}_n"] = seed_stats(group[column])
        rows.append(row)
    return in_model_order(pd.DataFrame(rows), []) if rows else pd.DataFrame(rows)


def _mean_cell(r: pd.Series, column: str) -> str:
    if r[f"{column}_n"] == 0:
        return "–"
    text = f"{r[column]:.3f}" + ("" if pd.isna(r[f"{column}_std"]) else f" ± {r[f'{column}_std']:.3f}")
    return text + ("" if r[f"{column}_n"] == r["runs"] else f" ({r[f'{column}_n']}/{r['runs']})")


def summary_markdown(summary: pd.DataFrame) -> str:
    header = ["Model", "Runs", *[f"Dev bpc at {s:,}" for s in CHECKPOINTS], "Test bpc"]
    rows = [
        [r["model"], str(r["runs"]), *[_mean_cell(r, f"dev_bpc_{s}") for s in CHECKPOINTS], _mean_cell(r, "test_bpc")]
        for _, r in summary.iterrows()
    ]
    return markdown_table(header, rows)


def progress_figure(records: RunRecords, frame: pd.DataFrame, baselines: pd.DataFrame | None):
    """Dev bits per character against batches: one line per run (a colour per variant), the
    n-gram models' dev bits as dotted lines, the 6-epoch budget as a vertical line."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.8))
    ax = fig.add_subplot()
    colours = {v: f"C{i}" for i, v in enumerate(dict.fromkeys(frame["variant"]))}
    styles = ["-", "--", ":", "-."]
    for _, r in frame.iterrows():
        run_dir = records.runs[(records.runs["variant"] == r["variant"]) & (records.runs["seed"] == r["seed"])][
            "run_dir"
        ]
        curve = records.curves[records.curves["run_dir"].isin(run_dir)].sort_values("step")
        label = f"{r['model']} seed {r['seed']}" + ("" if r["finished"] else " (running)")
        style = dict(color=colours[r["variant"]], label=label, marker="o", markersize=2)  # a lone point shows too
        ax.plot(curve["step"], curve[DEV_BITS_COLUMN], styles[(r["seed"] - 1) % 4], **style)
    for _, b in (baselines if baselines is not None else pd.DataFrame()).iterrows():
        if b["order"] > 1:
            ax.axhline(b["dev_bpc"], color="grey", linestyle=":", linewidth=1)
            ax.annotate(b["model"].split(" ")[0], (ax.get_xlim()[1], b["dev_bpc"]), fontsize=7, ha="right", va="bottom")
    ax.axvline(SHORT_BUDGET, color="black", linewidth=0.8, linestyle="--")
    ax.annotate(f" {SHORT_BUDGET} batches (make lm-all)", (SHORT_BUDGET, ax.get_ylim()[1]), fontsize=7, va="top")
    ax.set(xlabel="batches", ylabel="dev bits per character", title="Character LM, longer training")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def write_progress(root: Path, out: Path, when: str, baselines: pd.DataFrame | None = None) -> list[Path]:
    """`lm_long.md`, `lm_long.csv` and `lm_long_dev_by_step.png` in `out` from the runs under `root`."""
    from convatt.results.output import save

    records = load_records(Path(root), include_running=True)
    frame = progress_frame(records)
    table = progress_table(frame, baselines, when)
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / f"{table.name}.md", out / f"{table.name}.csv"
    write_text(md, table.markdown)
    write_text(csv, table.frame.to_csv(index=False, float_format="%.4f"))
    paths = [md, csv, *save(progress_figure(records, frame, baselines), out / "lm_long_dev_by_step")]
    for pdf in [p for p in paths if p.suffix == ".pdf"]:
        pdf.unlink()
    return [p for p in paths if p.suffix != ".pdf"]
