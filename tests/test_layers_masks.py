"""No padding reaches a real output of convatt.layers.MultiHeadAttention, by perturbation.

For every modification alone and a few combined, every way a mask reaches the layer
(the inputs' Keras masks; query_mask / value_mask / key_mask; a rank-3 or rank-4
attention_mask that masks keys only), left and right padding, self- and cross-attention,
with and without use_causal_mask: the padded tokens' content is changed and the real
positions' outputs must stay as they were. `make test` runs the cases that together hold every
modification (JAX_CASES of tests/test_layers_multi_head_attention.py); the slow tier each alone.
KerasHub's padding_mask through convatt.layers.keras_hub_blocks's blocks in
tests/test_layers_keras_hub.py."""

from __future__ import annotations

import itertools
import warnings

import keras
import numpy as np
import pytest
from layer_harness import randomize
from test_layers_multi_head_attention import EVERY, matrix_case_param, switch_convolutions_on

from convatt.layers import MultiHeadAttention

B, T, S, D, H, K = 2, 9, 7, 8, 2, 4  # query length T, memory (cross-attention keys) length S
PADS = (3, 1)  # padded tokens of the two sequences of a batch
CASES = [matrix_case_param(name) for name in ("none", *EVERY) if name not in ("R-circulant", "Conv2d-2x9")]


def real_tokens(length: int, side: str) -> np.ndarray:
    """(B, length) booleans, False on each sequence's PADS padded positions."""
    positions = np.arange(length)[None, :]
    pads = np.array(PADS)[:, None]
    return positions >= pads if side == "left" else positions < length - pads


def with_pads_changed(x: np.ndarray, real: np.ndarray, seed: int = 7) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(size=x.shape).astype("float32") * 3.0
    return np.where(real[..., None], x, x + noise)


def data(seed: int, length: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(B, length, D)).astype("float32")


def layer_for(case: str) -> MultiHeadAttention:
    options = {} if case == "none" else EVERY[case]
    layer = MultiHeadAttention(H, K, **{**options, **({"max_len": T} if "max_len" in options else {})})
    layer(data(0, T), data(1, S))
    randomize(layer, 3)
    switch_convolutions_on(layer)
    return layer


# A mask form: (query_real, key_real, self) -> (call kwargs, whether it tells the query pads).
def _keys_rank3(q, k):
    return {"attention_mask": np.broadcast_to(k[:, None, :], (B, q.shape[1], k.shape[1]))}


def _keys_rank4(q, k):
    return {"attention_mask": np.broadcast_to(k[:, None, None, :], (B, H, q.shape[1], k.shape[1]))}


FORMS = {
    "query_mask and value_mask": (lambda q, k: {"query_mask": q, "value_mask": k}, True),
    "value_mask": (lambda q, k: {"value_mask": k}, False),
    "key_mask": (lambda q, k: {"key_mask": k}, False),
    "rank-3 attention_mask on keys": (_keys_rank3, False),
    "rank-4 attention_mask on keys": (_keys_rank4, False),
}


def leaks(layer, form: str, side: str, cross: bool, causal: bool) -> float:
    """The largest change of a real output when only the padded tokens change."""
    make_kwargs, tells_query_pads = FORMS[form]
    query = data(4, T)
    memory = data(5, S) if cross else query
    query_real = real_tokens(T, side) if (tells_query_pads or not cross) else np.ones((B, T), bool)
    key_real = real_tokens(S if cross else T, side)
    kwargs = make_kwargs(query_real, key_real)

    def run(q, m):
        value = m if cross else q  # self-attention: the very same tensor
        key = {"key": value} if form == "key_mask" else {}
        return keras.ops.convert_to_numpy(layer(q, value, use_causal_mask=causal, **key, **kwargs))

    before = run(query, memory)
    after = run(with_pads_changed(query, query_real), with_pads_changed(memory, key_real, seed=8))
    return float(np.abs(after - before)[query_real & rows_with_a_key(key_real, T, causal)].max())


def rows_with_a_key(key_real: np.ndarray, query_len: int, causal: bool) -> np.ndarray:
    """(B, query_len): the query rows with a key to attend (a row with none is a pad too)."""
    open_pairs = np.broadcast_to(key_real[:, None, :], (B, query_len, key_real.shape[1]))
    if causal:
        open_pairs = open_pairs & np.tril(np.ones((query_len, key_real.shape[1]), bool))
    return open_pairs.any(-1)


@pytest.mark.parametrize("case", CASES)
def test_padding_reaches_no_real_output(case):
    layer = layer_for(case)
    found = []
    for form, side, cross, causal in itertools.product(FORMS, ("left", "right"), (False, True), (False, True)):
        change = leaks(layer, form, side, cross, causal)
        if change > 1e-5:
            found.append(f"{form}, {side} padding, {'cross' if cross else 'self'}, causal={causal}: {change:.3g}")
    assert not found, "padding leaked:\n" + "\n".join(found)


def token_ids(real: np.ndarray, seed: int) -> np.ndarray:
    """Random ids 1..9 at real positions, 0 (the masked embedding's padding) at the others."""
    return np.where(real, np.random.default_rng(seed).integers(1, 10, size=real.shape), 0)


@pytest.mark.parametrize("case", CASES)
def test_padding_given_as_the_inputs_keras_masks_reaches_no_real_output(case):
    """Embedding(mask_zero=True) gives the masks; the padding's content is its embedding of 0."""
    layer = layer_for(case)
    embed = [keras.layers.Embedding(10, D, mask_zero=True) for _ in range(2)]
    q_ids, m_ids = keras.Input((T,), dtype="int32"), keras.Input((S,), dtype="int32")
    outputs = []
    for cross, causal in itertools.product((False, True), (False, True)):
        x = embed[0](q_ids)  # a tensor per call: Keras' call takes the masks off its inputs
        outputs.append(layer(x, embed[1](m_ids) if cross else x, use_causal_mask=causal))
    model = keras.Model([q_ids, m_ids], outputs)
    for side in ("left", "right"):
        q_mask, m_mask = real_tokens(T, side), real_tokens(S, side)
        ids = [token_ids(q_mask, 1), token_ids(m_mask, 2)]
        before = model(ids)
        padding_changed = np.zeros((10, D), "float32")
        padding_changed[0] = np.random.default_rng(3).normal(size=D) * 3.0
        for table in embed:
            table.embeddings.assign(keras.ops.convert_to_numpy(table.embeddings) + padding_changed)
        after = model(ids)  # only the padding's vector (row 0) changed
        rows = [q_mask, q_mask & rows_with_a_key(q_mask, T, True)]
        rows += [q_mask & rows_with_a_key(m_mask, T, False), q_mask & rows_with_a_key(m_mask, T, True)]
        for got, want, real in zip(after, before, rows):
            change = np.abs(keras.ops.convert_to_numpy(got) - keras.ops.convert_to_numpy(want))[real].max()
            assert change < 1e-5, f"{side} padding leaked: {change}"


@pytest.mark.parametrize("case", ["Conv2d", "MTA-kq"])
def test_in_cross_attention_unmarked_query_pads_are_read_by_the_convolutions(case):
    """The test can fail, and what cross-attention needs: query pads told by no mask (a key
    mask only, the query not the value tensor) reach their neighbours through the convolution."""
    layer = layer_for(case)
    query, real = data(4, T), real_tokens(T, "right")
    mask = {"attention_mask": np.broadcast_to(real[:, None, :], (B, T, T))}
    before = keras.ops.convert_to_numpy(layer(query, query.copy(), **mask))
    changed = with_pads_changed(query, real)
    after = keras.ops.convert_to_numpy(layer(changed, changed.copy(), **mask))
    assert np.abs(after - before)[real].max() > 1e-3


@pytest.mark.parametrize("case", CASES)
def test_a_rank_2_attention_mask_is_keras_one_mask_for_the_whole_batch(case):
    """Keras broadcasts an `attention_mask` (query, key) over the batch: the same as it tiled."""
    layer, x = layer_for(case), data(4, T)
    mask = np.tril(np.ones((T, T), bool)) & (np.arange(T) < T - 2)[None, :]
    once = keras.ops.convert_to_numpy(layer(x, x, attention_mask=mask))
    tiled = keras.ops.convert_to_numpy(layer(x, x, attention_mask=np.broadcast_to(mask, (B, T, T))))
    np.testing.assert_allclose(once, tiled, atol=1e-6)  # one program, masks broadcast two ways
    with pytest.raises(ValueError, match=r"\(batch, key_len\) pass value_mask"):
        layer(x, x, attention_mask=np.ones((B, T), bool))


@pytest.mark.parametrize("case", ["Conv2d", "MTA-kq"])
def test_equal_but_distinct_query_and_value_with_key_padding_warn_and_query_mask_closes_the_leak(case):
    """Self-attention is `self_attention=True` or the query and the value one tensor; an equal copy
    is not, so with key padding only the queries' pads are unknown: the layer says so, and a
    query_mask or `self_attention=True` closes it."""
    layer, real = layer_for(case), real_tokens(T, "right")
    x = data(4, T)
    with pytest.warns(UserWarning, match="Pass query_mask="):
        layer(x, x.copy(), value_mask=real)

    def run(q):
        return keras.ops.convert_to_numpy(layer(q, q.copy(), value_mask=real, query_mask=real))

    change = np.abs(run(with_pads_changed(x, real)) - run(x))[real].max()
    assert change < 1e-5, change

    def said(q):  # an explicit self_attention=True: the padded keys' queries are pads too
        return keras.ops.convert_to_numpy(layer(q, q.copy(), value_mask=real, self_attention=True))

    change = np.abs(said(with_pads_changed(x, real)) - said(x))[real].max()
    assert change < 1e-5, change
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(x, x.copy(), value_mask=real, query_mask=real)
        layer(x, x, value_mask=real)  # one tensor: self-attention
        layer(x, x.copy(), value_mask=real, self_attention=True)
