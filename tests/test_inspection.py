"""convatt inspect: statistics against an independent computation, figures per variant, skips."""

import keras
import numpy as np
import pytest
from helpers import INSPECT_VARIANTS
from scipy.stats import entropy

from convatt.data.batching import iterate_batches
from convatt.errors import ConvattError
from convatt.inference import inspection
from convatt.inference.loading import load_run

# Five tiny UD runs of their own variants, inspected: the slow tier. `convatt inspect`'s bad
# inputs are in tests/test_bad_inputs.py (make test).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tiny_ud_runs):
    return {v: load_run(tiny_ud_runs / "ud" / "UD_English-LinES" / v / "seed1") for v in INSPECT_VARIANTS}


END_TO_END = "san-pe-add-conv2d"  # the variant `inspect_run` writes everything of, once


@pytest.fixture(scope="module")
def inspected(runs, tmp_path_factory):
    """`inspect_run` of END_TO_END's run (dev sentence 3): (files written, lines logged, directory)."""
    out, lines = tmp_path_factory.mktemp("inspect"), []
    written = inspection.inspect_run(runs[END_TO_END].path, out, dev_index=3, log=lines.append)
    return written, lines, out


def call_attention(trained, inputs):
    """Each layer's attention as its own call returns it (return_attention_scores), on the layer's
    inputs taken from a sub-model of the tagger."""
    layers = inspection.attention_layers(trained.model)
    layer_inputs = keras.Model(trained.model.input, [layer.input for layer in layers]).predict_on_batch(inputs)
    return [
        keras.ops.convert_to_numpy(layer(x, return_attention_scores=True)[1]) for layer, x in zip(layers, layer_inputs)
    ]


@pytest.mark.parametrize("variant", ["san-p-r", "san-pe-add-temp", "san-pe-add-conv2d"])
def test_statistics_match_scipy_on_the_layers_own_attention(runs, variant):
    trained = runs[variant]
    sentences = inspection.dev_sentences(trained)[:12]
    stats = inspection.attention_statistics(trained, sentences, batch_size=5)
    inputs = next(iterate_batches(inspection.encode(trained, sentences), 100))[0]
    queries = inputs["words"] != 0
    stage = "after_conv" if variant.endswith("conv2d") else "softmax"
    for layer, attention in enumerate(call_attention(trained, inputs), start=1):
        for head in range(attention.shape[1]):
            rows = attention[:, head][queries]  # (real tokens, all 60 keys, PAD included)
            row = stats[(stats["layer"] == layer) & (stats["head"] == head + 1) & (stats["stage"] == stage)].iloc[0]
            alive = rows.sum(-1) > 0  # after a ReLU convolution a row can be all 0
            assert row.n_rows + row.zero_rows == queries.sum() == sum(map(len, sentences))
            assert row.zero_rows == (~alive).sum() and (stage == "after_conv" or alive.all())
            rows = rows[alive]
            if not len(rows):
                assert np.isnan(row.mean_entropy)
                continue
            assert row.mean_entropy == pytest.approx(entropy(rows, axis=-1).mean(), rel=1e-4)  # scipy normalises
            assert row.mean_max_weight == pytest.approx((rows.max(-1) / rows.sum(-1)).mean(), rel=1e-4)
    assert stats.uniform_entropy.iloc[0] == pytest.approx(np.log(60))
    assert set(stats.stage) == ({"softmax", "after_conv"} if stage == "after_conv" else {"softmax"})


def test_relative_biases_follow_relative_matrix_along_each_diagonal(runs):
    layer = inspection.attention_layers(runs["san-p-r"].model)[0]
    distances, biases = inspection.relative_biases(runs["san-p-r"].model)[1]
    matrix = np.asarray(layer.modifications["relative_bias"].relative_matrix(60, 60))
    for i, j in [(0, 0), (5, 2), (2, 5), (59, 0), (0, 59), (30, 31)]:
        np.testing.assert_allclose(biases[:, list(distances).index(i - j)], matrix[:, i, j], rtol=1e-6)
    assert list(inspection.relative_biases(runs["san-p-r"].model)) == [1]  # +R in the first layer only


EXPECTED = {  # figures beyond attention_layer1-4 and attention_entropy; None: skipped
    "san-pe-add": {"position_embedding_similarity"},
    "san-p-r": {"position_interactions", "relative_biases"},
    "san-pe-add-temp": {"position_embedding_similarity", "temperatures"},
    "san-pe-add-conv": {"position_embedding_similarity"} | {f"conv_kernels_layer{i}" for i in range(1, 5)},
    "san-pe-add-conv2d": {"position_embedding_similarity", "conv_kernels"},
}


OPTIONAL = {"position_interactions", "relative_biases", "temperatures", "position_embedding_similarity", "conv_kernels"}


def test_inspect_writes_the_figures_and_says_what_it_skips(inspected):
    written, lines, out = inspected
    stems = {p.stem for p in written if p.suffix == ".png"}
    assert stems == EXPECTED[END_TO_END] | {f"attention_layer{i}" for i in range(1, 5)} | {"attention_entropy"}
    assert all((out / f"{s}.pdf").read_bytes()[:4] == b"%PDF" for s in stems)
    skipped = {line.split(":")[0].removeprefix("skipped ") for line in lines if line.startswith("skipped")}
    assert skipped == {s for s in OPTIONAL if not any(x.startswith(s) for x in stems)}
    assert (out / "attention_statistics.csv").read_text().startswith(",".join(inspection.STAT_COLUMNS))


@pytest.mark.parametrize("variant", INSPECT_VARIANTS)
def test_each_variant_gets_the_figures_of_its_weights(runs, variant):
    """What `inspect_run` draws of a variant's learned weights, and the reason for each it skips
    (the attention maps and entropies every variant gets: the end-to-end test above)."""
    items = inspection._weight_figures(runs[variant], variant)
    drawn = {stem for stem, figure, _ in items if figure is not None}
    assert drawn == EXPECTED[variant]
    skipped = {stem: why_not for stem, figure, why_not in items if figure is None}
    assert set(skipped) == {s for s in OPTIONAL if not any(x.startswith(s) for x in drawn)}
    assert all(why_not.startswith(f"{variant} has no ") for why_not in skipped.values()), skipped


def test_sentence_choice(runs):
    trained, notes = runs["san-pe-add"], []
    assert inspection.chosen_sentence(trained, None, 2, notes.append) == inspection.dev_sentences(trained)[2]
    with pytest.raises(ConvattError, match="--dev-index 64 is out of range: the run's dev split has 64"):
        inspection.chosen_sentence(runs["san-p-r"], None, 64, notes.append)
    assert len(inspection.chosen_sentence(trained, " ".join(["w"] * 70), 0, notes.append)) == 60
    assert "show its first 60" in notes[-1]


def test_entropy_figure_has_a_panel_per_layer_with_every_stage_as_points(inspected):
    import pandas as pd

    from convatt.inference import inspection_figures

    stats = pd.read_csv(inspected[2] / "attention_statistics.csv")
    assert set(stats["stage"]) == {"softmax", "after_conv"}
    fig = inspection_figures.entropy_by_layer(stats, "SAN+PE[add]+Conv2d")
    assert [ax.get_title() for ax in fig.axes] == [f"layer {i}" for i in range(1, 5)]
    for ax, (_, part) in zip(fig.axes, stats.groupby("layer")):
        points = {line.get_label(): line for line in ax.get_lines() if line.get_label() != "uniform"}
        assert set(points) == {"softmax", "after the convolution"}
        for stage, name in (("softmax", "softmax"), ("after_conv", "after the convolution")):
            rows = part[part["stage"] == stage].sort_values("head")
            assert points[name].get_linestyle() == "None"  # heads as points, never joined
            np.testing.assert_allclose(points[name].get_ydata(), rows["mean_entropy"])
            np.testing.assert_array_equal(np.round(points[name].get_xdata()), rows["head"])
