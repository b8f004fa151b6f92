"""Cached decoding of `MultiHeadAttention`: one token at a time = the whole causal sequence."""

import keras
import numpy as np
import pytest

from convatt.layers import MultiHeadAttention
from convatt.layers.core.attention_cache import cache_shape, empty_query_cache

LENGTH, DIM, HEADS, ENCODER = 6, 8, 2, 4

VARIANTS = {
    "plain": {},
    "temperature_talking_heads": {"temperature": True, "talking_heads": True},
    "alibi_shaw": {"alibi": True, "relative_position_representation": 2},
    "p_r": {"position_interaction": True, "relative_bias": True, "max_len": LENGTH},
    "r_circulant": {"relative_bias": True, "relative_bias_parameterization": "circulant", "max_len": LENGTH},
    "conv1d": {"attention_conv": "1d", "max_len": LENGTH},
    "conv1d_pre_k2": {"attention_conv": "1d", "conv_before_softmax": True, "conv_kernel_size": 2, "max_len": LENGTH},
    "conv2d_pre_mta": {"attention_conv": "2d", "conv_before_softmax": True, "conv_kernel_size": (2, 3)},
    "conv2d_k4": {"attention_conv": "2d", "conv_kernel_size": (4, 1)},
    "all_post": {
        "attention_conv": "2d", "temperature": True, "talking_heads": True, "alibi": True,
        "relative_position_representation": 1, "position_interaction": True, "relative_bias": True,
        "max_len": LENGTH,
    },
    "all_pre_1d": {
        "attention_conv": "1d", "conv_before_softmax": True, "temperature": True, "talking_heads": True,
        "relative_position_representation": 3, "relative_bias": True, "max_len": LENGTH,
    },
}  # fmt: skip


def _layer(options: dict) -> MultiHeadAttention:
    layer = MultiHeadAttention(HEADS, DIM // HEADS, **options)
    layer.build((1, LENGTH, DIM), (1, LENGTH, DIM))
    rng = np.random.default_rng(0)
    for weight in layer.weights:  # away from identities and zeros: every weight matters
        weight.assign(rng.normal(0.0, 0.4, weight.shape).astype("float32"))
    return layer


# The variants that together hold every modification, before and after the softmax: `make test`
# runs them on both backends; the others (each modification apart) are in the slow tier.
COVERING_VARIANTS = {"plain", "conv1d", "all_post", "all_pre_1d", "conv2d_pre_mta"}


def variant_params(names) -> list:
    slow_apart = (pytest.mark.tf_only, pytest.mark.slow)
    return [pytest.param(name, marks=() if name in COVERING_VARIANTS else slow_apart) for name in names]


@pytest.fixture(scope="module")
def inputs() -> np.ndarray:
    return np.random.default_rng(1).normal(size=(2, LENGTH, DIM)).astype("float32")


@pytest.mark.parametrize("name", variant_params(VARIANTS))
def test_one_token_at_a_time_equals_the_whole_sequence(name, inputs):
    layer = _layer(VARIANTS[name])
    whole = keras.ops.convert_to_numpy(layer(inputs, inputs, use_causal_mask=True))
    cache = layer.empty_cache(2, LENGTH)
    for i in range(LENGTH):
        token = inputs[:, i : i + 1]
        step, cache = layer(token, token, cache=cache, cache_update_index=i, use_causal_mask=True)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"pos {i}")


@pytest.mark.parametrize("name", ["plain", "all_post", "all_pre_1d"])
def test_a_prompt_at_once_then_steps(name, inputs):
    """KerasHub's generate: the prompt in one cached call at 0 (mask from the caller), then steps."""
    layer = _layer(VARIANTS[name])
    whole = keras.ops.convert_to_numpy(layer(inputs, inputs, use_causal_mask=True))
    prompt = 3
    cache = layer.empty_cache(2, LENGTH)
    head, cache = layer(inputs[:, :prompt], inputs[:, :prompt], cache=cache, cache_update_index=0, use_causal_mask=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(head), whole[:, :prompt], atol=1e-5)
    for i in range(prompt, LENGTH):
        token = inputs[:, i : i + 1]
        causal = np.arange(LENGTH)[None, None, :] <= i  # KerasHub's rectangular causal mask
        step, cache = layer(token, token, cache=cache, cache_update_index=keras.ops.convert_to_tensor(i),
                            attention_mask=np.broadcast_to(causal, (2, 1, LENGTH)))  # fmt: skip
        np.testing.assert_allclose(keras.ops.convert_to_numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"pos {i}")


@pytest.fixture(scope="module")
def encoder() -> tuple[np.ndarray, np.ndarray]:
    """An encoder's output and its padding (the first example's last key is a pad)."""
    padding = np.ones((2, ENCODER), bool)
    padding[0, -1] = False
    return np.random.default_rng(2).normal(size=(2, ENCODER, DIM)).astype("float32"), padding


@pytest.mark.parametrize("name", variant_params(["p_r", "all_post", "all_pre_1d", "conv2d_pre_mta"]))
def test_a_cross_attention_cache_equals_the_whole_cross_attention(name, inputs, encoder):
    """The decoder's queries at `query_position` (a tensor: as in a compiled generate), the
    encoder's keys written once and reused; a convolution's earlier queries in `query_cache`."""
    options = VARIANTS[name]
    layer = _layer({**options, "conv_causal": True} if options.get("attention_conv") else options)
    memory, padding = encoder
    whole = keras.ops.convert_to_numpy(layer(inputs, memory, value_mask=padding))
    cache, mask = layer.empty_cache(2, ENCODER, cross=True), padding[:, None, :]
    queries = empty_query_cache(layer, 2, LENGTH) if options.get("attention_conv") else None
    prompt = 2
    head, cache, *queries = layer(inputs[:, :prompt], memory, cache=cache, cache_update_index=0, query_position=0,
                                  query_cache=queries, attention_mask=mask)  # fmt: skip
    np.testing.assert_allclose(keras.ops.convert_to_numpy(head), whole[:, :prompt], atol=1e-5)
    for i in range(prompt, LENGTH):
        position, query_cache = keras.ops.convert_to_tensor(i), queries[0] if queries else None
        step, _, *queries = layer(inputs[:, i : i + 1], memory, cache=cache, query_position=position,
                                  query_cache=query_cache, attention_mask=mask)  # fmt: skip
        np.testing.assert_allclose(keras.ops.convert_to_numpy(step)[:, 0], whole[:, i], atol=1e-5, err_msg=f"pos {i}")


def test_the_cache_keeps_queries_only_for_a_convolution():
    assert cache_shape(_layer(VARIANTS["all_post"]), 2, 5) == (2, 3, 5, HEADS, DIM // HEADS)
    assert cache_shape(_layer(VARIANTS["p_r"]), 2, 5) == (2, 2, 5, HEADS, DIM // HEADS)
    assert cache_shape(_layer(VARIANTS["all_post"]), 2, 5, cross=True) == (2, 2, 5, HEADS, DIM // HEADS)


def test_bad_caches_are_refused_with_the_reason(inputs):
    layer = _layer(VARIANTS["conv2d_k4"])
    token = inputs[:, :1]
    with pytest.raises(ValueError, match=r"\(batch, 3, max_length, num_heads, key_dim\)"):
        layer(token, token, cache=np.zeros((2, 2, LENGTH, HEADS, 4), "float32"), cache_update_index=0)
    with pytest.raises(ValueError, match="needs a `cache`"):
        layer(token, token, cache_update_index=0)
    with pytest.raises(ValueError, match="query position"):
        layer(token, token, cache=layer.empty_cache(2, LENGTH))
    cross = layer.empty_cache(2, ENCODER, cross=True)
    with pytest.raises(ValueError, match="needs `query_cache`"):
        layer(token, inputs[:, :ENCODER], cache=cross, cache_update_index=0, query_position=0)
    with pytest.raises(ValueError, match="conv_causal=True"):
        layer(token, inputs[:, :ENCODER], cache=cross, cache_update_index=0, query_position=0,
              query_cache=empty_query_cache(layer, 2, LENGTH))  # fmt: skip
    positional = _layer(VARIANTS["p_r"])
    with pytest.raises(ValueError, match=f"max_len={LENGTH}"):
        positional(token, inputs[:, :ENCODER], cache=cross, cache_update_index=0, query_position=LENGTH)


@pytest.mark.parametrize("name", variant_params(["plain", "p_r", "all_post"]))
def test_a_call_past_the_caches_end_is_refused_eagerly_and_nan_when_traced(name, inputs):
    """Eagerly (a known index): a ValueError naming the cache's length and the index. Traced
    (the index a program's input: it cannot raise), every output of that call is NaN rather
    than the last slot written over in silence."""
    from convatt.inference.generation import compiled

    layer, token = _layer(VARIANTS[name]), inputs[:, :1]
    cache = layer.empty_cache(2, LENGTH)
    for index in (LENGTH, np.int32(LENGTH), keras.ops.convert_to_tensor(LENGTH, "int32")):
        with pytest.raises(ValueError, match=rf"cache_update_index={LENGTH} .* holds {LENGTH} positions"):
            layer(token, token, cache=cache, cache_update_index=index, use_causal_mask=True)
    step = compiled(lambda x, c, i: layer(x, x, cache=c, cache_update_index=i, use_causal_mask=True)[0])
    last = keras.ops.convert_to_numpy(step(token, cache, np.asarray(LENGTH - 1, "int32")))
    past = keras.ops.convert_to_numpy(step(token, cache, np.asarray(LENGTH, "int32")))
    assert np.isfinite(last).all() and np.isnan(past).all()
