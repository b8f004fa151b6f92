"""convatt.results.protocol_comparison: the original protocol against Keras 3's, from runs with hand-made
histories and curves; every expected number worked out by hand."""

from __future__ import annotations

import math

import pytest
from synthetic_runs import write_run

from convatt.protocol import TrainingProtocol
from convatt.results import frames as run_table
from convatt.results import protocol_comparison, tables
from convatt.results.paper import paper_table, paper_table2d

REF, CONV2D = "san-pe-add", "san-pe-add-conv2d"
KERAS3 = {"protocol": TrainingProtocol.named("keras3")}
GUM, LINES = "UD_English-GUM", "UD_English-LinES"


def _ud(root, corpus, variant, seed, test_all, dev_by_epoch, dev_by_step, **config):
    root = root / "keras3" if config else root  # where the Makefile puts them (RUNS=runs/keras3)
    write_run(root, variant, seed, dev_by_epoch, dev_by_step, preset="ud", corpus=corpus, test_all=test_all, **config)


@pytest.fixture
def both_protocols(tmp_path):
    """GUM: SAN+PE[add] and +Conv2d under both protocols; LinES: SAN+PE[add] under both, +Conv2d
    only under the original (so no LinES +Conv2d rows); a PTB run only under the original."""
    root = tmp_path / "runs"
    _ud(root, GUM, REF, 1, 0.88, [0.6, 0.7, 0.8, 0.85, 0.86, 0.84], [0.5, 0.62])
    _ud(root, GUM, REF, 2, 0.90, [0.64, 0.72, 0.82, 0.8], [0.55, 0.66])
    _ud(root, GUM, REF, 1, 0.87, [0.4, 0.5, 0.6, 0.7, 0.8], [0.3, 0.45], **KERAS3)
    _ud(root, GUM, CONV2D, 1, 0.93, [0.7, 0.8, 0.9], [0.6, 0.7])
    _ud(root, GUM, CONV2D, 1, 0.92, [0.5, 0.6, 0.7, 0.8], [0.4, 0.5], **KERAS3)
    _ud(root, LINES, REF, 1, 0.89, [0.5, 0.6, 0.7, 0.8, 0.9], [0.45, 0.5])
    _ud(root, LINES, REF, 1, 0.86, [0.3, 0.4, 0.5, 0.6, 0.65], [0.2, 0.35], **KERAS3)
    _ud(root, LINES, CONV2D, 1, 0.95, [0.8, 0.9], [0.7])
    write_run(root, REF, 1, [0.5, 0.6], [0.4])
    return root


def _frame(root):
    runs = run_table.load_runs(root)
    frame = protocol_comparison.protocol_frame(
        runs, run_table.load_histories(root, runs), run_table.load_curves(root, runs)
    )
    return frame.set_index(["corpus", "variant", "protocol"])


def test_pairs_only_what_ran_under_both_protocols(both_protocols):
    frame = _frame(both_protocols)
    assert set(frame.index) == {
        (c, v, p) for c in ("English-GUM", "mean") for v in (REF, CONV2D) for p in ("original", "keras3")
    } | {("English-LinES", REF, p) for p in ("original", "keras3")}


def test_seed_means_epochs_and_the_start_of_the_curve(both_protocols):
    row = _frame(both_protocols).loc[("English-GUM", REF, "original")]
    assert (row["n_seeds"], row["seeds"]) == (2, "1 2")
    assert (row["all"], row["all_std"]) == (pytest.approx(89.0), pytest.approx(1.0))
    assert (row["best_epoch"], row["best_epoch_std"]) == (pytest.approx(4.0), pytest.approx(1.0))  # epochs 5 and 3
    assert (row["epochs_run"], row["epochs_run_std"]) == (pytest.approx(5.0), pytest.approx(1.0))
    assert [row[f"dev_epoch_{e}"] for e in (1, 3, 5)] == pytest.approx([62.0, 81.0, 86.0])  # epoch 5: seed 1 only
    assert [row["dev_batch_100"], row["dev_batch_200"]] == pytest.approx([52.5, 64.0])
    keras3 = _frame(both_protocols).loc[("English-GUM", REF, "keras3")]
    assert math.isnan(keras3["all_std"]) and keras3["all"] == pytest.approx(87.0)
    paper = paper_table2d().at["English-GUM", "SAN+PE[add]"]
    assert (keras3["paper_all"], keras3["diff_all"]) == (pytest.approx(paper), pytest.approx(87.0 - paper))


def test_the_ud_mean_is_over_treebanks_and_the_gains_beside_the_paper(both_protocols):
    frame = _frame(both_protocols)
    mean = frame.loc[("mean", REF, "keras3")]
    assert (mean["all"], mean["n_seeds"]) == (pytest.approx((87.0 + 86.0) / 2), 2)
    assert mean["best_epoch"] == pytest.approx((5 + 5) / 2)
    gains = protocol_comparison.gain_frame(frame.reset_index()).set_index(["corpus", "protocol"])
    paper_d = paper_table2d().loc["English-GUM"]
    assert gains.at[("English-GUM", "original"), "gain"] == pytest.approx(93.0 - 89.0)
    assert gains.at[("English-GUM", "keras3"), "gain"] == pytest.approx(92.0 - 87.0)
    assert gains.at[("English-GUM", "keras3"), "paper_gain"] == pytest.approx(
        paper_d["SAN+PE[add]+Conv2d"] - paper_d["SAN+PE[add]"]
    )
    # the mean of the treebanks' gains: GUM's alone (LinES has no keras3 +Conv2d), not against
    # SAN+PE[add]'s mean over GUM and LinES (86.5 under keras3)
    assert gains.at[("mean", "keras3"), "gain"] == pytest.approx(92.0 - 87.0)


def test_ptb_rows_beside_table_2b(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "san-r", 1, [0.5, 0.7, 0.75], [0.6, 0.65], test_all=0.91)
    write_run(root / "keras3", "san-r", 1, [0.3, 0.6], [0.4, 0.5], test_all=0.88, **KERAS3)
    frame = _frame(root)
    paper = paper_table("table2b_ptb").set_index("model").at["SAN+R", "all"]
    row = frame.loc[("PTB sample", "san-r", "keras3")]
    assert (row["all"], row["diff_all"], row["dev_epoch_1"]) == (
        pytest.approx(88.0),
        pytest.approx(88.0 - paper),
        pytest.approx(30.0),
    )
    assert math.isnan(row["dev_epoch_3"])  # it ran two epochs


def test_convatt_tables_writes_the_comparison_only_when_both_protocols_ran(both_protocols, tmp_path):
    written = tables.write_tables(both_protocols, tmp_path / "out")
    page = (tmp_path / "out" / "protocol_comparison.md").read_text()
    assert "| English-GUM | SAN+PE[add] | original | 2 | 89.00 ± 1.00 |" in page
    assert "| English-GUM | SAN+PE[add]+Conv2d | +4.00 | +5.00 |" in page
    assert tmp_path / "out" / "protocol_comparison.csv" in written.paths
    only_original = tables.write_tables(both_protocols, tmp_path / "original", settings=["paper"])
    assert not any(p.name.startswith("protocol_comparison") for p in only_original.paths)
