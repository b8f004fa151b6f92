"""The efficiency-or-capacity page's figure: each run's dev curve, the continued runs from the
source's best epoch on (`convatt.results.continuation` reads the runs). The curves are in the run
directories only: a figure says in its PNG's Description which runs it was drawn from, so that a
page whose runs partly come from the record (`continuation_record`) keeps it and says what it shows."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from convatt.model.variants import CONTINUE_CHARLM_VARIANTS, CONTINUE_UD_VARIANTS
from convatt.results.continuation import CONTINUED, DIRECTORY, RECORD, SCRATCH, SOURCE, RunState, setting_name
from convatt.rundir.schema import DEV_BITS_COLUMN

STYLES = {SOURCE: ("grey", "-"), SCRATCH: (None, ":"), CONTINUED: (None, "-")}


def _x_offset(state: RunState, task: str, states: list[RunState]) -> float:
    """Where a continued run's own batches (char LM) or epochs (tagger) start on the source's axis."""
    if state.expected.role != CONTINUED or state.result is None and state.curve.empty:
        return 0.0
    e = state.expected
    same = lambda s: s.expected.role == SOURCE and (s.expected.treebank, s.expected.seed) == (e.treebank, e.seed)
    source = next((s for s in states if same(s)), None)
    if source is None or source.result is None:
        return 0.0
    if task == "charlm":
        started = state.result.started_from if state.result is not None else {}
        steps = started.get("start_step")
        if steps is None and len(source.curve):  # a running run: the source's curve ends near its best epoch
            steps = int(source.curve["step"].max()) * source.result.best_epoch // max(source.result.epochs_run, 1)
        return float(steps or 0)
    return float(source.result.best_epoch)


def _colour(variant: str) -> str:
    order = list(dict.fromkeys(CONTINUE_CHARLM_VARIANTS + CONTINUE_UD_VARIANTS))
    return f"C{order.index(variant)}"


def _plot_run(ax, state: RunState, task: str, states: list[RunState]) -> None:
    e = state.expected
    colour, style = STYLES[e.role]
    colour = colour or _colour(e.variant)
    if task == "charlm":
        x, y = state.curve.get("step"), state.curve.get(DEV_BITS_COLUMN)
    else:
        x, y = state.history.get("epoch"), state.history.get("dev_accuracy")
        y = None if y is None else 100 * y
    if x is None or y is None or len(x) == 0:
        return
    label = setting_name(e.role, e.variant) if e.seed == 1 else None
    width = 0.8 if e.role == SOURCE else 1.2
    ax.plot(x + _x_offset(state, task, states), y, style, color=colour, linewidth=width, label=label)


def _zoom(ax, task: str, states: list[RunState]) -> None:
    """The range where the continued runs are (the sources' first epochs lie far off), widened to
    the from-scratch runs' best values (their first epochs lie far off too)."""
    continued, scratch = _dev_values(task, states, CONTINUED), _dev_values(task, states, SCRATCH)
    if not continued:
        return
    if task == "charlm":  # bits: lower is better
        ax.set_ylim(min(continued + scratch) - 0.1, max(continued) + 0.4)
    else:
        ax.set_ylim(min(continued) - 3, max(continued + scratch) + 1)


def _dev_values(task: str, states: list[RunState], role: str) -> list[float]:
    """The dev values (bits per character, or accuracy in %) of the runs of `role`."""
    column = DEV_BITS_COLUMN if task == "charlm" else "dev_accuracy"
    scale = 1 if task == "charlm" else 100
    return [scale * v for s in states if s.expected.role == role and column in s.history for v in s.history[column]]


def figure(states: list[RunState]):
    """Dev bits per character against batches (char LM) and dev accuracy against epochs (each
    treebank): the source runs, their continuations as they are and converted (from the source's
    best epoch on), and the converted settings from scratch; one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    panels = ["charlm", *dict.fromkeys(s.expected.treebank for s in states if s.expected.task == "ud")]
    fig = Figure(figsize=(4.2 * min(len(panels), 3), 3.6 * math.ceil(len(panels) / 3)))
    for index, panel in enumerate(panels):
        ax = fig.add_subplot(math.ceil(len(panels) / 3), min(len(panels), 3), index + 1)
        task = "charlm" if panel == "charlm" else "ud"
        mine = [s for s in states if s.expected.task == task and (task == "charlm" or s.expected.treebank == panel)]
        for state in mine:
            _plot_run(ax, state, task, mine)
        _zoom(ax, task, mine)
        if task == "charlm":
            ax.set(xlabel="batches", ylabel="dev bits per character", title="Character LM (English-GUM)")
        else:
            ax.set(xlabel="epochs", ylabel="dev accuracy (%)", title=panel.removeprefix("UD_"))
        if ax.lines:
            ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def description(states: list[RunState], when: str) -> str:
    """What a figure drawn from `states` shows, for its PNG's Description."""
    drawn = [s for s in states if s.status in ("finished", "running")]
    running = sum(s.status == "running" for s in drawn)
    return (
        f"the dev curves of the {len(drawn)} runs read from their directories {when} "
        f"({len(drawn) - running} finished, {running} running)"
    )


def drawn_description(png: Path) -> str:
    """The Description a figure was saved with ('' for one drawn before figures said it)."""
    from PIL import Image

    with Image.open(png) as image:
        image.load()  # text chunks after the image data are read with it
        return str(image.info.get("Description", ""))


def figure_note(frame: pd.DataFrame, kept: Path | None) -> str:
    """What the figure shows where runs come from the record (none: '', the figure is the runs'):
    `kept`, the figure not drawn again, or the figure of the runs present only."""
    recorded = int(((frame["origin"] == RECORD) & (frame["status"] == "finished")).sum())
    if not recorded:
        return ""
    if kept is not None:
        shows = drawn_description(kept) or "the run directories present when an earlier page drew it"
        return (
            f"The figure is not drawn again: the dev curves are in the run directories only, and {recorded} "
            f"finished runs come from the record, so a figure drawn now would lose theirs. It shows {shows}."
        )
    present = int(((frame["origin"] == DIRECTORY) & frame["status"].isin(["finished", "running"])).sum())
    if not present:
        return (
            f"The figure is empty: the dev curves are in the run directories only, and the {recorded} "
            "finished runs come from the record."
        )
    return (
        f"The figure shows the dev curves of the {present} runs read from their directories only: the "
        f"{recorded} finished runs from the record have none here."
    )
