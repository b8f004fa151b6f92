"""RelativePositionRepresentation (Shaw et al. 2018): the harness, the naive equations, errors."""

import math

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import randomize, run_layer_test, to_numpy

from convatt.layers import RelativePositionRepresentation

ATOL = 1e-5


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(2, 3, 5, 5)).astype("float32")
    query = rng.normal(size=(2, 5, 3, 4)).astype("float32")
    run_layer_test(
        RelativePositionRepresentation,
        dict(max_distance=2, head_dim=4, embeddings_initializer="zeros"),
        (scores, query),
        (2, 3, 5, 5),
        tmp_path,
        expected_num_weights=2,
    )


@pytest.mark.parametrize("clip, n", [(2, 6), (0, 4), (7, 5)])
def test_two_term_computation_equals_naive_equations(clip, n):
    rng = np.random.default_rng(clip * 10 + n)
    b, h, d = 2, 3, 4
    layer = RelativePositionRepresentation(clip, d, embeddings_initializer="zeros")
    layer.build()
    assert [w.name for w in layer.weights] == ["key_embeddings", "value_embeddings"]
    assert layer.count_params() == 2 * (2 * clip + 1) * d
    w_key, w_value = rng.normal(size=(2, 2 * clip + 1, d))
    layer.set_weights([w_key.astype("float32"), w_value.astype("float32")])
    q, k, v = rng.normal(size=(3, b, n, h, d))

    first_term = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)  # eq. 5, first term
    scores = keras.ops.convert_to_numpy(layer(first_term.astype("float32"), q.astype("float32")))
    alpha = keras.ops.convert_to_numpy(keras.ops.softmax(scores, axis=-1))
    z = np.einsum("bhqk,bkhd->bqhd", alpha, v) + keras.ops.convert_to_numpy(layer.value_term(alpha))
    for bi in range(b):
        for hi in range(h):
            e_ref, alpha_ref, z_ref = ref.shaw_head(q[bi, :, hi], k[bi, :, hi], v[bi, :, hi], w_key, w_value, clip)
            np.testing.assert_allclose(scores[bi, hi], e_ref, atol=ATOL)
            np.testing.assert_allclose(alpha[bi, hi], alpha_ref, atol=ATOL)
            np.testing.assert_allclose(z[bi, :, hi], z_ref, atol=ATOL)


def test_float32_terms_under_mixed_policy():
    layer = RelativePositionRepresentation(2, 4, embeddings_initializer="zeros", dtype="mixed_bfloat16")
    layer.build()
    w_key, w_value = randomize(layer, seed=4, low=10, high=20)
    scores = np.zeros((1, 1, 3, 3), "float32")
    query = np.ones((1, 3, 1, 4), "float32")
    summed = keras.ops.convert_to_numpy(layer.add_float32(scores, query))
    assert summed.dtype == np.float32
    e_ref, _, _ = ref.shaw_head(query[0, :, 0], np.zeros((3, 4)), np.zeros((3, 4)), w_key, w_value, 2)
    np.testing.assert_allclose(summed[0, 0], e_ref, rtol=1e-6)
    assert keras.backend.standardize_dtype(layer(scores, query).dtype) == "bfloat16"
    assert keras.backend.standardize_dtype(layer.value_term(scores).dtype) == "float32"


@pytest.mark.parametrize("initializer", ["glorot_uniform", keras.initializers.RandomNormal(seed=5)])
@pytest.mark.tf_only
def test_key_and_value_tables_start_distinct(initializer):
    """w^K and w^V are independent parameters (eqs. 3-4): they must not start equal."""
    layer = RelativePositionRepresentation(3, 4, embeddings_initializer=initializer)
    layer.build()
    w_key, w_value = layer.get_weights()
    assert not np.allclose(w_key, w_value)


def test_relative_embeddings_are_clipped_distances():
    layer = RelativePositionRepresentation(2, 1, embeddings_initializer="zeros")
    layer.build()
    table = np.arange(-2, 3, dtype="float32")[:, None]  # w_{-2} .. w_{2} hold their own distance
    layer.set_weights([table, -table])
    a_key, a_value = (keras.ops.convert_to_numpy(a)[..., 0] for a in layer.relative_embeddings(4, 6))
    expected = np.clip(np.arange(6)[None, :] - np.arange(4)[:, None], -2, 2)
    np.testing.assert_array_equal(a_key, expected)
    np.testing.assert_array_equal(a_value, -expected)
    with pytest.raises(ValueError, match="max_distance"):
        RelativePositionRepresentation(-1, 4)


def test_from_config_round_trip():
    layer = RelativePositionRepresentation(3, 4, embeddings_initializer="ones")
    scores = np.zeros((2, 2, 8, 8), "float32")
    query = np.random.default_rng(3).normal(size=(2, 8, 2, 4)).astype("float32")
    out = to_numpy(layer(scores, query))[0]
    clone = RelativePositionRepresentation.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    np.testing.assert_allclose(to_numpy(clone(scores, query))[0], out, atol=1e-6)
