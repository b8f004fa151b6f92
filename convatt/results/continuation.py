"""Efficiency or capacity: trained runs continued as they are and converted (`convatt train
--from`), beside the same settings from scratch. Numbers first, then the page and its figure.

The runs are those of `make lm-continue` / `lm-continue-scratch` under one root and
`make ud-continue` / `ud-continue-scratch` under another (`expected_runs`: the Makefile's
layout), finished, still training or missing:

    LM  charlm/<from>/seed<S>            the source runs (make lm-all EPOCHS=60)
        charlm-continued/<v>/seed<S>     continued --from them: as they are (v = from), converted
        charlm-scratch/<v>/seed<S>       the converted settings from scratch, the same batches in all
    UD  ud/UD_<T>/<from>/seed<S>         the source runs (make ud-all)
        ud-continued/UD_<T>/<v>/seed<S>  continued --from them
        ud/UD_<T>/<v>/seed<S>            the converted settings from scratch (ud-all's runs)

    runs_frame(states)       one row per expected run: its role, status, dev and test scores, provenance
    gain_frame(frame)        per task (and treebank), each converted setting's gain over the plain
                             continuation, seed by seed, its mean and t-interval, and the reading

The page: `continuation_page` (its figure: `continuation_figure`; its answer: `continuation_answer`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from convatt.model.variants import CONTINUE_CHARLM_VARIANTS, CONTINUE_UD_VARIANTS, VARIANTS
from convatt.results.stats import seed_stats, t_interval
from convatt.rundir.reading import DamagedRunError, read_run, read_running
from convatt.rundir.schema import CONFIG_FILE, DEV_BITS_COLUMN, RESULT_FILE

PAGE = "efficiency_or_capacity"
SOURCE, CONTINUED, SCRATCH = "source", "continued", "scratch"
# Where a run's row comes from: its run directory, or the record of an earlier page (`continuation_record`)
DIRECTORY, RECORD = "directory", "record"
# Where an interval over seeds inside ±margin reads "no difference": a hundredth of a bit per
# character, a tenth of a point of tagging accuracy (the size of the last digit the tables show).
MARGINS = {"charlm": 0.01, "ud": 0.1}
UNITS = {"charlm": "bits per character", "ud": "points of accuracy"}


@dataclass(frozen=True)
class Expected:
    """One run the experiment needs, where the Makefile puts it and the target that trains it."""

    task: str  # "charlm" or "ud"
    role: str  # SOURCE, CONTINUED or SCRATCH
    variant: str
    seed: int
    treebank: str  # "UD_English-GUM"; "English-GUM" text for the char LM
    root: Path  # the RUNS of its make target
    where: str  # its directory under `root`
    target: str  # the make target that trains (or resumes) it

    @property
    def path(self) -> Path:
        return self.root / self.where


def expected_runs(lm_root: Path, ud_root: Path, treebanks: list[str], seeds=(1, 2, 3)) -> list[Expected]:
    """The runs of lm-continue(-scratch) under `lm_root` and ud-continue(-scratch) under
    `ud_root` on `treebanks` (UD_<Name>), each seed, in the Makefile's layout."""
    source_lm, source_ud, text = CONTINUE_CHARLM_VARIANTS[0], CONTINUE_UD_VARIANTS[0], "English-GUM"
    lm = lambda role, v, s, where, target: Expected("charlm", role, v, s, text, lm_root, where, target)
    ud = lambda role, v, s, t, where, target: Expected("ud", role, v, s, t, ud_root, where, target)
    runs = []
    for s in seeds:
        runs.append(lm(SOURCE, source_lm, s, f"charlm/{source_lm}/seed{s}", "lm-continue"))
        runs += [lm(CONTINUED, v, s, f"charlm-continued/{v}/seed{s}", "lm-continue") for v in CONTINUE_CHARLM_VARIANTS]
        runs += [
            lm(SCRATCH, v, s, f"charlm-scratch/{v}/seed{s}", "lm-continue-scratch")
            for v in CONTINUE_CHARLM_VARIANTS[1:]
        ]
    for t in treebanks:
        for s in seeds:
            runs.append(ud(SOURCE, source_ud, s, t, f"ud/{t}/{source_ud}/seed{s}", "ud-continue"))
            runs += [
                ud(CONTINUED, v, s, t, f"ud-continued/{t}/{v}/seed{s}", "ud-continue") for v in CONTINUE_UD_VARIANTS
            ]
            runs += [
                ud(SCRATCH, v, s, t, f"ud/{t}/{v}/seed{s}", "ud-continue-scratch") for v in CONTINUE_UD_VARIANTS[1:]
            ]
    return runs


@dataclass
class RunState:
    """An expected run as its directory holds it now."""

    expected: Expected
    status: str  # "finished", "running" (config.json, no result.json) or "missing"
    result: object = None  # RunResult of a finished run
    history: pd.DataFrame = field(default_factory=pd.DataFrame)
    curve: pd.DataFrame = field(default_factory=pd.DataFrame)
    max_epochs: int | None = None
    note: str = ""  # why a damaged run reads as missing


def read_state(expected: Expected) -> RunState:
    """The run's files, read as the tables read them; a damaged one reads as missing, with a note."""
    path = expected.path
    try:
        if (path / RESULT_FILE).exists():
            run = read_run(path / RESULT_FILE)
            epochs = run.config.epochs if run.config else None
            return RunState(expected, "finished", run.result, run.history, run.curve, epochs)
        if (path / CONFIG_FILE).exists():
            running = read_running(path)
            return RunState(expected, "running", None, running.history, running.curve, running.config.epochs)
    except DamagedRunError as e:
        return RunState(expected, "missing", note=f"damaged: {e}")
    return RunState(expected, "missing")


def setting_name(role: str, variant: str) -> str:
    """ "SAN+PE[add], continued", "+Conv2d, converted", "+Conv2d, from scratch"."""
    label = VARIANTS[variant].label
    if role == SOURCE:
        return f"{label} (the source runs)"
    if role == SCRATCH:
        return f"{label}, from scratch"
    return (
        f"{label}, continued as it is"
        if variant in (CONTINUE_CHARLM_VARIANTS[0], CONTINUE_UD_VARIANTS[0])
        else f"{label}, converted"
    )


def _score(state: RunState, task: str) -> float:
    """Test bits per character (char LM) or test accuracy in % (tagger) of a finished run."""
    if state.result is None:
        return math.nan
    test = state.result.test
    return float(test["bits_per_symbol"]) if task == "charlm" else 100 * float(test["all"])


def _dev_best(state: RunState, task: str) -> float:
    """The best dev score so far: the least dev bits per character, the highest dev accuracy (%)."""
    history = state.history
    if history.empty:
        return math.nan
    if task == "charlm":
        return float(history[DEV_BITS_COLUMN].min()) if DEV_BITS_COLUMN in history else math.nan
    return 100 * float(history["dev_accuracy"].max())


def _row(state: RunState) -> dict:
    e, result = state.expected, state.result
    started = result.started_from if result is not None else {}
    start = started.get("dev_bits_at_start" if e.task == "charlm" else "dev_at_start")
    return dict(
        task=e.task, role=e.role, variant=e.variant, setting=setting_name(e.role, e.variant), seed=e.seed,
        treebank=e.treebank, where=e.where, target=e.target, status=state.status, note=state.note,
        epochs=len(state.history), max_epochs=state.max_epochs,
        batches=int(state.curve["step"].max()) if len(state.curve) else 0,
        start_step=started.get("start_step"),
        dev_start=math.nan if start is None else (start if e.task == "charlm" else 100 * start),
        dev_best=_dev_best(state, e.task), test=_score(state, e.task),
        commit=getattr(result, "source_commit", ""), machine=getattr(result, "machine", ""),
        backend=getattr(result, "backend", ""), source_commit=started.get("source_commit", ""),
        origin=DIRECTORY if e.path.exists() else "",
    )  # fmt: skip


def runs_frame(states: list[RunState]) -> pd.DataFrame:
    return pd.DataFrame([_row(s) for s in states])


AHEAD, BEHIND, SAME, UNSETTLED, UNMEASURED = "ahead", "behind", "same", "unsettled", "unmeasured"
CAPACITY = ": the convolution adds what more training of the plain model does not"


def verdict(task: str, low: float, high: float, n: int) -> str:
    """What the interval over seeds of a converted setting's gain says: AHEAD (above 0), BEHIND
    (below 0), SAME (within ±MARGINS[task]), UNSETTLED (covers 0, reaches beyond), UNMEASURED (< 2 seeds)."""
    if n < 2 or math.isnan(low):
        return UNMEASURED
    if low > 0:
        return AHEAD
    if high < 0:
        return BEHIND
    return SAME if -MARGINS[task] <= low and high <= MARGINS[task] else UNSETTLED


def _reading(task: str, low: float, high: float, n: int, ahead_means: str = CAPACITY) -> str:
    """What the interval over seeds of a gain says, in words."""
    margin, unit = MARGINS[task], UNITS[task]
    return {
        UNMEASURED: f"not measured yet ({n} seed{'s' if n != 1 else ''} finished)",
        AHEAD: f"converted ahead (interval above 0){ahead_means}",
        BEHIND: "converted behind (interval below 0)",
        SAME: f"no difference (the interval lies within ±{margin} {unit})",
        UNSETTLED: f"not settled by {n} seeds (the interval covers 0 and reaches beyond ±{margin} {unit})",
    }[verdict(task, low, high, n)]


def plain_variant(task: str) -> str:
    return CONTINUE_CHARLM_VARIANTS[0] if task == "charlm" else CONTINUE_UD_VARIANTS[0]


def means_over_treebanks(rows: pd.DataFrame, treebanks: list[str]) -> pd.DataFrame:
    """Each (variant, seed)'s mean test score over `treebanks`, where it finished on every one."""
    rows = rows[rows["treebank"].isin(treebanks)]
    complete = rows.groupby(["variant", "seed"]).filter(lambda g: g["treebank"].nunique() == len(treebanks))
    return complete.groupby(["variant", "seed"], as_index=False)["test"].mean()


def gain_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task and treebank (and, for the tagger, their mean per seed), each converted setting's
    gain over the plain continuation of the same seed: test bits saved per character, or test
    accuracy points gained; per seed, mean, t-interval over seeds and the reading."""
    rows = []
    continued = frame[(frame["role"] == CONTINUED) & (frame["status"] == "finished")]
    for (task, treebank), group in continued.groupby(["task", "treebank"], sort=False):
        rows += _gains(task, treebank, group)
    ud = continued[continued["task"] == "ud"]
    if ud["treebank"].nunique() > 1:  # the macro gain: each seed's mean over the treebanks
        macro = means_over_treebanks(ud, list(ud["treebank"].unique()))
        rows += _gains("ud", f"mean of {ud['treebank'].nunique()} treebanks", macro.assign(task="ud"))
    return pd.DataFrame(rows)


def _gains(task: str, treebank: str, group: pd.DataFrame) -> list[dict]:
    by_seed = lambda variant: group[group["variant"] == variant].set_index("seed")["test"]
    plain = by_seed(plain_variant(task))
    variants = [v for v in dict.fromkeys(group["variant"]) if v != plain_variant(task)]
    return [seed_difference(task, treebank, v, by_seed(v), plain) for v in variants]


def seed_difference(
    task: str, treebank: str, variant: str, converted: pd.Series, reference: pd.Series, ahead_means: str = CAPACITY
) -> dict:
    """The converted setting's gain over `reference` (test scores by seed), paired by seed on the
    seeds where both finished: bits per character saved (char LM) or accuracy points gained (tagger);
    per seed, mean, std, t-interval, verdict, reading, and both settings' mean over those seeds."""
    seeds = sorted(set(reference.index) & set(converted.index))
    sign = -1 if task == "charlm" else 1  # fewer bits, more accuracy: a gain
    per_seed = {s: sign * (converted[s] - reference[s]) for s in seeds}
    mean, std, n = seed_stats(per_seed.values())
    low, high = t_interval(per_seed.values())
    return dict(
        task=task, treebank=treebank, variant=variant, per_seed=per_seed, n=n, mean=mean, std=std, low=low,
        high=high, verdict=verdict(task, low, high, n), reading=_reading(task, low, high, n, ahead_means),
        converted=converted[seeds].mean() if seeds else math.nan,
        reference=reference[seeds].mean() if seeds else math.nan,
        n_converted=len(converted), n_reference=len(reference),
    )  # fmt: skip
