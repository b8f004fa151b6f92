"""convatt.results.plots: Table 2a and Figure 2 from the real tiny runs of the `tiny_runs` fixture."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.stats
from matplotlib.figure import Figure
from synthetic_runs import write_run

from convatt.model.variants import PAPER_VARIANTS, VARIANTS
from convatt.results import frames as run_table
from convatt.results import plots, style
from convatt.results.curves import aggregate

REFERENCE = Path(__file__).resolve().parent.parent / "convatt" / "embedded" / "paper"


# the tiny runs are smoke runs (conftest.tiny_options): their setting marks their names
def tiny_label(variant: str) -> str:
    return f"{VARIANTS[variant].label} [limit 160, max 2 epochs]"


TINY_LABELS = {tiny_label("san-pe-add"), tiny_label("san-pe-add-conv2d")}


def mean_lines(ax) -> list:
    """The lines of means where every run reached (not the faded tails, not the paper's marks)."""
    return [line for line in ax.get_lines() if line.get_gid() == "mean"]


def lines_by_label(ax, gid: str = "mean") -> dict:
    return {line.get_label(): line for line in ax.get_lines() if line.get_gid() == gid}


def tails(ax) -> list:
    return [line for line in ax.get_lines() if line.get_gid() == "partial"]


def seed_values(root: Path, variant: str, csv: str, x: str) -> pd.DataFrame:
    """x -> dev accuracy (%) per seed, straight from the CSV files of `variant`'s runs."""
    frames = []
    for res in root.rglob("result.json"):
        r = json.loads(res.read_text())
        if r["variant"] == variant:
            f = pd.read_csv(res.with_name(csv))
            frames.append(f.set_index(x)["dev_accuracy"].rename(r["seed"]) * 100)
    return pd.concat(frames, axis=1)


def test_table2a_has_one_line_per_variant_with_the_mean_over_seeds(tiny_runs):
    histories = run_table.load_histories(tiny_runs)
    fig = plots.plot_epochs(histories, "ptb")
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    lines = lines_by_label(ax)
    assert set(lines) == TINY_LABELS and len(mean_lines(ax)) == 2 and tails(ax) == []
    assert len(ax.collections) == 2  # one band per variant
    for variant in ("san-pe-add", "san-pe-add-conv2d"):
        per_seed = seed_values(tiny_runs, variant, "history.csv", "epoch")
        line = lines[tiny_label(variant)]
        np.testing.assert_array_equal(line.get_xdata(), per_seed.index.to_numpy())
        np.testing.assert_allclose(line.get_ydata(), per_seed.mean(axis=1).to_numpy())
    assert ax.get_xlabel() == "epoch" and "dev accuracy" in ax.get_ylabel()


def test_band_is_min_max_std_or_t_interval_over_seeds(tiny_runs):
    histories = run_table.load_histories(tiny_runs)
    part = histories[histories["variant"] == "san-pe-add"]
    per_seed = seed_values(tiny_runs, "san-pe-add", "history.csv", "epoch")
    minmax = aggregate(part, "epoch", band="minmax").set_index("epoch")
    np.testing.assert_allclose(minmax["lo"], per_seed.min(axis=1))
    np.testing.assert_allclose(minmax["hi"], per_seed.max(axis=1))
    std = aggregate(part, "epoch", band="std").set_index("epoch")
    np.testing.assert_allclose(std["hi"] - std["mean"], np.std(per_seed.to_numpy(), axis=1))
    ci = aggregate(part, "epoch", band="ci").set_index("epoch")
    for epoch, values in per_seed.iterrows():  # two seeds: the 95% t-interval of their mean, within 0-100%
        lo, hi = scipy.stats.t.interval(
            0.95, len(values) - 1, loc=values.mean(), scale=values.std(ddof=1) / np.sqrt(len(values))
        )
        np.testing.assert_allclose([ci.loc[epoch, "lo"], ci.loc[epoch, "hi"]], np.clip([lo, hi], 0, 100))
    with pytest.raises(Exception, match="unknown band"):
        aggregate(part, "epoch", band="iqr")


def test_figure2_ptb_left_ud_right(tiny_runs):
    curves = run_table.load_curves(tiny_runs)
    fig = plots.figure2(curves)
    left, right = fig.axes
    assert set(lines_by_label(left)) == TINY_LABELS and len(mean_lines(left)) == 2
    for variant in ("san-pe-add", "san-pe-add-conv2d"):
        per_seed = seed_values(tiny_runs, variant, "curve.csv", "step")
        line = lines_by_label(left)[tiny_label(variant)]
        np.testing.assert_array_equal(line.get_xdata(), per_seed.index.to_numpy())
        np.testing.assert_allclose(line.get_ydata(), per_seed.mean(axis=1).to_numpy())
    assert right.get_lines() == [] and "no finished UD runs" in [t.get_text() for t in right.texts]


def test_figure2_says_when_runs_are_too_short_for_a_curve(tiny_runs):
    runs = run_table.load_runs(tiny_runs)
    curves = run_table.load_curves(tiny_runs, runs)
    left, _ = plots.figure2(curves.iloc[:0], runs=runs).axes  # as after `make ptb-all EPOCHS=1` on the sample
    assert left.get_lines() == [] and "no PTB run has a dev curve" in left.texts[0].get_text()


def test_ud_curves_are_averaged_over_treebanks_at_common_steps(tiny_runs, tmp_path):
    # two UD "treebanks" cloned from the tiny runs; the second loses its last curve point
    for res in tiny_runs.rglob("result.json"):
        r = json.loads(res.read_text())
        for tb in ("English-LinES", "English-GUM"):
            dst = tmp_path / "ud" / f"UD_{tb}" / r["variant"] / f"seed{r['seed']}"
            shutil.copytree(res.parent, dst, ignore=shutil.ignore_patterns("model.keras"))
            (dst / "result.json").write_text(json.dumps({**r, "preset": "ud", "corpus": tb, "is_sample": False}))
            curve = pd.read_csv(dst / "curve.csv")
            if tb == "English-GUM":
                curve = curve.iloc[:-1].assign(dev_accuracy=curve["dev_accuracy"] / 2)
            curve.to_csv(dst / "curve.csv", index=False)
    curves = run_table.load_curves(tmp_path)
    ax = plots.figure2(curves).axes[1]
    assert "2 treebanks" in ax.get_title()
    line = lines_by_label(ax)[tiny_label("san-pe-add")]
    full = seed_values(tiny_runs, "san-pe-add", "curve.csv", "step").mean(axis=1)
    common = full.index[:-1]
    np.testing.assert_array_equal(line.get_xdata(), common.to_numpy())
    np.testing.assert_allclose(line.get_ydata(), (full.loc[common] + full.loc[common] / 2).to_numpy() / 2)
    # on to the last step, faded, as the mean of the treebank that has it
    (tail,) = [t for t in tails(ax) if t.get_color() == line.get_color()]
    np.testing.assert_array_equal(tail.get_xdata(), full.index[-2:].to_numpy())
    np.testing.assert_allclose(tail.get_ydata()[-1], full.iloc[-1])


def test_a_line_is_whole_where_every_seed_is_then_goes_on_faded(tiny_runs, tmp_path):
    """Early stopping ends seeds at different epochs: the solid mean never changes which seeds it
    covers; beyond, a thin faded line goes on with the seeds left."""
    shutil.copytree(tiny_runs, tmp_path / "runs", ignore=shutil.ignore_patterns("model.keras"))
    seed2 = tmp_path / "runs" / "ptb" / "san-pe-add" / "seed2"
    pd.read_csv(seed2 / "history.csv").iloc[:1].to_csv(
        seed2 / "history.csv", index=False
    )  # seed 2 stopped after epoch 1
    curve = pd.read_csv(seed2 / "curve.csv")
    curve[curve["epoch"] == 1].to_csv(seed2 / "curve.csv", index=False)
    result = json.loads((seed2 / "result.json").read_text())
    (seed2 / "result.json").write_text(json.dumps({**result, "epochs_run": 1, "best_epoch": 1}))
    fig = plots.plot_epochs(run_table.load_histories(tmp_path / "runs"), "ptb")
    lines = lines_by_label(fig.axes[0])
    np.testing.assert_array_equal(lines[tiny_label("san-pe-add")].get_xdata(), [1])
    both = seed_values(tiny_runs, "san-pe-add", "history.csv", "epoch").loc[1].mean()
    np.testing.assert_allclose(lines[tiny_label("san-pe-add")].get_ydata(), [both])
    (tail,) = tails(fig.axes[0])
    seed1 = seed_values(tiny_runs, "san-pe-add", "history.csv", "epoch")[1]
    np.testing.assert_array_equal(tail.get_xdata(), [1, 2])
    np.testing.assert_allclose(tail.get_ydata(), [both, seed1.loc[2]])
    np.testing.assert_array_equal(lines[tiny_label("san-pe-add-conv2d")].get_xdata(), [1, 2])
    assert list(fig.axes[0].get_xticks()) == [1, 2]  # whole epochs only


def test_write_plots_writes_valid_png_and_pdf(tiny_runs, tmp_path):
    paths = plots.write_plots(tiny_runs, tmp_path / "out").paths
    names = sorted(p.name for p in paths)
    assert names == sorted(
        [
            "table2a_ptb_dev_by_epoch.png",
            "table2a_ptb_dev_by_epoch.pdf",
            "figure2_dev_by_step.png",
            "figure2_dev_by_step.pdf",
            "figure2_ptb_dev_by_step.png",
            "figure2_ptb_dev_by_step.pdf",
        ]
    )
    for path in paths:
        data = path.read_bytes()
        if path.suffix == ".png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
            import matplotlib.image

            height, width, _ = matplotlib.image.imread(path).shape
            assert width > 500 and height > 300
        else:
            assert data[:5] == b"%PDF-" and data.rstrip().endswith(b"%%EOF")
    assert not list((tmp_path / "out").glob(".tmp-*"))


def test_plots_can_be_limited_to_some_settings(tiny_runs, tmp_path):
    """`--setting`: only the runs of the settings named; naming none there is an error listing those there are."""
    import subprocess
    import sys

    from convatt.errors import ConvattError

    setting = "limit 160, max 2 epochs"  # every tiny run's
    kept = run_table.only_settings(run_table.load_runs(tiny_runs), [setting], tiny_runs)
    assert set(kept["setting"]) == {setting} and len(kept) == len(run_table.load_runs(tiny_runs))
    with pytest.raises(ConvattError, match=f"the runs here have '{setting}'"):
        plots.write_plots(tiny_runs, tmp_path / "none", settings=["paper", "keras3"])
    assert not (tmp_path / "none").exists()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "convatt",
            "plot",
            "--runs",
            str(tiny_runs),
            "--out",
            str(tmp_path / "cli"),
            "--setting",
            "paper",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "no finished run of the setting(s) 'paper'" in done.stderr
    assert "Traceback" not in done.stderr


# ---------------------------------------------------------------- grouped panels, the paper's marks, running runs


def synthetic_grid(root: Path, variants, preset: str = "ptb", corpora=("PTB",)) -> None:
    """Two seeds of each variant on each corpus, with rising made-up curves."""
    for i, variant in enumerate(variants):
        for corpus in corpora:
            for seed in (1, 2):
                top = 0.8 + 0.01 * i + 0.005 * seed
                write_run(root, variant, seed, [top - 0.1, top], [top - 0.2, top - 0.1, top], preset, corpus)


def test_ptb_is_drawn_in_panels_per_family_with_one_colour_per_variant(tmp_path):
    synthetic_grid(tmp_path, PAPER_VARIANTS)
    fig = plots.plot_steps(run_table.load_records(tmp_path).curves, "ptb")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["PTB: Absolute position", "PTB: Relative position", "PTB: Attention: the paper's"]
    drawn = [{line.get_label() for line in mean_lines(ax)} for ax in fig.axes]
    assert drawn[0] == {"SAN", "SAN+PE[con]", "SAN+PE[add]"}
    assert drawn[2] == {"SAN+PE[add]", "SAN+PE[add]+Temp", "SAN+PE[add]+Conv", "SAN+PE[add]+Conv2d"}
    assert set().union(*drawn) == {VARIANTS[v].label for v in PAPER_VARIANTS}
    for ax in fig.axes:  # the reference everywhere, in the same colour; the colours of a panel all differ
        colours = [line.get_color() for line in mean_lines(ax)]
        assert len(set(colours)) == len(colours)
        assert lines_by_label(ax)["SAN+PE[add]"].get_color() == style.COLORS["san-pe-add"]


def paper_mark(ax, variant: str) -> float | None:
    """The height of the paper's mark of `variant` in `ax`, None if none."""
    marks = [m for m in ax.get_lines() if m.get_gid() == "paper" and m.get_color() == style.COLORS[variant]]
    assert len(marks) <= 1
    return marks[0].get_ydata()[0] if marks else None


def test_the_papers_final_test_accuracies_are_marked(tmp_path):
    synthetic_grid(tmp_path, ["san-pe-add", "san-pe-add-conv"])
    (ax,) = plots.plot_epochs(run_table.load_records(tmp_path).histories, "ptb").axes
    paper_b = pd.read_csv(REFERENCE / "paper_table2b_ptb.csv").set_index("model")["all"]
    assert len([m for m in ax.get_lines() if m.get_gid() == "paper"]) == 2
    for variant in ("san-pe-add", "san-pe-add-conv"):
        assert paper_mark(ax, variant) == paper_b[VARIANTS[variant].label]
    (at,) = {m.get_xdata()[0] for m in ax.get_lines() if m.get_gid() == "paper"}
    assert max(mean_lines(ax)[0].get_xdata()) < at < ax.get_xlim()[1]  # at the right edge, after every line


def test_ud_has_the_mean_beside_a_panel_per_treebank(tmp_path):
    treebanks = ("English-LinES", "Vietnamese-VTB", "Klingon-Example")
    synthetic_grid(tmp_path, ["san-pe-add", "san-pe-add-conv"], "ud", treebanks)
    fig = plots.plot_steps(run_table.load_records(tmp_path).curves, "ud")
    titles = ["UD, mean over 3 treebanks", "English-LinES", "Klingon-Example", "Vietnamese-VTB"]
    assert [ax.get_title() for ax in fig.axes] == titles
    assert all(set(lines_by_label(ax)) == {"SAN+PE[add]", "SAN+PE[add]+Conv"} for ax in fig.axes)
    paper_d = pd.read_csv(REFERENCE / "paper_table2d_ud_per_treebank.csv").set_index("treebank")
    assert paper_mark(fig.axes[1], "san-pe-add") == paper_d.loc["English-LinES", "SAN+PE[add]"]
    assert paper_mark(fig.axes[2], "san-pe-add") is None  # not in the paper
    both = paper_d.loc[["English-LinES", "Vietnamese-VTB"], "SAN+PE[add]"].mean()
    assert paper_mark(fig.axes[0], "san-pe-add") == pytest.approx(both)


def test_runs_still_training_are_drawn_dashed_when_asked_for(tmp_path):
    synthetic_grid(tmp_path / "runs", ["san-pe-add"])
    going = write_run(tmp_path / "runs", "san-pe-add", 3, [0.5], [0.3, 0.4], corpus="PTB")
    (going / "result.json").unlink()
    written = plots.write_plots(tmp_path / "runs", tmp_path / "out", include_running=True)
    assert any("1 run(s) still training" in n for n in written.notes)
    (ax,) = plots.plot_steps(run_table.load_records(tmp_path / "runs", include_running=True).curves, "ptb").axes
    lines = lines_by_label(ax)
    assert lines["SAN+PE[add] (running)"].get_linestyle() == "--" and lines["SAN+PE[add]"].get_linestyle() == "-"
    np.testing.assert_allclose(lines["SAN+PE[add] (running)"].get_ydata(), [30, 40])
    np.testing.assert_allclose(lines["SAN+PE[add]"].get_ydata(), [60.75, 70.75, 80.75])  # never averaged together
    (ax,) = plots.plot_steps(run_table.load_records(tmp_path / "runs").curves, "ptb").axes
    assert set(lines_by_label(ax)) == {"SAN+PE[add]"}  # left out unless asked for
