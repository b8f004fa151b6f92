"""convatt.results.efficiency: learning efficiency from runs with hand-made curves, numbers worked out by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from synthetic_runs import write_run

from convatt.results import efficiency, tables
from convatt.results import frames as run_table

REF, CONV2D = "san-pe-add", "san-pe-add-conv2d"

# The areas, by hand: every run below stops before batch 2,000, so from its last curve point on
# it counts at the dev accuracy of its best epoch (the model it keeps), up to batch 2,000.
AREA = {  # (REF or CONV2D, seed): mean dev accuracy (%) over batches 100..2,000
    (REF, 1): 100 * (100 * (0.5 + 0.71 + 0.86) + 1600 * 0.9) / 1900,
    (REF, 2): 100 * (100 * 0.65 + 1800 * 0.8) / 1900,
    (CONV2D, 1): 100 * (100 * 0.875 + 1800 * 0.95) / 1900,
    (CONV2D, 2): 100 * (100 * 0.76 + 1800 * 0.78) / 1900,
    (CONV2D, 3): 70.0,  # one point, 0.7, and its only epoch kept at 0.7
}


@pytest.fixture
def ptb_runs(tmp_path) -> Path:
    """Seed 1: SAN+PE[add] best 0.9 (thresholds 0.81, 0.855, 0.891); seed 2: best 0.8 (0.72, 0.76, 0.792)."""
    root = tmp_path / "runs"
    write_run(root, REF, 1, [0.5, 0.8, 0.9, 0.88], [0.4, 0.6, 0.82, 0.9])
    write_run(root, REF, 2, [0.6, 0.8], [0.5, 0.8])
    write_run(root, CONV2D, 1, [0.82, 0.86, 0.95], [0.85, 0.9])
    write_run(root, CONV2D, 2, [0.7, 0.75, 0.78], [0.73, 0.79])  # never 99% of 0.8
    write_run(root, CONV2D, 3, [0.7], [0.7])  # no SAN+PE[add] of seed 3: no fractions
    return root


def per_model(root: Path):
    runs = run_table.load_runs(root)
    per_run = efficiency.run_efficiency(runs, run_table.load_histories(root, runs), run_table.load_curves(root, runs))
    return per_run, efficiency.over_seeds(per_run, ["corpus"]).set_index("variant")


def test_first_reaching_and_curve_area():
    x = np.array([100, 200, 300])
    assert efficiency.first_reaching(x, [0.5, 0.72, 0.9], 0.9 * 0.8) == 200  # 0.9 * 0.8 is 0.7200000000000001
    assert math.isnan(efficiency.first_reaching(x, [0.5, 0.6, 0.7], 0.71))
    assert efficiency.curve_area([1000, 2000, 3000], [0.5, 0.7, 1.0]) == (pytest.approx(0.6), 2000)
    assert efficiency.curve_area([100, 200, 400], [0.2, 0.4, 0.4]) == (pytest.approx((30 + 80) / 300), 400)
    assert efficiency.curve_area([500], [0.3]) == (0.3, 500)
    assert efficiency.curve_area([100, 200, 200, 2000], [0.4, 0.6, 0.5, 0.5]) == (
        pytest.approx((50 + 900) / 1900),
        2000,
    )  # a step down where a run ended, then flat
    assert all(math.isnan(v) for v in efficiency.curve_area([2100], [0.3]))


def test_batches_and_epochs_per_run(ptb_runs):
    per_run, _ = per_model(ptb_runs)
    row = per_run.set_index(["variant", "seed"])
    assert row.loc[(REF, 1), "reference_best"] == pytest.approx(90)
    assert [row.loc[(REF, 1), f"epochs_{p}"] for p in (90, 95, 99)] == [3, 3, 3]
    assert [row.loc[(REF, 1), f"batches_{p}"] for p in (90, 95, 99)] == [300, 400, 400]
    assert row.loc[(REF, 1), "auc"] == pytest.approx(AREA[REF, 1]) and row.loc[(REF, 1), "auc_until"] == 2000
    assert [row.loc[(CONV2D, 1), f"epochs_{p}"] for p in (90, 95, 99)] == [1, 2, 3]
    assert [row.loc[(CONV2D, 1), f"batches_{p}"] for p in (90, 95, 99)] == [100, 200, 200]
    assert row.loc[(CONV2D, 2), "reference_best"] == pytest.approx(80)
    assert row.loc[(CONV2D, 2), "epochs_95"] == 3 and math.isnan(row.loc[(CONV2D, 2), "epochs_99"])
    assert row.loc[(CONV2D, 2), "batches_95"] == 200 and math.isnan(row.loc[(CONV2D, 2), "batches_99"])
    assert math.isnan(row.loc[(CONV2D, 3), "reference_best"]) and math.isnan(row.loc[(CONV2D, 3), "epochs_90"])
    assert row.loc[(CONV2D, 3), "auc"] == pytest.approx(AREA[CONV2D, 3])  # the area needs no reference


def test_mean_and_std_over_the_seeds_that_reached(ptb_runs):
    _, frame = per_model(ptb_runs)
    conv2d, ref = frame.loc[CONV2D], frame.loc[REF]
    assert (conv2d["epochs_90"], conv2d["epochs_90_std"], conv2d["epochs_90_n"], conv2d["epochs_90_of"]) == (
        1.5,
        0.5,
        2,
        2,
    )
    assert (conv2d["epochs_99"], conv2d["epochs_99_n"], conv2d["epochs_99_of"]) == (3, 1, 2)
    assert math.isnan(conv2d["epochs_99_std"])  # one seed
    assert (conv2d["batches_95"], conv2d["batches_95_std"]) == (200, 0)
    conv2d_areas = [AREA[CONV2D, seed] for seed in (1, 2, 3)]
    assert conv2d["auc"] == pytest.approx(np.mean(conv2d_areas))
    assert conv2d["auc_n"] == conv2d["auc_of"] == conv2d["n_seeds"] == 3
    assert (ref["epochs_90"], ref["epochs_90_std"]) == (2.5, 0.5)
    assert (ref["batches_90"], ref["batches_90_std"]) == (250, 50)
    assert ref["auc"] == pytest.approx((AREA[REF, 1] + AREA[REF, 2]) / 2)
    assert ref["auc_std"] == pytest.approx(abs(AREA[REF, 1] - AREA[REF, 2]) / 2)


def test_the_table_shows_what_was_not_reached(ptb_runs, tmp_path):
    written = tables.write_tables(ptb_runs, tmp_path / "out")
    md = (tmp_path / "out" / "efficiency_ptb.md").read_text()
    line = next(row for row in md.splitlines() if row.startswith("| PTB sample | SAN+PE[add]+Conv2d |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    areas = [AREA[CONV2D, seed] for seed in (1, 2, 3)]
    auc = f"{np.mean(areas):.2f} ± {np.std(areas):.2f}"  # every area spans the 2,000 batches
    assert cells[2:] == ["3", "100 ± 0", "200 ± 0", "200 (1/2)", "1.5 ± 0.5", "2.5 ± 0.5", "3.0 (1/2)", auc]
    assert any("1 of 5 runs have no SAN+PE[add] run" in n for n in written.notes)
    assert "(ddof=0)" in md and "{" not in md  # every placeholder of the intro filled in
    assert (tmp_path / "out" / "efficiency_ptb.csv").exists()


def test_ud_is_averaged_over_treebanks_after_the_seeds(ptb_runs, tmp_path):
    root = tmp_path / "ud"
    for seed, (h_ref, c_ref, h, c) in {
        1: ([0.5, 0.8, 0.9, 0.88], [0.4, 0.6, 0.82, 0.9], [0.82, 0.86, 0.95], [0.85, 0.9]),
        2: ([0.6, 0.8], [0.5, 0.8], [0.7, 0.75, 0.78], [0.73, 0.79]),
    }.items():
        write_run(root, REF, seed, h_ref, c_ref, preset="ud", corpus="English-LinES")
        write_run(root, CONV2D, seed, h, c, preset="ud", corpus="English-LinES")
    write_run(root, REF, 1, [0.5, 1.0], [0.5, 1.0], preset="ud", corpus="Vietnamese-VTB")
    write_run(root, CONV2D, 1, [0.95, 0.96], [0.92, 0.99], preset="ud", corpus="Vietnamese-VTB")
    built = {t.name: t for t in tables.build_tables(run_table.load_runs(root))}
    per_tb = built["efficiency_ud_per_treebank"].frame.set_index(["treebank", "variant"])
    assert per_tb.loc[("Vietnamese-VTB", CONV2D), "epochs_90"] == 1
    assert per_tb.loc[("Vietnamese-VTB", CONV2D), "batches_99"] == 200  # 0.99 of 1.0, exactly
    assert per_tb.loc[("Vietnamese-VTB", CONV2D), "epochs_99_n"] == 0
    macro = built["efficiency_ud"].frame.set_index("variant").loc[CONV2D]
    assert (macro["n_treebanks"], macro["n_seeds"]) == (2, 3)
    assert macro["epochs_90"] == pytest.approx((1.5 + 1) / 2) and macro["epochs_90_std"] == pytest.approx(0.5)
    assert (macro["epochs_99"], macro["epochs_99_n"], macro["epochs_99_of"]) == (3, 1, 3)
    vtb = 100 * (100 * 0.955 + 1800 * 0.96) / 1900  # VTB's Conv2d keeps epoch 2 (0.96)
    lines = [AREA[CONV2D, 1], AREA[CONV2D, 2]]
    assert macro["auc"] == pytest.approx((np.mean(lines) + vtb) / 2)
    assert macro["auc_std"] == pytest.approx(np.std(lines))  # VTB has one seed: no std to average
    assert "| SAN+PE[add]+Conv2d | 2 | 3 |" in built["efficiency_ud"].markdown


def test_a_curve_cut_by_curve_until_is_not_extended(tmp_path):
    """Training went on past the curve's end (`--curve-until 200`): the area covers what was recorded."""
    root = tmp_path / "runs"
    out = write_run(root, REF, 1, [0.5, 0.8, 0.9, 0.88], [0.4, 0.6], curve_until=200)
    (out / "curve.csv").write_text(
        "step,epoch,dev_accuracy,dev_batch_mean_accuracy\n100,1,0.4,0.4\n200,1,0.6,0.6\n"
    )  # 4 epochs of 400 batches, curve to 200
    per_run, _ = per_model(root)
    assert per_run.loc[0, "auc"] == pytest.approx(50) and per_run.loc[0, "auc_until"] == 200


def test_a_run_that_ended_in_an_epoch_without_a_curve_point_is_held_too(tmp_path):
    """The last point (batch 200) lies in epoch 4; the run ended in epoch 5, before batch 300 was due."""
    root = tmp_path / "runs"
    out = write_run(root, REF, 1, [0.5, 0.7, 0.8, 0.85, 0.84], [0.6, 0.8])
    (out / "curve.csv").write_text("step,epoch,dev_accuracy,dev_batch_mean_accuracy\n100,2,0.6,0.6\n200,4,0.8,0.8\n")
    per_run, _ = per_model(root)
    assert per_run.loc[0, "auc"] == pytest.approx(100 * (100 * 0.7 + 1800 * 0.85) / 1900)
    assert per_run.loc[0, "auc_until"] == 2000
