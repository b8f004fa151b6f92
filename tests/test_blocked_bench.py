"""`convatt bench --blocked`: its rows and table, its options (the memory the blocks save: in
tests/test_layers_blocked_attention.py, which `make test` runs under JAX too)."""

from __future__ import annotations

import pytest

from convatt.speed.blocked_bench import WAYS, BlockedSettings, render_markdown, run_blocked_benchmark


def test_a_tiny_run_measures_each_way_and_renders_its_table():
    settings = BlockedSettings(lengths=(48,), cases=("conv2d", "alibi"), block=16)
    rows = run_blocked_benchmark(settings, measured=lambda row: None)
    assert [(r.case, r.length) for r in rows] == [("conv2d", 48), ("alibi", 48)]
    assert set(rows[0].seconds) == set(WAYS) and set(rows[1].seconds) == {"blocked", "whole"}
    assert all(s > 0 for r in rows for s in r.seconds.values())
    table = render_markdown(rows, settings)
    assert "| +Conv2d | 48 |" in table and "| ALiBi | 48 |" in table and "blocks of 16 queries" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--blocked", "--masks", "causal"], "--masks is not an option of --blocked"),
        (["--blocked", "--attention"], "--attention is not an option of --blocked"),
        (["--attention", "--block", "64"], "--block is an option of --blocked"),
        (["--run-below", "1"], "--run-below is an option of --blocked"),
    ],
)
def test_options_of_other_benchmarks_are_refused(args, message, capsys):
    from convatt.cli import main

    code = main(["bench", *args])
    stderr = capsys.readouterr().err
    assert code == 2 and message in stderr, stderr
    assert "Traceback" not in stderr
