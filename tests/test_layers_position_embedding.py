"""PositionEmbedding (PE[add] / PE[con]): the harness, values, init, masks, errors."""

import keras
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import PositionEmbedding


@pytest.mark.tf_only
def test_layer_harness_add(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 5, 4)).astype("float32")
    run_layer_test(PositionEmbedding, dict(max_len=8), x, (2, 5, 4), tmp_path, expected_num_weights=1)


@pytest.mark.tf_only
def test_layer_harness_token_ids(tmp_path):
    ids = np.random.default_rng(0).integers(0, 10, size=(2, 5)).astype("int32")
    run_layer_test(PositionEmbedding, dict(max_len=8, output_dim=3), ids, (2, 5, 3), tmp_path)


@pytest.mark.tf_only
def test_parameter_count_and_shape():
    layer = PositionEmbedding(60)
    out = layer(np.zeros((2, 60, 300), "float32"))
    assert layer.count_params() == 18_000
    assert tuple(out.shape) == tuple(layer.compute_output_shape((2, 60, 300))) == (2, 60, 300)


def test_returns_the_first_rows():
    rng = np.random.default_rng(7)
    layer = PositionEmbedding(8, initializer="zeros")
    layer.build((None, 5, 4))
    (table,) = randomize(layer, seed=7)
    out = keras.ops.convert_to_numpy(layer(rng.normal(size=(3, 5, 4)).astype("float32")))
    for b in range(3):
        np.testing.assert_allclose(out[b], table[:5], atol=1e-6)
    # Concatenation width and token-id inputs.
    con = PositionEmbedding(8, output_dim=2, initializer="zeros")
    assert tuple(con(np.zeros((3, 6, 4), "float32")).shape) == (3, 6, 2)
    assert tuple(con(np.zeros((3, 6), "int32")).shape) == (3, 6, 2)
    assert con.count_params() == 16
    with pytest.raises(ValueError, match="max_len=8"):
        PositionEmbedding(8)(np.zeros((1, 9, 4), "float32"))
    with pytest.raises(ValueError, match="output_dim"):
        PositionEmbedding(8)(np.zeros((1, 6), "int32"))


def test_clear_error_for_inputs_longer_than_max_len():
    """Built for an unknown length, then given a longer sequence: a ValueError naming both
    lengths, eagerly and in a model's first call, not a broadcasting error."""
    layer = PositionEmbedding(8, initializer="zeros")
    assert tuple(layer(np.zeros((1, 8, 4), "float32")).shape) == (1, 8, 4)
    with pytest.raises(ValueError, match=r"max_len=8 positions; received a sequence of t=9"):
        layer(np.zeros((1, 9, 4), "float32"))
    model = keras.Sequential([keras.Input((None, 4)), PositionEmbedding(8, initializer="zeros")])
    with pytest.raises(ValueError, match=r"max_len=8 positions; received a sequence of t=11"):
        model.predict(np.zeros((2, 11, 4), "float32"), verbose=0)
    with pytest.raises(ValueError, match=r"t=9"):
        PositionEmbedding(8, output_dim=2)(keras.Input((9,), dtype="int32"))


def test_default_init_is_keras_embedding_uniform():
    keras.utils.set_random_seed(0)
    layer = PositionEmbedding(60)
    layer.build((None, 60, 300))
    table = layer.get_weights()[0]
    assert np.abs(table).max() <= 0.05 and np.abs(table).max() > 0.049


def test_in_functional_model_passes_mask():
    """The Keras mask flows through: masked average pooling sees only the real positions."""
    ids = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(10, 4, mask_zero=True, embeddings_initializer="zeros")(ids)
    pe = PositionEmbedding(5, initializer="zeros")
    pooled = keras.layers.GlobalAveragePooling1D()(pe(x))
    model = keras.Model(ids, pooled)
    table = np.arange(20, dtype="float32").reshape(5, 4)
    pe.set_weights([table])
    out = keras.ops.convert_to_numpy(model(np.array([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0]])))
    np.testing.assert_allclose(out, [table[:3].mean(0), table[0]], atol=1e-6)


def test_from_config_round_trip():
    layer = PositionEmbedding(8, output_dim=3, initializer="ones")
    x = np.random.default_rng(2).uniform(size=(2, 8, 8)).astype("float32")
    layer(x)
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)
