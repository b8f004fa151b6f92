"""convatt.results.tables: Tables 2b, 2c, 2d from run directories, beside the paper's numbers.

The PTB tests read the real tiny runs of the `tiny_runs` fixture (conftest.py). The
UD tests clone those runs into UD-shaped copies in a temporary directory, with
known accuracies, since a UD table needs several treebanks.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from run_dirs import assert_same, clone_run, clone_ud_run, numpy_stats, one_tiny_run, result_files

from convatt import cli
from convatt.model.variants import PAPER_VARIANTS, VARIANTS
from convatt.results import frames as run_table
from convatt.results import paper, tables
from convatt.results.markdown import fmt

REFERENCE = Path(__file__).resolve().parent.parent / "convatt" / "embedded" / "paper"


def convatt_tables(runs: Path, out: Path) -> None:
    """`convatt tables`, as `make tables` runs it (the CLI prints the notes)."""
    assert cli.main(["tables", "--runs", str(runs), "--out", str(out)]) == 0


# ---------------------------------------------------------------- Table 2b


def test_table2b_means_and_stds_equal_numpy(tiny_runs):
    table = tables.ptb_table(run_table.load_runs(tiny_runs))
    frame = table.frame.set_index("variant")
    paper = pd.read_csv(REFERENCE / "paper_table2b_ptb.csv").set_index("model")
    by_variant: dict[str, list[dict]] = {}
    for r in result_files(tiny_runs):
        by_variant.setdefault(r["variant"], []).append(r)
    for variant, runs in by_variant.items():
        row = frame.loc[variant]
        assert row["n_seeds"] == len(runs) == 2
        for m in run_table.METRICS:
            mean, std = numpy_stats([None if r["test"][m] is None else 100 * r["test"][m] for r in runs])
            assert_same(row[m], mean)
            assert_same(row[f"{m}_std"], std)
            label = VARIANTS[variant].label
            assert row[f"paper_{m}"] == paper.loc[label, m]
            assert row[f"paper_{m}_std"] == paper.loc[label, f"{m}_std"]
            assert_same(row[f"diff_{m}"], mean - paper.loc[label, m])
        # the Markdown has ours and the paper's side by side, on the variant's line
        line = next(x for x in table.markdown.splitlines() if x.startswith(f"| {VARIANTS[variant].label} |"))
        assert fmt(row["all"], row["all_std"]) in line
        assert fmt(paper.loc[VARIANTS[variant].label, "all"], paper.loc[VARIANTS[variant].label, "all_std"]) in line


def test_table2b_lists_every_paper_variant_even_when_not_run(tiny_runs):
    table = tables.ptb_table(run_table.load_runs(tiny_runs))
    frame = table.frame.set_index("variant")
    assert list(frame.index) == PAPER_VARIANTS
    assert frame.loc["san", "n_seeds"] == 0 and math.isnan(frame.loc["san", "all"])
    assert frame.loc["san", "paper_all"] == 94.62
    assert "| SAN | 0 | – | 94.62 ± 0.15 | – |" in table.markdown
    assert "Meta-Bi-LSTM (Bohnet et al. 2018)" in table.markdown  # the paper's reference systems


def test_table2b_says_it_is_not_comparable(tiny_runs):
    table = tables.ptb_table(run_table.load_runs(tiny_runs))
    text = " ".join(table.notes)
    assert "PTB sample" in text and "NOT comparable" in text
    assert "smoke runs" in text  # --limit and --epochs 2
    assert "without pretrained word vectors" in text
    for note in table.notes:
        assert f"> **Note:** {note}" in table.markdown


def test_one_seed_has_no_std(tiny_runs, tmp_path):
    clone_run(one_tiny_run(tiny_runs), tmp_path / "r")
    frame = tables.ptb_table(run_table.load_runs(tmp_path)).frame
    row = frame[frame["n_seeds"] == 1].iloc[0]
    assert not math.isnan(row["all"]) and math.isnan(row["all_std"])
    assert any("fewer than 3 seeds" in n for n in tables.ptb_table(run_table.load_runs(tmp_path)).notes)


def test_write_tables_writes_markdown_and_csv_and_says_why(tiny_runs, tmp_path, capsys):
    paths = tables.write_tables(tiny_runs, tmp_path / "out").paths
    assert [p.name for p in paths][:2] == ["table2b_ptb.md", "table2b_ptb.csv"]
    assert [p.name for p in paths][2:4] == ["efficiency_ptb.md", "efficiency_ptb.csv"]
    assert [p.name for p in paths][-2:] == ["runs.md", "runs.csv"]
    convatt_tables(tiny_runs, tmp_path / "out")
    out = capsys.readouterr().out
    assert "PTB sample" in out and "NOT comparable" in out
    assert "no finished UD runs" in out
    csv = pd.read_csv(tmp_path / "out" / "table2b_ptb.csv").set_index("variant")
    expected = tables.ptb_table(run_table.load_runs(tiny_runs)).frame.set_index("variant")
    np.testing.assert_allclose(csv["all"], expected["all"], atol=1e-4)
    np.testing.assert_allclose(csv["paper_all"], expected["paper_all"])
    assert (tmp_path / "out" / "table2b_ptb.md").read_text().startswith("# Table 2b")


# ---------------------------------------------------------------- Tables 2c, 2d (UD)

UD_ACC = {  # treebank -> variant -> test "all" per seed (fractions)
    "English-LinES": {"san-pe-add": [0.90, 0.92, 0.91], "san-pe-add-conv2d": [0.93, 0.94, 0.95]},
    "Vietnamese-VTB": {"san-pe-add": [0.80, 0.84, 0.83], "san-pe-add-conv2d": [0.86, 0.85]},
    "Klingon-Example": {"san-pe-add": [0.50, 0.60, 0.70]},  # not in the paper: left out of macro means
}


@pytest.fixture
def ud_runs(tiny_runs, tmp_path) -> Path:
    src = one_tiny_run(tiny_runs)
    root = tmp_path / "runs"
    for tb, variants in UD_ACC.items():
        for variant, accs in variants.items():
            for seed, acc in enumerate(accs, start=1):
                oov = None if tb == "Vietnamese-VTB" and seed == 1 else acc - 0.1
                changes = {"test.all": acc, "test.oov": oov, "test.ambiguous": acc - 0.05}
                clone_ud_run(src, root, tb, variant, seed, **changes)
    return root


def test_table2c_is_the_macro_mean_with_average_std(ud_runs):
    table = tables.ud_macro_table(run_table.load_runs(ud_runs))
    frame = table.frame.set_index("variant")
    paper_c = pd.read_csv(REFERENCE / "paper_table2c_ud_macro.csv").set_index("model")
    paper_d = pd.read_csv(REFERENCE / "paper_table2d_ud_per_treebank.csv").set_index("treebank")
    paper_tbs = ["English-LinES", "Vietnamese-VTB"]
    for variant in ("san-pe-add", "san-pe-add-conv2d"):
        per_tb = [100 * np.array(UD_ACC[tb][variant]) for tb in paper_tbs]
        row = frame.loc[variant]
        assert row["n_treebanks"] == 2
        assert row["all"] == pytest.approx(np.mean([np.mean(a) for a in per_tb]))
        assert row["all_std"] == pytest.approx(np.mean([np.std(a) for a in per_tb]))
        label = VARIANTS[variant].label
        # the comparison: the paper's Table 2d over the same treebanks; its 47-treebank Table 2c aside
        assert row["paper_all"] == pytest.approx(paper_d.loc[paper_tbs, label].mean())
        assert row["diff_all"] == pytest.approx(row["all"] - paper_d.loc[paper_tbs, label].mean())
        assert row["paper47_all"] == paper_c.loc[label, "all"]
        assert row["paper47_oov_std"] == paper_c.loc[label, "oov_std"]
    # OOV: Vietnamese seed 1 has no OOV token (null), so its mean is over seeds 2 and 3
    oov_vi = 100 * (np.array(UD_ACC["Vietnamese-VTB"]["san-pe-add"][1:]) - 0.1)
    oov_en = 100 * (np.array(UD_ACC["English-LinES"]["san-pe-add"]) - 0.1)
    assert frame.loc["san-pe-add", "oov"] == pytest.approx((oov_vi.mean() + oov_en.mean()) / 2)
    # only the models that have runs: no row of dashes for the paper's others
    assert list(frame.index) == ["san-pe-add", "san-pe-add-conv2d"]
    row = next(line for line in table.markdown.splitlines() if line.startswith("| SAN+PE[add] |"))
    same = paper_d.loc[paper_tbs, "SAN+PE[add]"].mean()
    ours = frame.loc["san-pe-add", "all"]
    assert f"| {ours:.2f} ± {frame.loc['san-pe-add', 'all_std']:.2f} | {same:.2f} | {ours - same:+.2f} |" in row
    assert "| SAN+P+R |" not in table.markdown and "–" not in row
    assert "SAN+PE[add] 92.40 ± 0.31 / 77.89 ± 1.10" in table.markdown  # the paper's 47-treebank means: a note
    assert "Uppsala (Smith et al. 2018) 95.62" in table.markdown


def test_ud_tables_say_they_cover_a_subset(ud_runs, tmp_path, capsys):
    convatt_tables(ud_runs, tmp_path / "out")
    out = capsys.readouterr().out
    assert "cover 2 of the paper's 47 treebanks" in out
    assert "Klingon-Example" in out  # not in the paper
    assert "no finished PTB runs" in out
    md = (tmp_path / "out" / "table2c_ud_macro.md").read_text()
    assert "averaged over the same treebanks, not with its 47-treebank Table 2c" in md
    assert (tmp_path / "out" / "table2d_ud_per_treebank.csv").exists()


def test_table2d_per_treebank_beside_the_paper(ud_runs):
    table = tables.ud_treebank_table(run_table.load_runs(ud_runs))
    frame = table.frame.set_index(["treebank", "variant"])
    paper_d = pd.read_csv(REFERENCE / "paper_table2d_ud_per_treebank.csv").set_index("treebank")
    for tb, variants in UD_ACC.items():
        for variant, accs in variants.items():
            row = frame.loc[(tb, variant)]
            assert row["all"] == pytest.approx(np.mean(100 * np.array(accs)))
            assert row["all_std"] == pytest.approx(np.std(100 * np.array(accs)))
            label = VARIANTS[variant].label
            if tb in paper_d.index:
                assert row["paper_all"] == paper_d.loc[tb, label]
                assert row["paper_uppsala"] == paper_d.loc[tb, "Uppsala"]
            else:
                assert math.isnan(row["paper_all"])
    line = next(x for x in table.markdown.splitlines() if x.startswith("| English-LinES |"))
    assert "91.00 ± 0.82 / 89.38 / +1.62" in line  # ours ± std / paper / difference
    assert "96.47" in line  # Uppsala


def test_treebank_names_match_the_paper_spelling():
    assert paper.treebank_key("UD_Old_French-SRCMF") == "Old_French-SRCMF"
    assert paper.treebank_key("Old French-SRCMF") == "Old_French-SRCMF"
    assert paper.treebank_key("English-LinES") == "English-LinES"


def smoke_clone(tiny_runs: Path, runs: Path) -> Path:
    """A `make ud-all EPOCHS=1` run of seed 1 (directory seed9), test accuracy 10%."""
    smoke = {"limit": None, "epochs": 1}
    return clone_ud_run(one_tiny_run(tiny_runs), runs, "English-LinES", "san-pe-add", 1, smoke, 9, **{"test.all": 0.10})


def test_smoke_runs_are_never_averaged_with_full_runs(ud_runs, tiny_runs):
    """A `make ud-all EPOCHS=1` run left beside full runs gets a row of its own."""
    smoke = smoke_clone(tiny_runs, ud_runs)
    runs = run_table.load_runs(ud_runs)  # seed 1 twice, in two settings: no duplicate
    assert runs.loc[runs["run_dir"] == str(smoke), "setting"].item() == "max 1 epoch"
    frame = tables.ud_treebank_table(runs).frame.set_index(["treebank", "model"])
    assert frame.loc[("English-LinES", "SAN+PE[add]"), "all"] == pytest.approx(100 * np.mean([0.90, 0.92, 0.91]))
    assert frame.loc[("English-LinES", "SAN+PE[add] [max 1 epoch]"), "all"] == pytest.approx(10.0)
    macro = tables.ud_macro_table(runs)
    assert "SAN+PE[add] [max 1 epoch]" in macro.markdown and "never averaged together" in macro.markdown


def test_write_tables_keeps_only_the_settings_named(ud_runs, tiny_runs, tmp_path):
    """`convatt tables --setting paper`: the smoke run beside the full ones is left out of every table."""
    smoke_clone(tiny_runs, ud_runs)
    tables.write_tables(ud_runs, tmp_path / "all")
    tables.write_tables(ud_runs, tmp_path / "paper", settings=["paper"])
    assert "[max 1 epoch]" in (tmp_path / "all" / "table2d_ud_per_treebank.md").read_text()
    paper_only = (tmp_path / "paper" / "table2d_ud_per_treebank.md").read_text()
    assert "[max 1 epoch]" not in paper_only and "SAN+PE[add]" in paper_only
    frame = pd.read_csv(tmp_path / "paper" / "table2d_ud_per_treebank.csv")
    assert frame["setting"].isna().all()
