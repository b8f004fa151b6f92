"""KerasHub's TransformerEncoder / TransformerDecoder with convatt's attention (the `hub` extra)."""

import keras
import numpy as np
import pytest

pytest.importorskip("keras_hub")

from convatt.layers import MultiHeadAttention  # noqa: E402
from convatt.layers.keras_hub_blocks import TransformerDecoder, TransformerEncoder  # noqa: E402

D = 16


def model(seed=0):
    source, target = keras.Input((None, D)), keras.Input((None, D))
    options = {"attention_conv": "2d", "talking_heads": True}
    memory = TransformerEncoder(32, num_heads=2, attention_options=options, name="encoder")(source)
    out = TransformerDecoder(
        32, num_heads=2, attention_options=options, cross_attention_options=options, name="decoder"
    )(target, memory)
    built = keras.Model([source, target], out)
    keras.utils.set_random_seed(seed)
    return built


def data(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(2, 7, D)).astype("float32"), rng.normal(size=(2, 9, D)).astype("float32")]


@pytest.mark.tf_only
def test_the_attention_layers_are_convatts_and_keras_ones_are_gone():
    built = model()
    for block, names in (
        ("encoder", ["_self_attention_layer"]),
        ("decoder", ["_self_attention_layer", "_cross_attention_layer"]),
    ):
        for name in names:
            assert isinstance(getattr(built.get_layer(block), name), MultiHeadAttention)
    # each attention: q, k, v, output kernels and biases (8) + conv kernel and bias + 2 talking heads = 12
    paths = [w.path for w in built.weights if "attention" in w.path.split("/")[1] and "norm" not in w.path]
    assert len(paths) == 3 * 12, paths


def test_the_decoder_reads_no_later_target_token():
    built = model()
    source, target = data()
    before = keras.ops.convert_to_numpy(built([source, target]))
    changed = target.copy()
    changed[:, 5] += 2.0
    after = keras.ops.convert_to_numpy(built([source, changed]))
    np.testing.assert_allclose(after[:, :5], before[:, :5], atol=1e-5)
    assert np.abs(after[:, 5:] - before[:, 5:]).max() > 1e-3


@pytest.mark.tf_only
def test_saved_and_loaded_it_predicts_the_same(tmp_path):
    built = model()
    inputs = data(1)
    built.save(tmp_path / "hub.keras")
    loaded = keras.models.load_model(tmp_path / "hub.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(inputs)), keras.ops.convert_to_numpy(built(inputs)))


def padded(real: np.ndarray, x: np.ndarray, seed: int) -> np.ndarray:
    """`x` with its padded positions (`real` False) changed."""
    noise = np.random.default_rng(seed).normal(size=x.shape).astype("float32") * 3.0
    return np.where(real[..., None], x, x + noise)


@pytest.mark.parametrize(
    "options",
    [{"attention_conv": "2d"}, {"attention_conv": "2d", "conv_before_softmax": True, "conv_kernel_size": (2, 9)}],
    ids=["conv2d", "mta"],
)
@pytest.mark.parametrize("side", ["left", "right"])
def test_kerashub_padding_masks_keep_the_padding_from_real_outputs(options, side):
    """KerasHub's padding_mask (encoder; decoder and encoder in the decoder, cross-attention too)."""
    source, target = keras.Input((7, D)), keras.Input((9, D))
    source_real, target_real = keras.Input((7,), dtype="bool"), keras.Input((9,), dtype="bool")
    memory = TransformerEncoder(32, num_heads=2, attention_options=options)(source, padding_mask=source_real)
    out = TransformerDecoder(32, num_heads=2, attention_options=options, cross_attention_options=options)(
        target, memory, decoder_padding_mask=target_real, encoder_padding_mask=source_real
    )
    built = keras.Model([source, target, source_real, target_real], [memory, out])
    positions = np.arange(9)[None, :]
    pads = np.array([[3], [1]])
    real = positions >= pads if side == "left" else positions < 9 - pads
    masks = [real[:, :7] if side == "right" else real[:, 2:], real]
    x = [np.random.default_rng(i).normal(size=(2, n, D)).astype("float32") for i, n in enumerate((7, 9))]
    before = built([*x, *masks])
    after = built([padded(masks[0], x[0], 5), padded(masks[1], x[1], 6), *masks])
    for got, want, rows in zip(after, before, masks):
        change = np.abs(keras.ops.convert_to_numpy(got) - keras.ops.convert_to_numpy(want))[rows].max()
        assert change < 1e-5, f"padding leaked: {change}"


@pytest.mark.tf_only
def test_the_old_module_name_still_gives_the_blocks_with_a_warning():
    import importlib
    import sys

    sys.modules.pop("convatt.layers.keras_hub", None)
    with pytest.warns(DeprecationWarning, match="keras_hub_blocks"):
        old = importlib.import_module("convatt.layers.keras_hub")
    assert (old.TransformerEncoder, old.TransformerDecoder) == (TransformerEncoder, TransformerDecoder)
