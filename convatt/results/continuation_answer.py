"""The efficiency-or-capacity page's answer in one paragraph, from the same per-run numbers as its
tables. Numbers first: `scratch_frame` (each converted setting against the same setting from
scratch, paired by seed) and `answer` (what the paragraph cites, as an `Answer`); then the words,
`answer_text`, whose every verdict follows an interval over seeds (a sign that flips flips it).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from convatt.model.variants import VARIANTS
from convatt.results.continuation import (
    AHEAD,
    BEHIND,
    CONTINUED,
    SAME,
    SCRATCH,
    UNMEASURED,
    UNSETTLED,
    means_over_treebanks,
    plain_variant,
    seed_difference,
)

FROM_SCRATCH = ""  # a from-scratch lead is not capacity: the reading says only ahead or behind


def scratch_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Per task and treebank (and the tagger's mean over treebanks), each converted setting's gain
    over the same setting trained from scratch, paired by seed: seed s's converted run against seed
    s's from-scratch run, on the seeds where both finished (`seed_difference`'s columns)."""
    finished = frame[frame["status"] == "finished"]
    converted, scratch = finished[finished["role"] == CONTINUED], finished[finished["role"] == SCRATCH]
    rows = []
    for (task, treebank, variant), _ in frame[frame["role"] == SCRATCH].groupby(
        ["task", "treebank", "variant"], sort=False
    ):
        mine, theirs = (_by_seed(r, task=task, treebank=treebank, variant=variant) for r in (converted, scratch))
        rows.append(seed_difference(task, treebank, variant, mine, theirs, FROM_SCRATCH))
    ud_converted = converted[(converted["task"] == "ud") & (converted["variant"] != plain_variant("ud"))]
    treebanks = list(ud_converted["treebank"].unique())
    if len(treebanks) > 1:  # as the gains: each seed's mean over the treebanks, on both sides
        means = [means_over_treebanks(r[r["task"] == "ud"], treebanks) for r in (ud_converted, scratch)]
        for variant in means[0]["variant"].unique():
            mine, theirs = (_by_seed(m, variant=variant) for m in means)
            name = f"mean of {len(treebanks)} treebanks"
            rows.append(seed_difference("ud", name, variant, mine, theirs, FROM_SCRATCH))
    return pd.DataFrame(rows)


def _by_seed(runs: pd.DataFrame, **match: str) -> pd.Series:
    """The test scores by seed of the rows whose columns equal `match`."""
    keep = pd.Series(True, index=runs.index)
    for column, value in match.items():
        keep &= runs[column] == value
    return runs[keep].set_index("seed")["test"]


@dataclass(frozen=True)
class Cell:
    """One difference the answer cites: a row of `gain_frame` or `scratch_frame`."""

    task: str
    treebank: str  # the text, a treebank, or "mean of N treebanks"
    variant: str
    n: int  # seeds where both settings finished
    mean: float  # the converted setting's gain (positive: better), and its t-interval over seeds
    low: float
    high: float
    verdict: str
    converted: float  # the converted setting's mean test score over those seeds
    reference: float  # the reference's: the plain continuation, or from scratch
    n_converted: int  # finished seeds of each side
    n_reference: int


@dataclass(frozen=True)
class Missing:
    """Unfinished runs: those of one setting, or every run of a text or treebank (`setting` '')."""

    where: str  # "char LM", or the treebank
    setting: str
    seeds: list[str]

    def text(self) -> str:
        if not self.setting:
            return f"every {self.where} run ({len(self.seeds)})"
        return f"{self.setting} ({self.where}, seed{'s' if len(self.seeds) > 1 else ''} {_and(self.seeds)})"


@dataclass(frozen=True)
class AtLimit:
    """The finished continued runs of a task that trained all their epochs (not stopped early)."""

    task: str
    at_limit: int
    finished: int
    epochs: int


@dataclass(frozen=True)
class Answer:
    """What the paragraph says, as numbers: per question its headline cells (the tagger's mean over
    treebanks where there is one, each treebank otherwise; each char LM setting) and the tagger's
    per-treebank cells beside a mean; what is missing; what longer training could change."""

    finished: int
    expected: int
    capacity: list[Cell]
    capacity_detail: list[Cell]
    scratch: list[Cell]
    scratch_detail: list[Cell]
    missing: list[Missing]
    at_limit: list[AtLimit]
    treebanks: int


def _cells(differences: pd.DataFrame) -> tuple[list[Cell], list[Cell]]:
    """(headline, detail): the detail holds the tagger's per-treebank cells where a mean exists."""
    if differences.empty:
        return [], []
    names = Cell.__dataclass_fields__
    cells = [Cell(**{k: v for k, v in r.items() if k in names}) for r in differences.to_dict("records")]
    has_mean = any(c.task == "ud" and c.treebank.startswith("mean of") for c in cells)
    detail = [c for c in cells if has_mean and c.task == "ud" and not c.treebank.startswith("mean of")]
    return [c for c in cells if c not in detail], detail


def _missing(frame: pd.DataFrame) -> list[Missing]:
    """The unfinished runs per setting, or per text or treebank where none of its runs has finished."""
    missing = []
    for (task, treebank), runs in frame.groupby(["task", "treebank"], sort=False):
        where, unfinished = "char LM" if task == "charlm" else _treebank(treebank), runs[runs["status"] != "finished"]
        if len(unfinished) == len(runs):
            missing.append(Missing(where, "", [str(s) for s in runs["seed"]]))
            continue
        for setting, group in unfinished.groupby("setting", sort=False):
            name = setting.replace(" (the source runs)", ", the source runs")
            missing.append(Missing(where, name, [str(s) for s in group["seed"]]))
    return missing


def _at_limit(frame: pd.DataFrame) -> list[AtLimit]:
    """Per task, the finished continued runs whose epochs reached their maximum."""
    done = frame[(frame["role"] == CONTINUED) & (frame["status"] == "finished")]
    limits = []
    for task, g in done.groupby("task", sort=False):
        limit = pd.to_numeric(g["max_epochs"])  # NaN where a run's maximum is not known: not at it
        most = int(limit.max()) if limit.notna().any() else 0
        limits.append(AtLimit(task, int((g["epochs"] >= limit).sum()), len(g), most))
    return limits


def answer(frame: pd.DataFrame, gains: pd.DataFrame, scratch: pd.DataFrame) -> Answer:
    """The paragraph's numbers from the runs frame, its gains over the plain continuation and its
    gains over from scratch (`scratch_frame`)."""
    capacity, capacity_detail = _cells(gains)
    versus_scratch, scratch_detail = _cells(scratch)
    finished = int((frame["status"] == "finished").sum())
    treebanks = frame.loc[frame["task"] == "ud", "treebank"].nunique()
    return Answer(
        finished, len(frame), capacity, capacity_detail, versus_scratch, scratch_detail, _missing(frame),
        _at_limit(frame), treebanks,
    )  # fmt: skip


# ---------------------------------------------------------------- the words

# Per verdict: the clause's head, and what the interval says
CAPACITY_WORDS = {
    AHEAD: ("Yes", "the converted runs end ahead of the plain continuation of the same seed, the interval above 0"),
    BEHIND: ("No", "the converted runs end behind the plain continuation, the interval below 0"),
    SAME: ("No", "the converted runs end level with the plain continuation, the interval within the margin"),
    UNSETTLED: ("Not settled", "the interval covers 0"),
    UNMEASURED: ("Not measured yet", "fewer than two seeds with both runs finished"),
}
SCRATCH_WORDS = {
    AHEAD: ("Better", "the converted runs end ahead of the same setting from scratch, the interval above 0"),
    BEHIND: ("No", "training with the convolution from the start ends ahead, the interval below 0"),
    SAME: ("As good", "the interval lies within the margin"),
    UNSETTLED: ("Not settled", "the interval covers 0"),
    UNMEASURED: ("Not measured yet", "fewer than two seeds with both runs finished"),
}
DETAIL_WORDS = {AHEAD: "ahead on", BEHIND: "behind on", SAME: "level on", UNSETTLED: "not settled on"}
DETAIL_WORDS[UNMEASURED] = "not measured yet on"
ORDER = [AHEAD, BEHIND, SAME, UNSETTLED, UNMEASURED]
SCRATCH_REFERENCE = "from-scratch"


def _short(variant: str) -> str:
    """ "+Conv2d" for SAN+PE[add]+Conv2d: what the conversion adds."""
    return VARIANTS[variant].label.removeprefix(VARIANTS[plain_variant("ud")].label)


def _who(cell: Cell) -> str:
    if cell.task == "charlm":
        return f"the char LM's {_short(cell.variant)}"
    return f"tagging, {cell.treebank}" if cell.treebank.startswith("mean of") else _treebank(cell.treebank)


def _treebank(name: str) -> str:
    return name.removeprefix("UD_")


def _cell_text(cell: Cell, reference: str) -> str:
    """ "tagging, mean of 4 treebanks (+1.42 points [+0.63, +2.21])", or what is missing of it."""
    if cell.verdict == UNMEASURED:
        return f"{_who(cell)} ({cell.n_converted} converted and {cell.n_reference} {reference} seeds finished)"
    d, unit = (3, "bits") if cell.task == "charlm" else (2, "points")
    numbers = f"{cell.mean:+.{d}f} {unit} [{cell.low:+.{d}f}, {cell.high:+.{d}f}]"
    if reference == SCRATCH_REFERENCE:  # the scores themselves: where the two ways end
        numbers += f": {cell.converted:.{d}f} converted, {cell.reference:.{d}f} from scratch"
    return f"{_who(cell)} ({numbers})"


def _verdicts(cells: list[Cell], words: dict[str, tuple[str, str]], reference: str) -> str:
    """One clause per verdict, in ORDER, naming its cells; "Yes for A and B: why; not settled for C: why"."""
    clauses = []
    for verdict in ORDER:
        mine = [_cell_text(c, reference) for c in cells if c.verdict == verdict]
        if mine:
            head, why = words[verdict]
            clauses.append(f"{head if not clauses else head[0].lower() + head[1:]} for {_and(mine)}: {why}")
    return ("; ".join(clauses) or "No converted run has finished yet") + "."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _detail(cells: list[Cell], reference: str) -> str:
    """The tagger per treebank: its verdicts (against from scratch with both means), and on how many
    treebanks the converted mean is above the reference's."""
    if not cells:
        return ""
    name = lambda c: _treebank(c.treebank)
    if reference == SCRATCH_REFERENCE:  # both means, where both have finished seeds
        means = lambda c: "" if c.verdict == UNMEASURED else f" ({c.converted:.2f} vs {c.reference:.2f})"
        name = lambda c: _treebank(c.treebank) + means(c)
    verdicts = [v for v in ORDER if any(c.verdict == v for c in cells)]
    groups = [f"{DETAIL_WORDS[v]} {_and([name(c) for c in cells if c.verdict == v])}" for v in verdicts]
    vs = " (converted vs from scratch)" if reference == SCRATCH_REFERENCE else ""
    return f" Per treebank{vs} the converted tagger is {', '.join(groups)}; {_in_the_mean(cells, reference)}."


def _in_the_mean(cells: list[Cell], reference: str) -> str:
    """On how many treebanks the converted mean is above (below) the reference's."""
    measured = [c for c in cells if c.verdict != UNMEASURED]
    above, below = sum(c.mean > 0 for c in measured), sum(c.mean < 0 for c in measured)
    theirs = "the from-scratch one" if reference == SCRATCH_REFERENCE else "the plain continuation's"
    if measured and (above == len(measured) or below == len(measured)):
        side = "above" if above == len(measured) else "below"
        return f"its mean is {side} {theirs} on every treebank ({len(measured)} of {len(measured)})"
    return f"its mean is above {theirs} on {above} and below it on {below} of {len(measured)} treebanks"


def _unsettled(cells: list[Cell]) -> str:
    """ "the char LM's +Conv2d and tagging on A, B and C": the cells whose interval covers 0."""
    mine = [c for c in cells if c.verdict == UNSETTLED]
    names = [_who(c) for c in mine if c.task == "charlm" or c.treebank.startswith("mean of")]
    treebanks = [_treebank(c.treebank) for c in mine if c.task == "ud" and not c.treebank.startswith("mean of")]
    return _and(names + ([f"tagging on {_and(treebanks)}"] if treebanks else [])) if mine else ""


def _changes(a: Answer) -> str:
    """What could change the answer, from the numbers: the cells whose interval covers 0, the runs
    still missing, the continuations that ran to their limit, the tasks asked."""
    items = [_more_seeds(a)] if _more_seeds(a) else []
    if a.missing:
        named = [m.text() for m in a.missing]
        named = named if len(named) <= MAX_NAMED else [*named[: MAX_NAMED - 1], f"{len(named) - MAX_NAMED + 1} more"]
        items.append(f"the {sum(len(m.seeds) for m in a.missing)} runs not finished yet: {', '.join(named)}")
    long = [f"{x.at_limit} of the {TASKS[x.task]}'s {x.finished} continued runs ran all {x.epochs} epochs"
            for x in a.at_limit if x.at_limit]  # fmt: skip
    if long:
        items.append(f"longer continuations ({_and(long)}, not stopped early)")
    items.append(f"a task beyond these two (tagging on {a.treebanks} treebanks, a char LM on one text)")
    measured = all(c.verdict != UNMEASURED for c in a.capacity + a.scratch)
    settled = "No interval covers 0: more seeds would narrow them, not flip them. "
    return (settled if measured and not _more_seeds(a) else "") + f"What could change the answer: {'; '.join(items)}."


def _more_seeds(a: Answer) -> str:
    """ "more seeds where an interval covers 0 (...)", or '' where none does."""
    plain, scratch = _unsettled(a.capacity + a.capacity_detail), _unsettled(a.scratch + a.scratch_detail)
    if plain and plain == scratch:
        return f"more seeds where an interval covers 0 ({plain}, against both the plain continuation and from scratch)"
    against = [f"{names} against {reference}" for names, reference in [(plain, "the plain continuation"),
               (scratch, "from scratch")] if names]  # fmt: skip
    return f"more seeds where an interval covers 0 ({', and '.join(against)})" if against else ""


TASKS = {"charlm": "char LM", "ud": "tagger"}
MAX_NAMED = 6  # settings with missing runs named in the paragraph; The runs names every run
PAIRING = (
    "(Against from scratch, each seed's converted run is paired with the from-scratch run of the same "
    "seed, on the seeds where both finished; the tagger's mean takes each seed's mean over the treebanks.)"
)


def answer_text(a: Answer) -> str:
    """The answer as one paragraph: the two questions, each verdict with its numbers, and what
    could change it. Gains are positive where the converted runs are better (accuracy points
    gained, bits per character saved), with their 95% t-interval over seeds."""
    return " ".join(
        [
            f"**In short**, from {a.finished} of {a.expected} runs (gains: positive where the converted "
            "runs are better, in accuracy points or bits per character saved, with their 95% interval over "
            "seeds). *Does the convolution add capacity that more training of the plain model does not?*",
            _verdicts(a.capacity, CAPACITY_WORDS, "plain continuation") + _detail(a.capacity_detail, "plain"),
            "*Is converting a trained model as good as training with the convolution from the start?*",
            _verdicts(a.scratch, SCRATCH_WORDS, SCRATCH_REFERENCE) + _detail(a.scratch_detail, SCRATCH_REFERENCE),
            PAIRING if a.scratch else "",
            _changes(a),
        ]
    ).replace("  ", " ")
