"""experiments/compare_tables.py: two Table 2d (or 2b) CSVs of `convatt tables` side by side.

The CSVs are written by `convatt tables` from clones of the real tiny runs with known
accuracies (a "before" and an "after" grid), so the script reads what the CLI writes.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from run_dirs import clone_ud_run, one_tiny_run

from convatt import cli

SCRIPT = Path(__file__).resolve().parent.parent / "experiments" / "compare_tables.py"
BEFORE = {"English-LinES": {"san-pe-add": [0.90, 0.92, 0.91], "san-pe-add-conv2d": [0.93, 0.95]}}
AFTER = {
    "English-LinES": {"san-pe-add": [0.91, 0.93], "san-pe-add-conv2d": [0.94, 0.94, 0.95]},
    "Vietnamese-VTB": {"san-pe-add": [0.84]},  # only after: left out of the comparison
}


def _script():
    spec = importlib.util.spec_from_file_location("compare_tables", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tables(tiny_runs: Path, grid: dict, root: Path) -> Path:
    """`convatt tables` over clones of a tiny run with the accuracies of `grid`: its Table 2d CSV."""
    src = one_tiny_run(tiny_runs)
    for treebank, variants in grid.items():
        for variant, accuracies in variants.items():
            for seed, accuracy in enumerate(accuracies, start=1):
                clone_ud_run(src, root / "runs", treebank, variant, seed, **{"test.all": accuracy})
    assert cli.main(["tables", "--runs", str(root / "runs"), "--out", str(root / "tables")]) == 0
    return root / "tables" / "table2d_ud_per_treebank.csv"


@pytest.fixture(scope="module")
def before_after(tiny_runs, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    return _tables(tiny_runs, BEFORE, root / "before"), _tables(tiny_runs, AFTER, root / "after")


def test_rows_are_the_cells_run_in_both_with_the_difference_of_means(before_after):
    both = _script().paired(*before_after)
    assert sorted(both["variant"]) == ["san-pe-add", "san-pe-add-conv2d"]  # VTB: after only
    for row in both.itertuples():
        expected = 100 * (np.mean(AFTER[row.corpus][row.variant]) - np.mean(BEFORE[row.corpus][row.variant]))
        assert row.diff == pytest.approx(expected, abs=1e-3)
    seeds = both.set_index("variant")
    assert seeds.loc["san-pe-add", "seeds_before"] == "1 2 3" and seeds.loc["san-pe-add", "seeds_after"] == "1 2"


def test_markdown_has_one_line_per_cell_with_seeds_and_the_paper(before_after, tmp_path):
    out = tmp_path / "effect.md"
    assert _script().main([str(before_after[0]), str(before_after[1]), "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0].startswith("| treebank | model | before (seeds) | after (seeds) |")
    conv2d = next(line for line in lines if "| SAN+PE[add]+Conv2d |" in line)
    # before 94.00 ± 1.00 over seeds 1 2, after 94.33 ± 0.47 over 1 2 3, difference +0.33, paper 93.56
    expected = "| English-LinES | SAN+PE[add]+Conv2d | 94.00 ± 1.00 (1 2) | 94.33 ± 0.47 (1 2 3) | +0.33 | 93.56 |"
    assert conv2d == expected
    assert len(lines) == 4


def test_a_file_that_is_not_a_table_is_named_in_one_line(before_after, tmp_path, capsys):
    prose = tmp_path / "notes.md"
    prose.write_text("# notes\n\nsome, text\nmore, text, with, commas\n")
    assert _script().main([str(prose), str(before_after[1])]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"compare_tables: {prose}:") and len(err.splitlines()) == 1
    assert _script().main([str(tmp_path / "absent.csv"), str(before_after[1])]) == 2
    assert "absent.csv: file not found" in capsys.readouterr().err
