"""convatt.results.summary: the runs behind the tables, their wall time, commits and machines."""

from __future__ import annotations

import json

from synthetic_runs import write_run

from convatt.results import frames as run_table
from convatt.results import summary as run_summary
from convatt.results import tables


def _record(run, **fields):
    path = run / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}) + "\n")


def test_runs_wall_time_commits_and_machines_per_model(tmp_path):
    root = tmp_path / "runs"
    a = write_run(root, "san-pe-add", 1, [0.5, 0.6], [0.4], preset="ud", corpus="UD_English-GUM")
    b = write_run(root, "san-pe-add", 2, [0.5, 0.6, 0.7], [0.4], preset="ud", corpus="UD_English-LinES")
    write_run(root, "san-pe-add-conv2d", 1, [0.5], [0.4], preset="ud", corpus="UD_English-GUM")
    _record(a, wall_seconds=100.0, source_commit="abc1234", machine="x86_64, 2 CPUs, cpu:0")
    _record(b, wall_seconds=300.5, source_commit="abc1234+changes", machine="x86_64, 2 CPUs, cpu:0")
    frame = run_summary.summary_frame(run_table.load_runs(root)).set_index("variant")
    ref = frame.loc["san-pe-add"]
    assert (ref["runs"], ref["corpora"], ref["seeds"], ref["epochs_run"]) == (2, 2, "1 2", 5)
    assert (ref["wall_seconds"], ref["wall_seconds_min"], ref["wall_seconds_max"]) == (400.5, 100.0, 300.5)
    assert ref["commits"] == "abc1234, abc1234+changes" and ref["machines"] == "x86_64, 2 CPUs, cpu:0"
    assert frame.loc["san-pe-add-conv2d", "commits"] == run_summary.NOT_RECORDED  # an older result.json
    assert list(frame.index) == ["san-pe-add", "san-pe-add-conv2d"]  # the paper's order
    page = run_summary.summary_table(run_table.load_runs(root)).markdown
    assert "| **all** |  | 3 |  |  | 6 | 413 |" in page  # 100 + 300.5 + 12.5 (write_run's) seconds


def test_convatt_tables_writes_the_summary(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "san", 1, [0.5], [0.4])
    written = tables.write_tables(root, tmp_path / "out")
    assert tmp_path / "out" / "runs.md" in written.paths
    assert (
        "| ptb | SAN | 1 | 1 | 1 | 1 | 12 | 12-12 | tensorflow | not recorded | not recorded |"
        in (tmp_path / "out" / "runs.md").read_text()
    )
