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
    write_page(...)          efficiency_or_capacity.md, .csv and the figure (`continuation_figure`)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from convatt.model.variants import CONTINUE_CHARLM_VARIANTS, CONTINUE_UD_VARIANTS, VARIANTS
from convatt.results.markdown import markdown_table
from convatt.results.stats import seed_stats, t_interval
from convatt.rundir.reading import DamagedRunError, read_run, read_running
from convatt.rundir.schema import CONFIG_FILE, DEV_BITS_COLUMN, RESULT_FILE

PAGE = "efficiency_or_capacity"
SOURCE, CONTINUED, SCRATCH = "source", "continued", "scratch"
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
    )  # fmt: skip


def runs_frame(states: list[RunState]) -> pd.DataFrame:
    return pd.DataFrame([_row(s) for s in states])


def _reading(task: str, low: float, high: float, n: int) -> str:
    """What the interval over seeds of a gain says, in words."""
    margin = MARGINS[task]
    if n < 2 or math.isnan(low):
        return f"not measured yet ({n} seed{'s' if n != 1 else ''} finished)"
    if low > 0:
        return "converted ahead (interval above 0): the convolution adds what more training of the plain model does not"
    if high < 0:
        return "converted behind (interval below 0)"
    if -margin <= low and high <= margin:
        return f"no difference (the interval lies within ±{margin} {UNITS[task]})"
    return f"not settled by {n} seeds (the interval covers 0 and reaches beyond ±{margin} {UNITS[task]})"


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
        complete = ud.groupby(["variant", "seed"]).filter(lambda g: len(g) == ud["treebank"].nunique())
        macro = complete.groupby(["variant", "seed"], as_index=False)["test"].mean()
        rows += _gains("ud", f"mean of {ud['treebank'].nunique()} treebanks", macro.assign(task="ud"))
    return pd.DataFrame(rows)


def _gains(task: str, treebank: str, group: pd.DataFrame) -> list[dict]:
    plain_variant = CONTINUE_CHARLM_VARIANTS[0] if task == "charlm" else CONTINUE_UD_VARIANTS[0]
    plain = group[group["variant"] == plain_variant].set_index("seed")["test"]
    rows = []
    for variant in [v for v in dict.fromkeys(group["variant"]) if v != plain_variant]:
        converted = group[group["variant"] == variant].set_index("seed")["test"]
        seeds = sorted(set(plain.index) & set(converted.index))
        sign = -1 if task == "charlm" else 1  # fewer bits, more accuracy: a gain
        per_seed = {s: sign * (converted[s] - plain[s]) for s in seeds}
        mean, std, n = seed_stats(per_seed.values())
        low, high = t_interval(per_seed.values())
        rows.append(
            dict(task=task, treebank=treebank, variant=variant, per_seed=per_seed, n=n, mean=mean, std=std,
                 low=low, high=high, reading=_reading(task, low, high, n))
        )  # fmt: skip
    return rows


# ---------------------------------------------------------------- Markdown


def _num(value, digits: int) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def _status(r: pd.Series) -> str:
    if r["status"] == "finished":
        return f"finished, {r['epochs']} epochs"
    if r["status"] == "running":
        return f"running, epoch {r['epochs']} of {int(r['max_epochs'])} done"
    return "missing" + (f" ({r['note']})" if r["note"] else "")


def runs_table(frame: pd.DataFrame, task: str) -> str:
    """Each run of `task`: its status, dev score at the start (continued runs) and best, test score."""
    unit = "bpc" if task == "charlm" else "accuracy (%)"
    digits = 3 if task == "charlm" else 2
    header = ["Treebank", "Setting", "Seed", "Status", f"Dev {unit} at the start", f"Dev {unit}, best", f"Test {unit}"]
    rows = [
        [r["treebank"], r["setting"], str(r["seed"]), _status(r), _num(r["dev_start"], digits),
         _num(r["dev_best"], digits), _num(r["test"], digits)]
        for _, r in frame[frame["task"] == task].iterrows()
    ]  # fmt: skip
    return markdown_table(header, rows)


def summary_table(frame: pd.DataFrame) -> str:
    """Per task, treebank and setting: the test score's mean ± std over the finished seeds, its t-interval."""
    rows = []
    finished = frame[frame["status"] == "finished"]
    for (task, treebank, setting), group in frame.groupby(["task", "treebank", "setting"], sort=False):
        done = finished[
            (finished["task"] == task) & (finished["treebank"] == treebank) & (finished["setting"] == setting)
        ]
        mean, std, n = seed_stats(done["test"])
        low, high = t_interval(done["test"])
        digits = 3 if task == "charlm" else 2
        cell = "–" if n == 0 else _num(mean, digits) + ("" if pd.isna(std) else f" ± {_num(std, digits)}")
        interval = "–" if pd.isna(low) else f"[{_num(low, digits)}, {_num(high, digits)}]"
        unit = "test bits per character" if task == "charlm" else "test accuracy (%)"
        rows.append([treebank, setting, f"{n} of {len(group)}", unit, cell, interval])
    return markdown_table(SUMMARY_HEADER, rows)


SUMMARY_HEADER = ["Text / treebank", "Setting", "Seeds finished", "Measure", "Mean ± std", "95% CI over seeds (t)"]
GAIN_HEADER = ["Task", "Text / treebank", "Converted to", "Seeds", "Gain per seed", "Mean gain"]
GAIN_HEADER += ["95% CI over seeds (t)", "Reading"]


def gain_table(gains: pd.DataFrame) -> str:
    header = GAIN_HEADER
    rows = []
    for _, g in gains.iterrows():
        digits = 3 if g["task"] == "charlm" else 2
        per_seed = ", ".join(f"{s}: {v:+.{digits}f}" for s, v in g["per_seed"].items()) or "–"
        interval = "–" if pd.isna(g["low"]) else f"[{g['low']:+.{digits}f}, {g['high']:+.{digits}f}]"
        mean = "–" if pd.isna(g["mean"]) else f"{g['mean']:+.{digits}f}"
        task = "char LM (bits saved)" if g["task"] == "charlm" else "tagging (points)"
        rows.append(
            [task, g["treebank"], VARIANTS[g["variant"]].label, str(g["n"]), per_seed, mean, interval, g["reading"]]
        )
    return markdown_table(header, rows)


def provenance_table(frame: pd.DataFrame) -> str:
    """Per task and setting: the commits, backends and machines of the finished runs (result.json),
    so that a setting whose runs came from several commits' code shows it."""
    rows = []
    finished = frame[frame["status"] == "finished"]
    for (task, setting), group in finished.groupby(["task", "setting"], sort=False):
        values = [
            ", ".join(sorted({v for v in group[c] if v})) or "not recorded" for c in ("commit", "backend", "machine")
        ]
        rows.append([task, setting, str(len(group)), *values])
    return markdown_table(["Task", "Setting", "Finished runs", "Commits", "Backends", "Machines"], rows)


def missing_lines(frame: pd.DataFrame, commands: dict[str, str]) -> list[str]:
    """One line per make target with unfinished runs: which, and the command that trains or resumes them."""
    lines = []
    for target, group in frame[frame["status"] != "finished"].groupby("target", sort=False):
        runs = ", ".join(f"{where} ({status})" for where, status in zip(group["where"], group["status"]))
        lines.append(f"- `{commands[target]}` trains or resumes {len(group)}: {runs}")
    return lines


# ---------------------------------------------------------------- the page

INTRO = """Does a convolution over the attention map add capacity, or only learning speed? A trained
SAN+PE[add] model is trained on three ways from its best epoch, with the same seed and a new
optimizer: as it is (the plain continuation), and converted to +Conv2d (and, for the character
LM, +Conv2d[pre]) with the convolution started at identity (`convatt train --from`), so that the
converted model first computes exactly what the trained one computes (the "dev at the start"
columns: the source's dev score measured again after conversion). If the converted runs end
better than the plain continuation, the convolution adds what more training of the plain model
does not: capacity; if not, its value is learning efficiency. The same settings trained from
scratch (the char LM: as many batches as source and continuation together) are beside them."""


def _commands(lm_root: Path, ud_root: Path, lm_epochs: int) -> dict[str, str]:
    return {
        "lm-continue": f"make lm-continue EPOCHS={lm_epochs} RUNS={lm_root}",
        "lm-continue-scratch": f"make lm-continue-scratch EPOCHS={lm_epochs} RUNS={lm_root}",
        "ud-continue": f"make ud-continue RUNS={ud_root}",
        "ud-continue-scratch": f"make ud-continue-scratch RUNS={ud_root}",
    }


def page_text(frame: pd.DataFrame, gains: pd.DataFrame, commands: dict[str, str], when: str) -> str:
    """The Markdown page: the state of the runs, the gains and their readings, the tables, provenance."""
    done = (frame["status"] == "finished").sum()
    missing = missing_lines(frame, commands)
    state = f"As read {when}: {done} of {len(frame)} runs finished."
    state += (
        (" Not finished yet, and the commands that train or resume them:\n\n" + "\n".join(missing)) if missing else ""
    )
    sections = [
        f"# Efficiency or capacity? Convoluted attention added to trained models\n\n{INTRO}",
        f"## The runs\n\n{state}",
        "## The converted runs' gain over the plain continuation\n\n" + GAIN_NOTE + "\n\n"
        + (gain_table(gains) if len(gains) else NO_GAIN_YET),
        "## Test scores per setting\n\n" + SUMMARY_NOTE + "\n\n" + summary_table(frame),
        f"![Dev curves: the source runs, continued as they are and converted, and from scratch]({PAGE}_dev.png)",
        "## Every run\n\n### Character LM\n\n" + runs_table(frame, "charlm"),
        "### Tagging\n\n" + runs_table(frame, "ud"),
        "## Provenance\n\nThe code's commit, the backend and the machine of every finished run, per setting "
        "(result.json's `source_commit`, `backend`, `machine`; a continued run's source is in its "
        "`started_from`): a setting with one commit is one commit's computation.\n\n" + provenance_table(frame),
    ]  # fmt: skip
    return "\n\n".join(sections) + "\n"


NO_GAIN_YET = "No converted run and plain continuation of the same seed have finished yet."
GAIN_NOTE = (
    "Per seed: the converted run's test score minus the plain continuation's of the same seed (the char "
    "LM: bits per character saved, the tagger: accuracy points gained; positive: the converted run is "
    "better), their mean and its Student-t 95% interval over the seeds. For the tagger the last rows "
    "take each seed's mean gain over the treebanks. \"No difference\": the interval lies within "
    f"±{MARGINS['charlm']} bits / ±{MARGINS['ud']} points; \"not settled\": it covers 0 and reaches beyond."
)
SUMMARY_NOTE = (
    "Mean ± standard deviation (ddof=0) over the finished seeds, and the Student-t 95% interval of the "
    "mean; a setting with fewer finished seeds than runs is partial."
)


def write_page(lm_root: Path, ud_root: Path, out: Path, when: str, lm_epochs: int = 60) -> list[Path]:
    """`efficiency_or_capacity.md`, `.csv` (one row per run) and `_dev.png` in `out` from the runs
    under `lm_root` and `ud_root` (read, never written); the treebanks: the embedded four and any
    other under `ud_root`'s ud/."""
    from convatt.results.continuation_figure import figure
    from convatt.results.output import save
    from convatt.rundir.storage import write_text

    treebanks = sorted({p.name for p in (Path(ud_root) / "ud").glob("UD_*")} | set(EMBEDDED_TREEBANKS))
    states = [read_state(e) for e in expected_runs(Path(lm_root), Path(ud_root), treebanks)]
    frame = runs_frame(states)
    gains = gain_frame(frame)
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / f"{PAGE}.md", out / f"{PAGE}.csv"
    write_text(md, page_text(frame, gains, _commands(lm_root, ud_root, lm_epochs), when))
    write_text(csv, frame.to_csv(index=False, float_format="%.4f"))
    paths = [md, csv, *save(figure(states), out / f"{PAGE}_dev")]
    for pdf in [p for p in paths if p.suffix == ".pdf"]:
        pdf.unlink()
    return [p for p in paths if p.suffix != ".pdf"]


EMBEDDED_TREEBANKS = ["UD_Afrikaans-AfriBooms", "UD_English-GUM", "UD_English-LinES", "UD_Vietnamese-VTB"]
