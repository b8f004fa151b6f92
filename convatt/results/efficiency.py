"""Learning efficiency as numbers: how fast each variant gets where SAN+PE[add] ends.

Per run, against the best dev accuracy that SAN+PE[add] (`REFERENCE_VARIANT`) reached
in its history.csv on the same corpus, setting and seed (its "reference"):

    epochs_P    the first epoch (history.csv) whose dev accuracy is at least P% of the
                reference, for P in 90, 95, 99
    batches_P   the first training batch (curve.csv's `step`) whose dev accuracy is at
                least P% of the reference: only as far as the curve goes (convatt train
                records it up to batch 2,000, `--curve-until`)
    auc         the area under the dev curve (percent) over the first `AUC_STEPS` = 2,000
                batches, by the trapezoid rule from the curve's first point to batch
                2,000, divided by the batches it spans: the curve's mean height, in
                percent. A run that ended before batch 2,000 (early stopping: its curve
                lacks the next point that was due; `run_files` checks that a curve is
                whole) holds the model it keeps, its best epoch's, from its last point
                on, so its curve goes on at that epoch's dev accuracy: runs that stop
                early are compared over the same 2,000 batches as the others. A curve
                cut short by `--curve-until` is not extended: its area covers what it
                recorded (`auc_until`: the last batch covered)

"At least" allows 1e-9 for float rounding. A run that never reaches a fraction has no
value for it (NaN), and is counted: over seeds a measure is the mean ± std over the
seeds that reached it, with the number of those (`<measure>_n`) beside the number of
seeds that could (`<measure>_of`: a reference run; a curve for batches and area). UD, as Table 2c: per treebank over
seeds, then the mean over treebanks of the means and of the stds (treebanks where no
seed reached a fraction are left out of that mean; `_n` sums the seeds).

    run_efficiency(runs, histories, curves)   one row per run
    ptb_efficiency_table(...), ud_efficiency_tables(...)   the `Table`s of `make tables`
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from convatt.data.formats import PTB, UD
from convatt.results.frames import in_model_order, label_of
from convatt.results.markdown import Table, markdown_table, page
from convatt.results.stats import STD_DDOF, nanmean, seed_stats

REFERENCE_VARIANT = "san-pe-add"
FRACTIONS = (0.90, 0.95, 0.99)
AUC_STEPS = 2000
TOLERANCE = 1e-9
SAME_DATA = ["preset", "corpus", "setting", "seed"]
PERCENTS = [round(100 * f) for f in FRACTIONS]
MEASURES = [f"batches_{p}" for p in PERCENTS] + [f"epochs_{p}" for p in PERCENTS] + ["auc"]
RUN_IDENTITY = ["preset", "corpus", "treebank", "setting", "mask_padding", "variant", "model", "seed"]


# ---------------------------------------------------------------- one curve


def first_reaching(x: np.ndarray, y: np.ndarray, threshold: float) -> float:
    """The first x whose y is at least `threshold` (less TOLERANCE), NaN if none is."""
    reached = np.flatnonzero(np.asarray(y, dtype=float) >= threshold - TOLERANCE)
    return float(x[reached[0]]) if reached.size else math.nan


def curve_area(steps: np.ndarray, accuracy: np.ndarray, until: int = AUC_STEPS) -> tuple[float, float]:
    """(mean height of the curve up to `until` by the trapezoid rule, last step used); NaN, NaN
    when no point is at or before `until`. A single point is its own mean."""
    keep = np.asarray(steps) <= until
    x, y = np.asarray(steps, dtype=float)[keep], np.asarray(accuracy, dtype=float)[keep]
    if x.size == 0:
        return math.nan, math.nan
    if x.size == 1:
        return float(y[0]), float(x[0])
    area = float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)))
    return area / float(x[-1] - x[0]), float(x[-1])


# ---------------------------------------------------------------- per run


def _one_run(run, reference: float, history: pd.DataFrame | None, curve: pd.DataFrame | None) -> dict:
    """The measures of one run (a row of `load_runs`), accuracies in percent."""
    row = {k: getattr(run, k) for k in RUN_IDENTITY}
    row["reference_best"] = 100 * reference
    row["best_dev"] = math.nan if history is None else 100 * float(history["dev_accuracy"].max())
    for p, f in zip(PERCENTS, FRACTIONS):
        target = f * reference  # NaN without a reference: never reached
        row[f"batches_{p}"] = (
            math.nan
            if curve is None
            else first_reaching(curve["step"].to_numpy(), curve["dev_accuracy"].to_numpy(), target)
        )
        row[f"epochs_{p}"] = (
            math.nan
            if history is None
            else first_reaching(history["epoch"].to_numpy(), history["dev_accuracy"].to_numpy(), target)
        )
    auc, until = (math.nan, math.nan) if curve is None else curve_area(*held_curve(run, history, curve))
    row.update(auc=100 * auc, auc_until=until, has_curve=curve is not None)
    return row


def held_curve(run, history: pd.DataFrame | None, curve: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The curve's steps and accuracies; when the run ended before `AUC_STEPS`, continued from its
    last point to `AUC_STEPS` at the dev accuracy of the epoch it keeps (`run.best_epoch`)."""
    steps, accuracy = curve["step"].to_numpy(dtype=float), curve["dev_accuracy"].to_numpy(dtype=float)
    if not len(steps) or history is None:
        return steps, accuracy
    every = _known(run.curve_every, steps[0])  # a run without config.json: the first point's step
    until = _known(run.curve_until, AUC_STEPS)
    next_due = steps[-1] + every
    ended = next_due <= AUC_STEPS and (until < 0 or next_due <= until)  # due, recorded if trained
    kept = history.loc[history["epoch"] == run.best_epoch, "dev_accuracy"]
    if not ended or kept.empty:
        return steps, accuracy
    return np.append(steps, [steps[-1], AUC_STEPS]), np.append(accuracy, [float(kept.iloc[0])] * 2)


def could_have(measure: str, per_run: pd.DataFrame) -> pd.Series:
    """Which runs could have `measure`: a reference for the fractions, a curve for batches and AUC."""
    has_reference, has_curve = per_run["reference_best"].notna(), per_run["has_curve"].astype(bool)
    if measure.startswith("batches"):
        return has_reference & has_curve
    return has_curve if measure == "auc" else has_reference


def run_efficiency(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """One row per run of `runs` (`load_runs`): RUN_IDENTITY, reference_best and best_dev (percent),
    MEASURES (NaN: not reached), auc_until, has_curve (a curve with at least one point)."""
    columns = RUN_IDENTITY + ["reference_best", "best_dev"] + MEASURES + ["auc_until", "has_curve"]
    history_of = dict(tuple(histories.groupby("run_dir"))) if not histories.empty else {}
    curve_of = dict(tuple(curves.groupby("run_dir"))) if not curves.empty else {}
    best = {run_dir: float(h["dev_accuracy"].max()) for run_dir, h in history_of.items()}
    is_reference = runs["variant"] == REFERENCE_VARIANT
    reference = {
        tuple(r[k] for k in SAME_DATA): best.get(r["run_dir"], math.nan) for _, r in runs[is_reference].iterrows()
    }
    rows = [
        _one_run(
            run,
            reference.get(tuple(getattr(run, k) for k in SAME_DATA), math.nan),
            history_of.get(run.run_dir),
            curve_of.get(run.run_dir),
        )
        for run in runs.itertuples(index=False)
    ]
    return pd.DataFrame(rows, columns=columns)


def _known(value, default: float) -> float:
    """`value` as a number, `default` where it is missing (None, NaN)."""
    return default if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


# ---------------------------------------------------------------- over seeds, over treebanks


def over_seeds(per_run: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group of `by` (plus the model): seeds, the reference, and per measure its mean, std,
    `_n` (seeds that reached it) and `_of` (seeds that could: `could_have`)."""
    rows = []
    for key, group in per_run.groupby(by + ["setting", "variant"], sort=False, dropna=False):
        row = dict(zip(by + ["setting", "variant"], key))
        row.update(
            mask_padding=bool(group["mask_padding"].iloc[0]),
            model=group["model"].iloc[0],
            n_seeds=len(group),
            reference_best=nanmean(group["reference_best"]),
        )
        for m in MEASURES:
            row[m], row[f"{m}_std"], row[f"{m}_n"] = seed_stats(group[m])
            row[f"{m}_of"] = int(could_have(m, group).sum())
        row["auc_until"] = float(group["auc_until"].min())
        rows.append(row)
    return in_model_order(pd.DataFrame(rows), by)


def over_treebanks(per_treebank: pd.DataFrame) -> pd.DataFrame:
    """Per model, as Table 2c: the mean over treebanks of the per-treebank means and stds; counts summed."""
    rows = []
    for (setting, variant), group in per_treebank.groupby(["setting", "variant"], sort=False):
        row = {
            "setting": setting,
            "variant": variant,
            "mask_padding": bool(group["mask_padding"].iloc[0]),
            "model": group["model"].iloc[0],
            "n_treebanks": len(group),
            "n_seeds": int(group["n_seeds"].sum()),
            "reference_best": nanmean(group["reference_best"]),
        }
        for m in MEASURES:
            row.update(
                {
                    m: nanmean(group[m]),
                    f"{m}_std": nanmean(group[f"{m}_std"]),
                    f"{m}_n": int(group[f"{m}_n"].sum()),
                    f"{m}_of": int(group[f"{m}_of"].sum()),
                }
            )
        row["auc_until"] = float(group["auc_until"].min())
        rows.append(row)
    return in_model_order(pd.DataFrame(rows), [])


# ---------------------------------------------------------------- rendering


def _measure_cell(row, m: str, decimals: int) -> str:
    """ "12.3 ± 1.2"; "12.3 ± 1.2 (2/3)" when not every seed reached it; "— (0/3)" when none did;
    "–" when no seed could (no reference run, no curve)."""
    total = int(row[f"{m}_of"])
    if total == 0:
        return "–"
    n, mean, std = int(row[f"{m}_n"]), row[m], row[f"{m}_std"]
    if n == 0:
        return f"— (0/{total})"
    text = f"{mean:,.{decimals}f}" + ("" if pd.isna(std) else f" ± {std:,.{decimals}f}")
    if m == "auc" and row["auc_until"] < AUC_STEPS:
        text += f" (to batch {row['auc_until']:,.0f})"
    return text if n == total else f"{text} ({n}/{total})"


def _markdown_rows(frame: pd.DataFrame, lead: list[str]) -> list[list[str]]:
    return [
        [str(r[c]) for c in lead]
        + [str(r["n_seeds"])]
        + [_measure_cell(r, m, 0 if m.startswith("batches") else 2 if m == "auc" else 1) for m in MEASURES]
        for _, r in frame.iterrows()
    ]


def _header(lead: list[str], seeds: str = "Seeds") -> list[str]:
    return (
        lead
        + [seeds]
        + [f"Batches to {p}%" for p in PERCENTS]
        + [f"Epochs to {p}%" for p in PERCENTS]
        + [f"Dev acc., first {AUC_STEPS:,} batches"]
    )


INTRO = (
    f"Batches (curve.csv) and epochs (history.csv) until dev accuracy first reaches 90%, 95% and 99% "
    f"of the best dev accuracy of {label_of(REFERENCE_VARIANT)} on the same corpus, setting and seed; "
    f"and the mean dev accuracy (%) over the first {AUC_STEPS:,} batches (trapezoid area under the "
    f"curve / batches spanned; a run that stopped before batch {AUC_STEPS:,} counts at the dev accuracy "
    f"of the epoch it keeps from its last curve point on). Mean ± standard deviation over seeds "
    f"(ddof={STD_DDOF}) that reached "
    "it; (k/n): only k of the n seeds reached it; —: none did. Batches are counted as far as curve.csv "
    f"goes (`--curve-until`, {AUC_STEPS:,} by default)."
)


def _notes(per_run: pd.DataFrame) -> list[str]:
    missing = per_run["reference_best"].isna()
    if not missing.any():
        return []
    return [
        f"{int(missing.sum())} of {len(per_run)} runs have no {label_of(REFERENCE_VARIANT)} run "
        "of the same corpus, setting and seed: no fractions for them (–)."
    ]


def ptb_efficiency_table(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> Table:
    """Learning efficiency on PTB: per corpus and model, over seeds."""
    ptb = runs[runs["preset"] == PTB.name]
    per_run = run_efficiency(ptb, histories, curves)
    frame = over_seeds(per_run, ["corpus"])
    title, notes = "Learning efficiency on PTB", _notes(per_run)
    markdown = page(
        title, INTRO, notes, markdown_table(_header(["Corpus", "Model"]), _markdown_rows(frame, ["corpus", "model"]))
    )
    return Table("efficiency_ptb", title, frame, markdown, notes)


def preset_efficiency_table(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame, fmt) -> Table:
    """Learning efficiency of one preset's runs (a `DataFormat` whose corpora are not averaged
    over: a causal sequence task's), per corpus and model, over seeds, as on PTB."""
    some = runs[runs["preset"] == fmt.name]
    per_run = run_efficiency(some, histories, curves)
    frame = over_seeds(per_run, ["corpus"])
    title, notes = f"Learning efficiency: {fmt.label}", _notes(per_run)
    markdown = page(
        title, INTRO, notes, markdown_table(_header(["Corpus", "Model"]), _markdown_rows(frame, ["corpus", "model"]))
    )
    return Table(f"efficiency_{fmt.name}", title, frame, markdown, notes)


def ud_efficiency_tables(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> list[Table]:
    """Learning efficiency on UD: the mean over treebanks (as Table 2c), and per treebank."""
    ud = runs[runs["preset"] == UD.name]
    per_run = run_efficiency(ud, histories, curves)
    per_treebank = over_seeds(per_run, ["treebank"])
    macro = over_treebanks(per_treebank)
    notes = _notes(per_run)
    title = "Learning efficiency on UD, mean over treebanks"
    intro = INTRO + " Per treebank over seeds, then the mean over treebanks (± the mean std), as Table 2c."
    rows = _markdown_rows(macro, ["model", "n_treebanks"])
    markdown = page(title, intro, notes, markdown_table(_header(["Model", "Treebanks"], "Runs"), rows))
    macro_table = Table("efficiency_ud", title, macro, markdown, notes)
    title = "Learning efficiency on UD, per treebank"
    per_tb_md = markdown_table(_header(["Treebank", "Model"]), _markdown_rows(per_treebank, ["treebank", "model"]))
    return [
        macro_table,
        Table("efficiency_ud_per_treebank", title, per_treebank, page(title, INTRO, notes, per_tb_md), notes),
    ]
