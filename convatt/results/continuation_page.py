"""The efficiency-or-capacity page: `convatt.results.continuation`'s numbers as Markdown, its
CSV (one row per run) and its figure (`continuation_figure`); `write_page` writes them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from convatt.model.variants import VARIANTS
from convatt.results.continuation import (
    DIRECTORY,
    MARGINS,
    PAGE,
    RECORD,
    RunState,
    expected_runs,
    gain_frame,
    read_state,
    runs_frame,
)
from convatt.results.markdown import markdown_table
from convatt.results.stats import seed_stats, t_interval


def _num(value, digits: int) -> str:
    return "–" if value is None or pd.isna(value) else f"{value:.{digits}f}"


def _status(r: pd.Series) -> str:
    if r["status"] == "finished":
        return f"finished, {r['epochs']} epochs" + (", from the record" if r["origin"] == RECORD else "")
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
        origins = ", ".join(f"{ORIGINS[o]}: {n}" for o, n in group["origin"].value_counts(sort=False).items())
        rows.append([task, setting, str(len(group)), origins, *values])
    return markdown_table(["Task", "Setting", "Finished runs", "Read from", "Commits", "Backends", "Machines"], rows)


ORIGINS = {DIRECTORY: "run directories", RECORD: "the record"}


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


@dataclass(frozen=True)
class PageParts:
    """What the page says beside the runs' own tables (each '' where there is nothing to say)."""

    answer: str = ""  # the answer in one paragraph (`continuation_answer`)
    scratch: pd.DataFrame | None = None  # the converted runs against from scratch (`scratch_frame`)
    origin: str = ""  # how many finished runs come from the record
    figure: str = ""  # what the figure shows, where it is not every finished run's curves


def page_text(
    frame: pd.DataFrame, gains: pd.DataFrame, commands: dict[str, str], when: str, parts: PageParts = PageParts()
) -> str:
    """The Markdown page: the answer, the state of the runs, the gains and their readings, the
    tables, provenance."""
    done = (frame["status"] == "finished").sum()
    missing = missing_lines(frame, commands)
    state = f"As read {when}: {done} of {len(frame)} runs finished."
    state += (
        (" Not finished yet, and the commands that train or resume them:\n\n" + "\n".join(missing)) if missing else ""
    )
    scratch = parts.scratch if parts.scratch is not None else pd.DataFrame()
    sections = [
        "# Efficiency or capacity? Convoluted attention added to trained models",
        parts.answer, INTRO,
        f"## The runs\n\n{state}", parts.origin,
        "## The converted runs' gain over the plain continuation\n\n" + GAIN_NOTE + "\n\n"
        + (gain_table(gains) if len(gains) else NO_GAIN_YET),
        "## The converted runs against the same setting from scratch\n\n" + SCRATCH_NOTE + "\n\n"
        + (gain_table(scratch) if len(scratch) else NO_SCRATCH_YET),
        "## Test scores per setting\n\n" + SUMMARY_NOTE + "\n\n" + summary_table(frame),
        f"![Dev curves: the source runs, continued as they are and converted, and from scratch]({PAGE}_dev.png)",
        parts.figure,
        "## Every run\n\n### Character LM\n\n" + runs_table(frame, "charlm"),
        "### Tagging\n\n" + runs_table(frame, "ud"),
        "## Provenance\n\nThe code's commit, the backend and the machine of every finished run, per setting "
        "(result.json's `source_commit`, `backend`, `machine`; a continued run's source is in its "
        "`started_from`), and where the page read them: a setting with one commit is one commit's "
        "computation.\n\n" + provenance_table(frame),
    ]  # fmt: skip
    return "\n\n".join(section for section in sections if section) + "\n"


NO_GAIN_YET = "No converted run and plain continuation of the same seed have finished yet."
GAIN_NOTE = (
    "Per seed: the converted run's test score minus the plain continuation's of the same seed (the char "
    "LM: bits per character saved, the tagger: accuracy points gained; positive: the converted run is "
    "better), their mean and its Student-t 95% interval over the seeds. For the tagger the last rows "
    "take each seed's mean gain over the treebanks. \"No difference\": the interval lies within "
    f"±{MARGINS['charlm']} bits / ±{MARGINS['ud']} points; \"not settled\": it covers 0 and reaches beyond."
)
NO_SCRATCH_YET = "No converted run and from-scratch run of the same seed have finished yet."
SCRATCH_NOTE = (
    "Per seed: the converted run's test score minus that of the same setting trained from scratch with "
    "the same seed (paired by seed, on the seeds where both finished; positive: the converted run is "
    "better), their mean and its Student-t 95% interval over the seeds; for the tagger the last rows "
    "take each seed's mean over the treebanks on both sides. Ahead from scratch is not capacity: it "
    "says whether converting a trained model is as good as training with the convolution from the start."
)
SUMMARY_NOTE = (
    "Mean ± standard deviation (ddof=0) over the finished seeds, and the Student-t 95% interval of the "
    "mean; a setting with fewer finished seeds than runs is partial."
)


def write_page(
    lm_root: Path, ud_root: Path, out: Path, when: str, lm_epochs: int = 60, recorded: Path | None = None
) -> list[Path]:
    """`efficiency_or_capacity.md`, `.csv` (one row per run) and `_dev.png` in `out` from the runs
    under `lm_root` and `ud_root` (read, never written); the treebanks: the embedded four and any
    other under `ud_root`'s ud/ or in the record. With `recorded` (an earlier page's .csv), the
    finished runs whose directories are absent come from it, and a figure in `out` is kept rather
    than drawn again without their curves."""
    from convatt.results.continuation_answer import answer, answer_text, scratch_frame
    from convatt.results.continuation_figure import figure_note
    from convatt.results.continuation_record import origin_note
    from convatt.rundir.storage import write_text

    frame, states = _runs(Path(lm_root), Path(ud_root), recorded)
    gains, scratch = gain_frame(frame), scratch_frame(frame)
    png = out / f"{PAGE}_dev.png"
    keep = bool(((frame["origin"] == RECORD) & (frame["status"] == "finished")).any()) and png.exists()
    parts = PageParts(
        answer_text(answer(frame, gains, scratch)), scratch, origin_note(frame, recorded),
        figure_note(frame, png if keep else None),
    )  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / f"{PAGE}.md", out / f"{PAGE}.csv"
    write_text(md, page_text(frame, gains, _commands(lm_root, ud_root, lm_epochs), when, parts))
    write_text(csv, frame.to_csv(index=False, float_format="%.4f"))
    return [md, csv, png if keep else _draw(states, png, when)]


def _runs(lm_root: Path, ud_root: Path, recorded: Path | None) -> tuple[pd.DataFrame, list[RunState]]:
    """The runs frame and the runs' states (their directories), the record filling in the absent."""
    from convatt.results.continuation_record import read_record, record_treebanks, with_record

    record = read_record(recorded) if recorded else None
    treebanks = {p.name for p in (ud_root / "ud").glob("UD_*")} | set(EMBEDDED_TREEBANKS)
    treebanks |= record_treebanks(record) if record is not None else set()
    states = [read_state(e) for e in expected_runs(lm_root, ud_root, sorted(treebanks))]
    frame = runs_frame(states)
    return (frame if record is None else with_record(frame, record)), states


def _draw(states: list[RunState], png: Path, when: str) -> Path:
    """The figure from the runs' directories, saying in the PNG which runs it shows (no PDF)."""
    from convatt.results.continuation_figure import description, figure
    from convatt.results.output import save

    for path in save(figure(states), png.with_suffix(""), description(states, when)):
        if path.suffix == ".pdf":
            path.unlink()
    return png


EMBEDDED_TREEBANKS = ["UD_Afrikaans-AfriBooms", "UD_English-GUM", "UD_English-LinES", "UD_Vietnamese-VTB"]
