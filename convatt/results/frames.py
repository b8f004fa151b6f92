"""Finished runs as data frames: what each run is, and what it measured.

A finished run is a directory holding `result.json` (written last by `convatt train`),
with `config.json`, `history.csv` and `curve.csv` beside it. Runs are found by
scanning for result.json anywhere under a root, and described by its content,
never by the path, so any layout works (the Makefile's is
`ptb/<variant>/seed<S>/` and `ud/UD_<Treebank>/<variant>/seed<S>/`).

    load_records(root)    every run read once: a `RunRecord` each (row, history, curve),
                          as `RunRecords` whose .runs, .histories and .curves are the three below
    load_runs(root)       one row per finished run (accuracies as fractions)
    load_histories(root)  one row per run and epoch (history.csv)
    load_curves(root)     one row per run and curve point (curve.csv)

Every file is checked (`convatt.rundir.reading`): a damaged run is left out of all three
with a `RunWarning` naming the file and what is wrong, so the tables and the plots
always cover the same runs. `convatt tables` and `convatt plot` read each file once
(`load_records`) and hand the frames down.

Runs still training (config.json and history.csv or curve.csv, no result.json yet) are
left out unless asked for (`include_running=True`, `convatt plot --include-running`):
then they have a row with `running` true, their identity from config.json, no scores,
and the epochs and curve points written so far.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from convatt.data.formats import CHAR_LM, TOY, has_treebanks
from convatt.data.ud import treebank_key, treebank_name
from convatt.errors import ConvattError
from convatt.model.variants import VARIANTS
from convatt.rundir.reading import DamagedRunError, FinishedRun, RunningRun, RunWarning, read_run, read_running
from convatt.rundir.schema import RESULT_FILE

METRICS = ("all", "oov", "ambiguous")
SPLITS = ("dev", "test")
# What a run is: the columns histories and curves carry too. `setting` is `DeparturesFromPaper.label()`;
# `mask_padding` and `protocol` come from the DeparturesFromPaper itself.
IDENTITY_COLUMNS = [
    "run_dir",
    "preset",
    "corpus",
    "treebank",
    "variant",
    "label",
    "model",
    "seed",
    "mask_padding",
    "setting",
    "protocol",
    "running",
]
RESULT_DETAILS = [
    "parameters",
    "epochs_run",
    "best_epoch",
    "wall_seconds",
    "backend",
    "convatt_version",
    "source_commit",
    "machine",
    "cpu",
    "cpu_features",
    "onednn",
    "package_versions",
]
RUN_COLUMNS = (
    IDENTITY_COLUMNS
    + ["is_sample", "corpus_note", "embeddings", "limit", "max_epochs", "curve_every", "curve_until"]
    + [f"{split}_{m}" for split in SPLITS for m in METRICS]
    + [f"{split}_n_{m}" for split in SPLITS for m in METRICS]
    + [f"{split}_bits_per_symbol" for split in SPLITS]  # a causal sequence task's (NaN for the tagger)
    + RESULT_DETAILS
)
# Runs that repeat one of these are counted once.
RUN_KEY = ["preset", "corpus", "variant", "setting", "seed"]


def find_results(root: Path) -> list[Path]:
    """Every result.json under `root` (sorted), or `root` itself if it is one."""
    root = Path(root)
    if root.is_file() and root.name == RESULT_FILE:
        return [root]
    if not root.is_dir():
        raise ConvattError("no such runs directory", root)
    return sorted(root.rglob(RESULT_FILE))


def label_of(variant: str) -> str:
    """The paper's name of a variant ("SAN+PE[add]"), or the variant itself if unknown."""
    return VARIANTS[variant].label if variant in VARIANTS else variant


def model_name(label: str, setting: str) -> str:
    """The display name of a variant: its paper label, then its setting if any ("SAN [mask]")."""
    return f"{label} [{setting}]" if setting else label


def _row(run: FinishedRun) -> dict:
    result, config = run.result, run.config
    label = result.label or label_of(result.variant)
    row = {
        "run_dir": str(run.run_dir),
        "preset": result.preset,
        "corpus": result.corpus,
        "treebank": treebank_key(result.corpus) if has_treebanks(result.preset) else None,
        "variant": result.variant,
        "label": label,
        "model": model_name(label, run.setting.label()),
        "seed": result.seed,
        "mask_padding": run.setting.mask_padding,
        "setting": run.setting.label(),
        "protocol": run.setting.protocol,
        "running": False,
        "is_sample": result.is_sample,
        "corpus_note": result.corpus_note,
        "embeddings": config.embeddings if config else None,
        "limit": config.limit if config else None,
        "max_epochs": config.epochs if config else None,
        "curve_every": config.curve_every if config else None,
        "curve_until": config.curve_until if config else None,
    }
    for split in SPLITS:
        scores = getattr(result, split)
        for m in METRICS:
            row[f"{split}_{m}"] = math.nan if scores.get(m) is None else float(scores[m])
            row[f"{split}_n_{m}"] = scores.get(f"n_{m}")
        bits = scores.get("bits_per_symbol")
        row[f"{split}_bits_per_symbol"] = math.nan if bits is None else float(bits)
    row.update({k: getattr(result, k) for k in RESULT_DETAILS})
    return row


def _running_row(run: RunningRun) -> dict:
    """The row of a run still training: its identity from config.json, no scores yet."""
    config = run.config
    if config.preset in ("ud", CHAR_LM.name):
        corpus = treebank_name(config.data)
    elif config.preset == TOY.name:
        corpus = _find_block_name(config.data)
    else:
        corpus = "PTB-sample" if Path(config.data).name.startswith("ptb-sample") else "PTB"
    label = label_of(config.variant)
    row = dict.fromkeys(RUN_COLUMNS, math.nan)
    row.update(
        run_dir=str(run.run_dir),
        preset=config.preset,
        corpus=corpus,
        treebank=treebank_key(corpus) if config.preset == "ud" else None,
        variant=config.variant,
        label=label,
        model=model_name(label, config.setting.label()),
        seed=config.seed,
        mask_padding=config.setting.mask_padding,
        setting=config.setting.label(),
        protocol=config.setting.protocol,
        running=True,
        is_sample=corpus == "PTB-sample",
        corpus_note="",
        embeddings=config.embeddings,
        limit=config.limit,
        max_epochs=config.epochs,
        curve_every=config.curve_every,
        curve_until=config.curve_until,
        epochs_run=len(run.history),
    )
    return row


def _find_block_name(spec_path: str) -> str:
    from convatt.data.find_block import FindBlockSpec

    try:
        return FindBlockSpec.load(Path(spec_path)).name
    except ConvattError:  # moved or changed since the run started
        return Path(spec_path).stem


@dataclass(frozen=True)
class RunRecord:
    """One run, its files read once: its row of `load_runs`, its history and its curve."""

    row: dict
    history: pd.DataFrame
    curve: pd.DataFrame

    @classmethod
    def finished(cls, run: FinishedRun) -> RunRecord:
        return cls(_row(run), run.history, run.curve)

    @classmethod
    def unfinished(cls, run: RunningRun) -> RunRecord:
        return cls(_running_row(run), run.history, run.curve)

    def _with_identity(self, record: pd.DataFrame) -> pd.DataFrame:
        return record.assign(**{k: self.row[k] for k in IDENTITY_COLUMNS})[IDENTITY_COLUMNS + list(record.columns)]


@dataclass(frozen=True)
class RunRecords:
    """The runs of a root, each read once; the frames the tables and plots take, made from them."""

    records: tuple[RunRecord, ...]

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per run (RUN_COLUMNS), as `load_runs`."""
        return pd.DataFrame([r.row for r in self.records], columns=RUN_COLUMNS)

    @cached_property
    def histories(self) -> pd.DataFrame:
        """One row per run and epoch, with the run's IDENTITY_COLUMNS, as `load_histories`."""
        return _concat([r._with_identity(r.history) for r in self.records if not r.history.empty])

    @cached_property
    def curves(self) -> pd.DataFrame:
        """One row per run and curve point, with the run's IDENTITY_COLUMNS, as `load_curves`."""
        return _concat([r._with_identity(r.curve) for r in self.records if not r.curve.empty])

    def where(self, keep) -> RunRecords:
        """The records whose rows of `runs` `keep` (booleans, one per row) marks."""
        return RunRecords(tuple(r for r, k in zip(self.records, list(keep)) if k))


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=IDENTITY_COLUMNS)


def read_runs(root: Path) -> list[FinishedRun]:
    """Every finished run under `root` whose files are whole; a `RunWarning` for each other."""
    runs = []
    for path in find_results(root):
        try:
            runs.append(read_run(path))
        except DamagedRunError as e:
            warnings.warn(f"left out a damaged run: {e}", RunWarning, stacklevel=2)
    return runs


def find_running(root: Path) -> list[Path]:
    """The run directories under `root` with config.json and history.csv or curve.csv but no
    result.json: runs still training (or stopped before they finished)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(
        p.parent
        for p in root.rglob("config.json")
        if not (p.parent / "result.json").exists()
        and any((p.parent / f).exists() for f in ("history.csv", "curve.csv"))
    )


def _read_running(root: Path) -> list[RunRecord]:
    records = []
    for run_dir in find_running(root):
        try:
            records.append(RunRecord.unfinished(read_running(run_dir)))
        except DamagedRunError as e:
            warnings.warn(f"left out a running run: {e}", RunWarning, stacklevel=3)
    return records


def load_records(root: Path, include_running: bool = False) -> RunRecords:
    """Every finished run under `root` read once (`RunRecords`); runs still training too if
    `include_running`. Two finished runs of the same RUN_KEY would be counted twice in a mean:
    the first (by path) is kept, with a `RunWarning`."""
    records = [RunRecord.finished(run) for run in read_runs(root)]
    frame = pd.DataFrame([r.row for r in records], columns=RUN_COLUMNS)
    repeated = frame.duplicated(RUN_KEY, keep="first")
    if repeated.any():
        paths = ", ".join(frame.loc[repeated, "run_dir"])
        warnings.warn(
            f"{int(repeated.sum())} runs repeat another run's preset, corpus, variant, setting and "
            f"seed and are left out: {paths}",
            RunWarning,
            stacklevel=2,
        )
    kept = [r for r, rep in zip(records, repeated.to_numpy()) if not rep]
    if include_running:
        kept += _read_running(root)
    return RunRecords(tuple(kept))


def load_runs(root: Path) -> pd.DataFrame:
    """One row per finished run under `root`: RUN_COLUMNS, accuracies as fractions.

    A metric with no tokens is NaN. Two runs of the same RUN_KEY would be counted
    twice in a mean: the first (by path) is kept, with a `RunWarning`.
    """
    return load_records(root).runs


def _load_records(root: Path, runs: pd.DataFrame | None, which: str) -> pd.DataFrame:
    """The `which` ("history" or "curve") of each run of `runs`, with the run's IDENTITY_COLUMNS."""
    if runs is None:
        records = load_records(root)
        return records.histories if which == "history" else records.curves
    frames = []
    for _, row in runs.iterrows():
        try:
            record = getattr(read_run(Path(row["run_dir"]) / RESULT_FILE), which)
        except DamagedRunError as e:  # damaged since `runs` was read
            warnings.warn(f"left out a damaged run: {e}", RunWarning, stacklevel=3)
            continue
        if not record.empty:
            frames.append(
                record.assign(**{k: row[k] for k in IDENTITY_COLUMNS})[IDENTITY_COLUMNS + list(record.columns)]
            )
    return _concat(frames)


def load_histories(root: Path, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """history.csv of every finished run (or of `runs`, read again), one row per (run, epoch), with the
    run's identity. To read each run once, use `load_records(root).histories`."""
    return _load_records(root, runs, "history")


def load_curves(root: Path, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """curve.csv of every finished run (or of `runs`, read again), one row per (run, step), with the
    run's identity. To read each run once, use `load_records(root).curves`."""
    return _load_records(root, runs, "curve")


_VARIANT_RANK = {v: i for i, v in enumerate(VARIANTS)}


def model_order(key: tuple[str, str]) -> tuple:
    """Sort key of a (setting, variant): the paper's setting ("") first, then the order of
    VARIANTS (the paper's Table 2 order), then unknown names alphabetically."""
    setting, variant = key
    return setting != "", setting, _VARIANT_RANK.get(variant, len(_VARIANT_RANK)), variant


def in_model_order(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """`frame` (with setting and variant columns) sorted by the columns `by`, then `model_order`."""
    if frame.empty:
        return frame
    keys = [(tuple(r[by]), model_order((r["setting"], r["variant"]))) for _, r in frame.iterrows()]
    order = sorted(range(len(frame)), key=lambda i: keys[i])
    return frame.iloc[order].reset_index(drop=True)


PAPER_SETTING = "paper"  # how `only_settings` names the paper's own setting (`DeparturesFromPaper().label()` is "")


def only_settings(frame: pd.DataFrame, settings: list[str] | None, runs: Path | None = None) -> pd.DataFrame:
    """The runs of `settings` ("paper": the paper's setting); an error naming those there are if none."""
    if settings is None:
        return frame
    wanted = {"" if s == PAPER_SETTING else s for s in settings}
    kept = frame[frame["setting"].isin(wanted)]
    if kept.empty:
        there = sorted({s or PAPER_SETTING for s in frame["setting"]})
        raise ConvattError(
            f"no finished run of the setting(s) {', '.join(map(repr, settings))}; the runs here "
            f"have {', '.join(map(repr, there))}",
            runs,
        )
    return kept


def load_records_to_report(root: Path, settings: list[str] | None = None, include_running: bool = False) -> RunRecords:
    """`load_records(root)` for the tables and plots: an error when there is no run (finished,
    or running if `include_running`), then only the runs of `settings` (`only_settings`)."""
    records = load_records(Path(root), include_running)
    if records.runs.empty:
        what = (
            "runs (result.json, or config.json and history.csv)" if include_running else "finished runs (result.json)"
        )
        raise ConvattError(f"no {what} under this directory", root)
    kept = only_settings(records.runs, settings, root)
    return records.where(records.runs.index.isin(kept.index))
