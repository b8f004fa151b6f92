"""The notebooks run headless through papermill, with their parameters injected, on the real tiny
runs of the `tiny_runs` / `tiny_ud_runs` fixtures. Running them is the slow tier's (a kernel
process each, importing the backend); the tables and figures they show are tested in-process
(tests/test_tables.py, tests/test_plots.py, tests/test_inspection.py)."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import papermill
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NAMES = ["learning_curves", "results", "inspect"]


def execute(name: str, runs: Path, monkeypatch, tmp_path: Path, **parameters) -> nbformat.NotebookNode:
    """`papermill notebooks/NAME.ipynb OUT -p RUNS runs ...`, as a user runs it headless."""
    # the kernel imports convatt from this checkout, installed or not
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(tmp_path / f"{name}.ipynb"),
        parameters={"RUNS": str(runs), **parameters},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        execution_timeout=300,
    )


def outputs(nb, kind: str) -> list:
    return [
        o["data"][kind]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if kind in o.get("data", {})
    ]


def streams(nb, name: str) -> str:
    return "".join(
        o["text"]
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream" and o["name"] == name
    )


@pytest.mark.parametrize("name", NAMES)
def test_notebooks_are_committed_without_outputs_and_with_a_parameters_cell(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert nb.metadata.kernelspec.name == "python3"
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert cell.source.startswith('RUNS = "../runs"')
    assert "CONVATT_RUNS" not in "".join(c.source for c in nb.cells)  # parameters, not environment variables


def no_backend_noise(nb) -> None:
    """Nothing on stderr, and no TensorFlow/absl log line anywhere in the outputs."""
    assert streams(nb, "stderr") == ""
    everything = streams(nb, "stdout") + "".join(outputs(nb, "text/plain"))
    for noise in ("absl::", "oneDNN custom operations", "cuda", "I0000", "W0000", "tensorflow/"):
        assert noise not in everything


@pytest.mark.slow
def test_learning_curves_notebook_draws_table2a_and_figure2(tiny_runs, monkeypatch, tmp_path):
    nb = execute("learning_curves", tiny_runs, monkeypatch, tmp_path, INCLUDE_RUNNING=True)
    assert "4 finished runs, 0 running" in streams(nb, "stdout")
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells)
    assert len(outputs(nb, "image/png")) == 3  # Table 2a, Figure 2, Figure 2 PTB grouped (no UD runs)
    no_backend_noise(nb)
    text = "".join(outputs(nb, "text/plain"))
    assert "SAN+PE[add]+Conv2d" in text  # the numbers behind the lines, one column per variant


@pytest.mark.slow
def test_results_notebook_shows_the_tables_beside_the_paper(tiny_runs, monkeypatch, tmp_path):
    nb = execute("results", tiny_runs, monkeypatch, tmp_path)
    markdown = "\n".join(outputs(nb, "text/markdown"))
    assert "# Table 2b" in markdown
    assert "96.82 ± 0.07" in markdown  # the paper's SAN+PE[add], beside ours
    assert "NOT comparable" in markdown  # the PTB sample
    no_backend_noise(nb)


@pytest.mark.slow
def test_inspect_notebook_sets_variants_side_by_side(tiny_ud_runs, monkeypatch, tmp_path):
    nb = execute("inspect", tiny_ud_runs, monkeypatch, tmp_path)
    assert "5 finished runs" in streams(nb, "stdout")
    assert len(outputs(nb, "image/png")) == 2  # entropy by layer; A^p beside the PE similarity
    text = "".join(outputs(nb, "text/plain")) + "".join(outputs(nb, "text/html"))
    for label in ("SAN+PE[add]", "SAN+PE[add]+Temp", "SAN+PE[add]+Conv2d", "after_conv"):
        assert label in text
    no_backend_noise(nb)
