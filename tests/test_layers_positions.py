"""Issue 6 position methods: Shaw et al. relative position representations,
sinusoidal encodings and ALiBi, against NumPy references."""
import math

import numpy as np
import pytest
import keras

from convatt.layers import AlibiBias, RelativePositionRepresentation, SinusoidalPositionEncoding

ATOL = 1e-5


# ---------------------------------------------------------------- Shaw et al. (2018)


def shaw_naive(q, k, v, w_key, w_value, clip, keep=None):
    """One head of Shaw eqs. 3-4 the naive way, with explicit a^K_ij, a^V_ij. q/k/v (n, d)."""
    n, d = q.shape
    a_key = np.zeros((n, n, d))
    a_value = np.zeros((n, n, d))
    for i in range(n):
        for j in range(n):
            rel = max(-clip, min(clip, j - i))  # clip(j - i, k)
            a_key[i, j] = w_key[rel + clip]
            a_value[i, j] = w_value[rel + clip]
    e = np.array([[q[i] @ (k[j] + a_key[i, j]) / math.sqrt(d) for j in range(n)] for i in range(n)])  # eq. 4
    alpha = np.exp(e - e.max(1, keepdims=True))
    alpha /= alpha.sum(1, keepdims=True)
    z = np.array([sum(alpha[i, j] * (v[j] + a_value[i, j]) for j in range(n)) for i in range(n)])  # eq. 3
    return e, alpha, z


@pytest.mark.parametrize("clip, n", [(2, 6), (0, 4), (7, 5)])
def test_shaw_two_term_computation_equals_naive_equations(clip, n):
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
            e_ref, alpha_ref, z_ref = shaw_naive(q[bi, :, hi], k[bi, :, hi], v[bi, :, hi], w_key, w_value, clip)
            np.testing.assert_allclose(scores[bi, hi], e_ref, atol=ATOL)
            np.testing.assert_allclose(alpha[bi, hi], alpha_ref, atol=ATOL)
            np.testing.assert_allclose(z[bi, :, hi], z_ref, atol=ATOL)


@pytest.mark.parametrize("initializer", ["glorot_uniform", keras.initializers.RandomNormal(seed=5)])
def test_shaw_key_and_value_tables_start_distinct(initializer):
    """w^K and w^V are independent parameters (eqs. 3-4): they must not start equal."""
    layer = RelativePositionRepresentation(3, 4, embeddings_initializer=initializer)
    layer.build()
    w_key, w_value = layer.get_weights()
    assert not np.allclose(w_key, w_value)


def test_shaw_relative_embeddings_are_clipped_distances():
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


# ---------------------------------------------------------------- sinusoids


@pytest.mark.parametrize("d", [6, 7])
def test_sinusoidal_encoding_matches_numpy(d):
    rng = np.random.default_rng(d)
    x = rng.normal(size=(2, 9, d))
    out = keras.ops.convert_to_numpy(SinusoidalPositionEncoding()(x.astype("float32")))
    pe = np.zeros((9, d))
    for pos in range(9):
        for i in range(0, d, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / d))
            if i + 1 < d:
                pe[pos, i + 1] = math.cos(pos / 10000 ** (i / d))
    np.testing.assert_allclose(out, x + pe, atol=ATOL)
    layer = SinusoidalPositionEncoding()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(np.zeros((1, 3, d), "float32")))[0], pe[:3],
                               atol=ATOL)
    assert layer.count_params() == 0 and not layer.weights


def test_sinusoidal_encoding_known_values():
    out = keras.ops.convert_to_numpy(SinusoidalPositionEncoding()(np.zeros((1, 2, 4), "float32")))[0]
    np.testing.assert_allclose(out[0], [0, 1, 0, 1], atol=1e-6)
    np.testing.assert_allclose(out[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-6)


# ---------------------------------------------------------------- ALiBi


def test_alibi_slopes_and_bias_for_four_heads():
    layer = AlibiBias(4)
    np.testing.assert_allclose(layer.slopes, [1 / 4, 1 / 16, 1 / 64, 1 / 256])
    scores = np.random.default_rng(0).normal(size=(2, 4, 5, 7))
    out = keras.ops.convert_to_numpy(layer(scores.astype("float32")))
    assert layer.count_params() == 0
    expected = scores.copy()
    for h, m in enumerate([1 / 4, 1 / 16, 1 / 64, 1 / 256]):
        for i in range(5):
            for j in range(7):
                expected[:, h, i, j] -= m * abs(i - j)
    np.testing.assert_allclose(out, expected, atol=ATOL)
    assert out[0, 0, 0, 3] == pytest.approx(scores[0, 0, 0, 3] - 0.75, abs=ATOL)


def test_alibi_slopes_other_head_counts_and_errors():
    np.testing.assert_allclose(AlibiBias(8).slopes, [2.0 ** -k for k in range(1, 9)])
    np.testing.assert_allclose(AlibiBias(2).slopes, [1 / 16, 1 / 256])
    with pytest.raises(ValueError, match="num_heads=4"):
        AlibiBias(4)(np.zeros((1, 2, 3, 3), "float32"))
