"""The continuation experiment: its make targets (lm-continue, ud-continue and their from-scratch
references) and its page (`convatt.results.continuation`), on synthetic run directories."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic_runs import write_run
from test_makefile import make, train_commands


def test_lm_continue_starts_each_setting_from_the_source_run_of_its_seed(tmp_path):
    proc = make("lm-continue", "EPOCHS=60", "SEEDS=2", tmp=tmp_path)
    commands = train_commands(proc.stdout)
    runs = tmp_path / "runs"
    source, *continued = commands  # the source run first: the continued runs wait for it
    assert source["--out"] == f"{runs}/charlm/san-pe-add/seed2" and source["--epochs"] == "60"
    assert {c["--variant"] for c in continued} == {"san-pe-add", "san-pe-add-conv2d", "san-pe-add-conv2d-pre"}
    for c in continued:
        assert c["--from"] == source["--out"] and c["--epochs"] == "20" and c["--curve-until"] == "-1"
        assert c["--out"] == f"{runs}/charlm-continued/{c['--variant']}/seed2" and c["--seed"] == "2"
    scratch = train_commands(make("lm-continue-scratch", "EPOCHS=60", "SEEDS=2", tmp=tmp_path).stdout)
    assert {(c["--variant"], c["--epochs"]) for c in scratch} == {
        ("san-pe-add-conv2d", "80"),
        ("san-pe-add-conv2d-pre", "80"),
    }
    assert all("--from" not in c for c in scratch)
    refused = make("lm-continue", tmp=tmp_path, check=False)
    assert refused.returncode != 0 and "lm-continue: give EPOCHS" in refused.stderr


def test_ud_continue_follows_the_papers_protocol_from_ud_alls_runs(tmp_path):
    proc = make("ud-continue", "SEEDS=1", "TREEBANKS=English-GUM", "VARIANTS=san-pe-add-conv2d", tmp=tmp_path)
    source, converted = train_commands(proc.stdout)
    runs = tmp_path / "runs"
    assert source["--out"] == f"{runs}/ud/UD_English-GUM/san-pe-add/seed1" and "--from" not in source
    assert converted["--from"] == source["--out"] and "--epochs" not in converted  # the paper's 100, early stopping
    assert converted["--out"] == f"{runs}/ud-continued/UD_English-GUM/san-pe-add-conv2d/seed1"
    (Path(source["--out"])).mkdir(parents=True)
    (Path(source["--out"]) / "result.json").write_text("{}")  # finished: not trained again
    assert len(train_commands(make("ud-continue", "SEEDS=1", "TREEBANKS=English-GUM", tmp=tmp_path).stdout)) == 2
    scratch = train_commands(make("ud-continue-scratch", "SEEDS=1", "TREEBANKS=English-GUM", tmp=tmp_path).stdout)
    assert [c["--out"] for c in scratch] == [f"{runs}/ud/UD_English-GUM/san-pe-add-conv2d/seed1"]


def test_continue_results_takes_the_committed_record_for_the_runs_whose_directories_are_gone(tmp_path):
    command = make("continue-results", tmp=tmp_path).stdout.replace("\\\n", " ")
    assert "--recorded docs/results/efficiency_or_capacity.csv" in command and "--ud-runs runs" in command
    assert "--recorded" not in make("continue-results", "CONTINUE_RECORD=", tmp=tmp_path).stdout


def _ud_run(
    root: Path, where: str, variant: str, seed: int, test: float, started_from: dict | None = None, dev=(0.8, 0.9)
) -> None:
    """A finished synthetic tagging run at root/where, moved there from write_run's layout."""
    import json

    made = write_run(root / "made", variant, seed, list(dev), [0.85], preset="ud", corpus="English-GUM", test_all=test)
    result = json.loads((made / "result.json").read_text())
    result["started_from"] = started_from or {}
    (made / "result.json").write_text(json.dumps(result))
    (root / where).parent.mkdir(parents=True, exist_ok=True)
    shutil.move(made, root / where)


PLAIN, CONVERTED = [0.90, 0.91, 0.92], [0.905, 0.918, 0.921]


def test_the_page_says_the_gain_with_its_interval_and_which_runs_are_missing(tmp_path):
    from convatt.results.continuation_page import write_page

    ud = tmp_path / "ud"
    for seed, (plain, converted) in enumerate(zip(PLAIN, CONVERTED), start=1):
        _ud_run(ud, f"ud/UD_English-GUM/san-pe-add/seed{seed}", "san-pe-add", seed, 0.89)
        start = {"source_commit": "abc1234", "dev_at_start": 0.9, "start_step": 20}
        _ud_run(ud, f"ud-continued/UD_English-GUM/san-pe-add/seed{seed}", "san-pe-add", seed, plain, start)
        _ud_run(
            ud, f"ud-continued/UD_English-GUM/san-pe-add-conv2d/seed{seed}", "san-pe-add-conv2d", seed, converted, start
        )
    paths = write_page(tmp_path / "lm", ud, tmp_path / "out", "now")
    assert {p.name for p in paths} == {
        "efficiency_or_capacity.md",
        "efficiency_or_capacity.csv",
        "efficiency_or_capacity_dev.png",
    }
    text = paths[0].read_text()
    gains = 100 * (np.array(CONVERTED) - np.array(PLAIN))
    low, high = stats.t.interval(0.95, 2, loc=gains.mean(), scale=stats.sem(gains))
    row = next(line for line in text.splitlines() if line.startswith("| tagging (points) | UD_English-GUM |"))
    assert "1: +0.50, 2: +0.80, 3: +0.10" in row and f"| {gains.mean():+.2f} |" in row
    assert f"[{low:+.2f}, {high:+.2f}]" in row and "not settled by 3 seeds" in row
    assert f"make lm-continue EPOCHS=60 RUNS={tmp_path / 'lm'}` trains or resumes 12" in text  # none of the LM's
    assert "ud/UD_English-GUM/san-pe-add-conv2d/seed1 (missing)" in text  # the from-scratch reference
    # provenance: the finished runs' commits, backends, machines, per setting
    assert "| ud | SAN+PE[add]+Conv2d, converted | 3 | " in text


def test_the_dev_figure_shows_the_from_scratch_peak_and_the_continued_runs_whole(tmp_path):
    from convatt.results.continuation import expected_runs, read_state
    from convatt.results.continuation_figure import figure

    start = {"source_commit": "abc1234", "dev_at_start": 0.9, "start_step": 2}
    _ud_run(tmp_path, "ud-continued/UD_English-GUM/san-pe-add/seed1", "san-pe-add", 1, 0.9, start, dev=(0.88, 0.9))
    _ud_run(tmp_path, "ud/UD_English-GUM/san-pe-add-conv2d/seed1", "san-pe-add-conv2d", 1, 0.95, dev=(0.3, 0.97))
    states = [read_state(e) for e in expected_runs(tmp_path / "lm", tmp_path, ["UD_English-GUM"], seeds=(1,))]
    (ax,) = [a for a in figure(states).axes if a.get_title() == "English-GUM"]
    low, high = ax.get_ylim()
    assert high >= 97 and low <= 88  # the from-scratch peak and every continued value inside
    assert low > 30  # the from-scratch run's first epoch is left out, as the sources' are


@pytest.mark.parametrize(
    ("gains", "reading"),
    [
        ([0.02, 0.03, 0.025], "converted ahead"),
        ([-0.02, -0.03, -0.025], "converted behind"),
        ([0.001, -0.001, 0.0005], "no difference"),
        ([0.05, -0.04, 0.01], "not settled by 3 seeds"),
        ([0.05], "not measured yet (1 seed finished)"),
    ],
)
def test_the_reading_of_a_char_lm_gain(gains, reading):
    from convatt.results.continuation import CONTINUED, gain_frame

    run = dict(task="charlm", treebank="GUM", role=CONTINUED, status="finished")
    rows = []
    for seed, gain in enumerate(gains, start=1):  # bits saved: the plain continuation's minus the converted run's
        rows.append({**run, "variant": "san-pe-add", "seed": seed, "test": 2.7})
        rows.append({**run, "variant": "san-pe-add-conv2d", "seed": seed, "test": 2.7 - gain})
    (row,) = gain_frame(pd.DataFrame(rows)).to_dict("records")
    assert row["reading"].startswith(reading) and row["mean"] == pytest.approx(np.mean(gains))


# ---------------------------------------------------------------- the answer, and runs from the record

TREEBANKS = ["English-GUM", "English-LinES"]
# test accuracies per treebank and seed: the plain continuation, converted to +Conv2d, +Conv2d from scratch
RUNS = {
    "English-GUM": {"plain": [0.90, 0.91, 0.92], "converted": [0.915, 0.925, 0.93], "scratch": [0.935, 0.946, 0.95]},
    "English-LinES": {"plain": [0.88, 0.89, 0.87], "converted": [0.89, 0.905, 0.885], "scratch": [0.91, 0.925, 0.9]},
}
SETTINGS = {"plain": "ud-continued/UD_{t}/san-pe-add", "converted": "ud-continued/UD_{t}/san-pe-add-conv2d"}
SETTINGS["scratch"] = "ud/UD_{t}/san-pe-add-conv2d"


def _tagging_runs(root: Path, runs: dict = RUNS, leave_out=("English-LinES", "scratch", 3)) -> None:
    """The continued and from-scratch tagging runs of `runs` under root (but `leave_out`: missing)."""
    variants = {"plain": "san-pe-add", "converted": "san-pe-add-conv2d", "scratch": "san-pe-add-conv2d"}
    for treebank, settings in runs.items():
        for seed in (1, 2, 3):  # the source runs
            _ud_run(root, f"ud/UD_{treebank}/san-pe-add/seed{seed}", "san-pe-add", seed, 0.89)
        for setting, tests in settings.items():
            for seed, test in enumerate(tests, start=1):
                if (treebank, setting, seed) != leave_out:
                    start = {"dev_at_start": 0.9, "start_step": 20} if setting != "scratch" else {}
                    where = SETTINGS[setting].format(t=treebank) + f"/seed{seed}"
                    _ud_run(root, where, variants[setting], seed, test, start)


def _paragraph(page: Path) -> str:
    (line,) = [line for line in page.read_text().splitlines() if line.startswith("**In short**")]
    return line


def _clause(paragraph: str, question: str, cell: str) -> str:
    """The clause of the answer to `question` ("capacity" or "scratch") that names `cell`."""
    capacity, rest = paragraph.split("*Is converting a trained model", 1)
    part = (capacity if question == "capacity" else rest).split("Per treebank")[0]
    (clause,) = [c.strip() for c in part.split("?*")[-1].split(";") if cell in c]
    return clause.lower()


def _macro(runs: dict, minus: str, seeds=(1, 2, 3)) -> tuple[float, float, float]:
    """The mean over seeds of each seed's mean over the treebanks of converted - `minus` (points), its t-interval."""
    per_seed = [
        np.mean([100 * (runs[t]["converted"][s - 1] - runs[t][minus][s - 1]) for t in TREEBANKS]) for s in seeds
    ]
    low, high = stats.t.interval(0.95, len(per_seed) - 1, loc=np.mean(per_seed), scale=stats.sem(per_seed))
    return float(np.mean(per_seed)), low, high


def test_the_answer_follows_the_runs_and_names_the_missing_ones(tmp_path):
    from convatt.results.continuation_page import write_page

    _tagging_runs(tmp_path / "ud")
    paragraph = _paragraph(write_page(tmp_path / "lm", tmp_path / "ud", tmp_path / "out", "now")[0])
    mean, low, high = _macro(RUNS, "plain")
    cell = f"tagging, mean of 2 treebanks ({mean:+.2f} points [{low:+.2f}, {high:+.2f}])"
    assert low > 0 and _clause(paragraph, "capacity", cell).startswith("yes for")
    # against from scratch: seeds 1 and 2 only (LinES' seed 3 from scratch is missing), paired by seed
    mean, low, high = _macro(RUNS, "scratch", seeds=(1, 2))
    cell = f"tagging, mean of 2 treebanks ({mean:+.2f} points [{low:+.2f}, {high:+.2f}]"
    assert high < 0 and _clause(paragraph, "scratch", cell).startswith("no for")
    assert "SAN+PE[add]+Conv2d, from scratch (English-LinES, seed 3)" in paragraph
    # none finished there: 6 settings (4 per treebank) of 3 seeds
    assert "every char LM run (18)" in paragraph and "every Vietnamese-VTB run (12)" in paragraph

    # one run changes: GUM's converted seed 2 ends below its plain continuation, the interval now covers 0
    changed = {t: {k: list(v) for k, v in s.items()} for t, s in RUNS.items()}
    changed["English-GUM"]["converted"][1] = 0.87
    shutil.rmtree(tmp_path / "ud" / "ud-continued" / "UD_English-GUM" / "san-pe-add-conv2d" / "seed2")
    _ud_run(tmp_path / "ud", "ud-continued/UD_English-GUM/san-pe-add-conv2d/seed2", "san-pe-add-conv2d", 2, 0.87)
    again = _paragraph(write_page(tmp_path / "lm", tmp_path / "ud", tmp_path / "out", "later")[0])
    mean, low, high = _macro(changed, "plain")
    cell = f"tagging, mean of 2 treebanks ({mean:+.2f} points [{low:+.2f}, {high:+.2f}])"
    assert low < 0 < high and _clause(again, "capacity", cell).startswith("not settled for")
    assert again != paragraph and "Yes for" not in again.split("*Is converting")[0]


def test_a_recorded_run_stands_in_for_an_absent_directory_and_a_present_one_wins(tmp_path):
    from convatt.results.continuation_page import write_page

    ud, record = tmp_path / "ud", tmp_path / "record.csv"
    _tagging_runs(ud)
    first = write_page(tmp_path / "lm", ud, tmp_path / "first", "then")
    shutil.copy(first[1], record)
    converted = ud / "ud-continued" / "UD_English-GUM" / "san-pe-add-conv2d"
    shutil.rmtree(converted / "seed1")  # gone: the record's row stands in
    shutil.rmtree(converted / "seed2")  # trained again: its directory wins over the record
    _ud_run(ud, "ud-continued/UD_English-GUM/san-pe-add-conv2d/seed2", "san-pe-add-conv2d", 2, 0.96)
    (tmp_path / "second").mkdir()
    shutil.copy(first[2], tmp_path / "second" / first[2].name)  # a figure with every run's curves
    md, csv, png = write_page(tmp_path / "lm", ud, tmp_path / "second", "now", recorded=record)
    runs = pd.read_csv(csv).set_index("where")
    gum = "ud-continued/UD_English-GUM/san-pe-add-conv2d/seed{}"
    assert runs.loc[gum.format(1), ["status", "origin"]].tolist() == ["finished", "record"]
    assert runs.loc[gum.format(1), "test"] == pytest.approx(100 * RUNS["English-GUM"]["converted"][0])
    assert runs.loc[gum.format(2), ["origin", "test"]].tolist() == ["directory", pytest.approx(96.0)]
    assert runs.loc["ud/UD_English-LinES/san-pe-add-conv2d/seed3", "status"] == "missing"  # in neither
    text = md.read_text()
    assert "| UD_English-GUM | SAN+PE[add]+Conv2d, converted | 1 | finished, 2 epochs, from the record |" in text
    assert "and 1 from the record `record.csv`" in text and "The figure is not drawn again" in text
    assert png.read_bytes() == first[2].read_bytes()  # kept: the record has no curves to draw it again


def test_the_page_from_the_record_alone_has_the_numbers_of_the_page_from_the_runs(tmp_path):
    from convatt.results.continuation_page import write_page

    _tagging_runs(tmp_path / "ud")
    first = write_page(tmp_path / "lm", tmp_path / "ud", tmp_path / "first", "then")
    shutil.move(tmp_path / "ud", tmp_path / "gone")  # every run directory gone: the record alone
    second = write_page(tmp_path / "lm", tmp_path / "ud", tmp_path / "second", "now", recorded=first[1])
    sections = lambda page: page.read_text().split("\n## ")
    for before, after in zip(sections(first[0]), sections(second[0])):
        if before.startswith(("The converted runs", "Test scores per setting")):
            assert before.split("![")[0] == after.split("![")[0]
    assert _paragraph(first[0]) == _paragraph(second[0])
    assert "The figure is empty" in second[0].read_text()  # no figure there before: nothing to keep
