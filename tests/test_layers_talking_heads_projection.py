"""TalkingHeadsProjection and SelfAttention(talking_heads=True) against NumPy references
following Shazeer et al. (2020), Algorithm "talking-heads attention", head by head."""

import math

import keras
import numpy as np
import pytest

from convatt.layers import SelfAttention, TalkingHeadsProjection

B, T, D, H, DH = 2, 5, 6, 3, 4
ATOL = 2e-5


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_mix(maps, kernel):
    """out[b, g] = sum_h maps[b, h] * kernel[h, g], with loops."""
    out = np.zeros_like(maps)
    for g in range(kernel.shape[1]):
        for h in range(kernel.shape[0]):
            out[:, g] += maps[:, h] * kernel[h, g]
    return out


def np_talking_heads_attention(x, wq, wk, wv, p_logits, p_weights, keep=None):
    """Per head: scores, mixed across heads, softmax, mixed again, times that head's values."""
    heads = wq.shape[1]
    q = [x @ wq[:, h] for h in range(heads)]
    k = [x @ wk[:, h] for h in range(heads)]
    v = [x @ wv[:, h] for h in range(heads)]
    scores = np.stack([q[h] @ np.swapaxes(k[h], 1, 2) / math.sqrt(wq.shape[-1]) for h in range(heads)], axis=1)
    scores = np_mix(scores, p_logits)
    if keep is not None:
        scores = np.where(keep[:, None], scores, -1e9)
    weights = softmax(scores)
    if keep is not None:
        weights = weights * keep[:, None]
    weights = np_mix(weights, p_weights)
    return np.concatenate([weights[:, h] @ v[h] for h in range(heads)], axis=-1), weights


def randomized(layer, rng):
    values = [rng.normal(0, 0.5, w.shape) for w in layer.weights]
    layer.set_weights([v.astype("float32") for v in values])
    return values


def test_projection_matches_numpy_and_starts_as_identity():
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(B, H, T, T)).astype("float32")
    layer = TalkingHeadsProjection(H)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(maps)), maps, atol=1e-6)
    (kernel,) = randomized(layer, rng)
    assert layer.count_params() == H * H
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(maps)), np_mix(maps.astype(float), kernel), atol=ATOL)
    assert layer.compute_output_shape((None, H, T, T)) == (None, H, T, T)


def test_projection_rejects_other_head_counts():
    with pytest.raises(ValueError, match="num_heads=3"):
        TalkingHeadsProjection(3)(np.zeros((1, 2, 4, 4), "float32"))


@pytest.mark.parametrize("masked", [False, True])
def test_self_attention_with_talking_heads_matches_numpy(masked):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, T, D)).astype("float32")
    layer = SelfAttention(H, DH, talking_heads=True)
    layer.build(x.shape)
    wq, wk, wv, p_logits, p_weights = randomized(layer, rng)
    keys = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    keep = np.broadcast_to(keys[:, None, :], (B, T, T)) if masked else None
    out, attention = layer(x, attention_mask=keys if masked else None, return_attention_scores=True)
    expected, weights = np_talking_heads_attention(x.astype(float), wq, wk, wv, p_logits, p_weights, keep)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(out), expected, atol=ATOL)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(attention), weights, atol=ATOL)
    assert layer.count_params() == 3 * D * H * DH + 2 * H * H


def test_talking_heads_start_as_plain_attention():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(B, T, D)).astype("float32")
    plain, talking = SelfAttention(H, DH), SelfAttention(H, DH, talking_heads=True)
    plain.build(x.shape)
    talking.build(x.shape)
    talking.set_weights(plain.get_weights() + [np.eye(H, dtype="float32")] * 2)  # the initial kernels
    np.testing.assert_allclose(keras.ops.convert_to_numpy(talking(x)), keras.ops.convert_to_numpy(plain(x)), atol=1e-6)
    assert [w.path.split("/", 1)[1] for w in talking.weights[3:]] == [
        "talking_heads_logits/kernel",
        "talking_heads_weights/kernel",
    ]


def test_round_trips(tmp_path):
    layer = TalkingHeadsProjection(H, kernel_initializer="glorot_uniform", name="mix")
    clone = TalkingHeadsProjection.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    inputs = keras.Input((T, D))
    model = keras.Model(inputs, SelfAttention(H, DH, talking_heads=True)(inputs))
    randomized(model, np.random.default_rng(3))
    x = np.random.default_rng(4).normal(size=(B, T, D)).astype("float32")
    model.save(tmp_path / "talking.keras")
    loaded = keras.models.load_model(tmp_path / "talking.keras")
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)))
    assert loaded.layers[1].talking_heads


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    from layer_harness import run_layer_test

    scores = np.random.default_rng(0).normal(size=(B, H, T, T)).astype("float32")
    run_layer_test(TalkingHeadsProjection, {"num_heads": H}, scores, (B, H, T, T), tmp_path, expected_num_weights=1)
