"""convatt.results.summary: the runs behind the tables, their wall time, commits and machines."""

from __future__ import annotations

import json

from synthetic_runs import write_run

from convatt.results import frames as run_table
from convatt.results import summary as run_summary
from convatt.results import tables

PLATFORM = dict(
    cpu="AMD EPYC 7B13",
    cpu_features="avx avx2 fma avx512f",
    onednn="on",
    packages={"tensorflow": "2.21.0", "keras": "3.15.1", "numpy": "2.4.6"},
)


def _record(run, **fields):
    path = run / "result.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}) + "\n")


def test_runs_wall_time_commits_and_machines_per_model(tmp_path):
    root = tmp_path / "runs"
    a = write_run(root, "san-pe-add", 1, [0.5, 0.6], [0.4], preset="ud", corpus="UD_English-GUM")
    b = write_run(root, "san-pe-add", 2, [0.5, 0.6, 0.7], [0.4], preset="ud", corpus="UD_English-LinES")
    write_run(root, "san-pe-add-conv2d", 1, [0.5], [0.4], preset="ud", corpus="UD_English-GUM")
    _record(a, wall_seconds=100.0, source_commit="abc1234", machine="x86_64, 2 CPUs, cpu:0")
    _record(b, wall_seconds=300.5, source_commit="abc1234+changes", machine="x86_64, 2 CPUs, cpu:0", **PLATFORM)
    frame = run_summary.summary_frame(run_table.load_runs(root)).set_index("variant")
    ref = frame.loc["san-pe-add"]
    assert (ref["runs"], ref["corpora"], ref["seeds"], ref["epochs_run"]) == (2, 2, "1 2", 5)
    assert (ref["wall_seconds"], ref["wall_seconds_min"], ref["wall_seconds_max"]) == (400.5, 100.0, 300.5)
    assert ref["commits"] == "abc1234, abc1234+changes"
    assert ref["machines"] == (
        "AMD EPYC 7B13 [avx avx2 fma avx512f], oneDNN on, x86_64, 2 CPUs, cpu:0, "
        "x86_64, 2 CPUs, cpu:0 (CPU model not recorded)"
    )
    assert ref["packages"] == "not recorded, tensorflow 2.21.0, keras 3.15.1, numpy 2.4.6"
    older = frame.loc["san-pe-add-conv2d"]  # an older result.json
    assert older["commits"] == older["machines"] == older["packages"] == run_summary.NOT_RECORDED
    assert list(frame.index) == ["san-pe-add", "san-pe-add-conv2d"]  # the paper's order
    page = run_summary.summary_table(run_table.load_runs(root)).markdown
    assert "| **all** |  | 3 |  |  | 6 | 413 |" in page  # 100 + 300.5 + 12.5 (write_run's) seconds


def test_convatt_tables_writes_the_summary(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "san", 1, [0.5], [0.4])
    written = tables.write_tables(root, tmp_path / "out")
    assert tmp_path / "out" / "runs.md" in written.paths
    assert (
        "| ptb | SAN | 1 | 1 | 1 | 1 | 12 | 12-12 | tensorflow | not recorded | not recorded | not recorded |"
        in (tmp_path / "out" / "runs.md").read_text()
    )
