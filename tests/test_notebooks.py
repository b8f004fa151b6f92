"""Both notebooks run top to bottom on the real tiny runs of the `tiny_runs` fixture."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"


def execute(name: str, runs: Path, monkeypatch) -> nbformat.NotebookNode:
    monkeypatch.setenv("CONVATT_RUNS", str(runs))
    # the kernel imports convatt from this checkout, installed or not
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


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


@pytest.mark.parametrize("name", ["learning_curves", "results", "inspect"])
def test_notebooks_are_committed_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    assert nb.metadata.kernelspec.name == "python3"


def test_learning_curves_notebook_draws_table2a_and_figure2(tiny_runs, monkeypatch):
    nb = execute("learning_curves", tiny_runs, monkeypatch)
    assert "4 finished runs" in streams(nb, "stdout")
    assert len(outputs(nb, "image/png")) >= 2  # Table 2a, Figure 2 (no UD runs: no UD epoch plot)
    assert streams(nb, "stderr") == ""
    text = "".join(outputs(nb, "text/plain"))
    assert "SAN+PE[add]+Conv2d" in text  # the numbers behind the lines, one column per variant


def test_results_notebook_shows_the_tables_beside_the_paper(tiny_runs, monkeypatch):
    nb = execute("results", tiny_runs, monkeypatch)
    markdown = "\n".join(outputs(nb, "text/markdown"))
    assert "# Table 2b" in markdown
    assert "96.82 ± 0.07" in markdown  # the paper's SAN+PE[add], beside ours
    assert "NOT comparable" in markdown  # the PTB sample
    assert streams(nb, "stderr") == ""


def test_inspect_notebook_sets_variants_side_by_side(tiny_ud_runs, monkeypatch):
    nb = execute("inspect", tiny_ud_runs, monkeypatch)
    assert "5 finished runs" in streams(nb, "stdout")
    assert len(outputs(nb, "image/png")) == 2  # entropy by layer; A^p beside the PE similarity
    text = "".join(outputs(nb, "text/plain")) + "".join(outputs(nb, "text/html"))
    for label in ("SAN+PE[add]", "SAN+PE[add]+Temp", "SAN+PE[add]+Conv2d", "after_conv"):
        assert label in text
    assert streams(nb, "stderr") == ""
