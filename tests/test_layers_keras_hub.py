"""KerasHub's TransformerEncoder / TransformerDecoder with convatt's attention (the `hub` extra)."""

import keras
import numpy as np
import pytest

pytest.importorskip("keras_hub")

from convatt.layers import MultiHeadAttention  # noqa: E402
from convatt.layers.keras_hub import TransformerDecoder, TransformerEncoder  # noqa: E402

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


def test_saved_and_loaded_it_predicts_the_same(tmp_path):
    built = model()
    inputs = data(1)
    built.save(tmp_path / "hub.keras")
    loaded = keras.models.load_model(tmp_path / "hub.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(inputs)), keras.ops.convert_to_numpy(built(inputs)))
