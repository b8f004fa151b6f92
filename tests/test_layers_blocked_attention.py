"""The attention in blocks of queries (`query_block`) against the whole matrix: every row of the
modification table, causal and not, padded and not, outputs and gradients equal to float rounding."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from convatt.layers import MultiHeadAttention
from convatt.speed import blocked_bench
from tests.test_layers_modification_table import row_options as table_rows

B, T, D, H = 2, 11, 8, 2
BLOCK = 3  # T = 3 blocks of 3 and one of 2: halos cross every block boundary
CONV_AFTER = {"attention_conv": "2d", "conv_kernel_size": (3, 3)}
CONV_BEFORE = {"attention_conv": "1d", "conv_before_softmax": True, "conv_kernel_size": 4}


def row_options() -> list:
    """Each row alone and beside each convolution (whose halo rows then carry it), at length `T`."""
    return table_rows(T, CONV_AFTER, CONV_BEFORE)


def twins(options: dict) -> tuple[MultiHeadAttention, MultiHeadAttention]:
    """The whole-matrix layer and the blocked one, with the same weights (random, non-zero biases)."""
    whole = MultiHeadAttention(H, D // H, **options)
    blocked = MultiHeadAttention(H, D // H, query_block=BLOCK, **options)
    for layer in (whole, blocked):
        layer.build((B, T, D), (B, T, D))
    rng = np.random.default_rng(3)
    weights = [rng.normal(0, 0.5, w.shape).astype("float32") for w in whole.weights]
    whole.set_weights(weights)
    blocked.set_weights(weights)
    return whole, blocked


def padding() -> np.ndarray:
    """Entry 0 padded at the end, entry 1 at the start."""
    mask = np.ones((B, T), bool)
    mask[0, -3:] = False
    mask[1, :2] = False
    return mask


def outputs_and_gradients(layer, x: np.ndarray, kwargs: dict) -> list[np.ndarray]:
    """`[output, d loss / d x, d loss / d each weight]`, the loss a fixed random pattern times the output."""
    pattern = np.random.default_rng(4).uniform(-1, 1, (B, T, D)).astype("float32")
    if keras.backend.backend() == "jax":
        import jax

        def loss(trainable, inputs):
            out, _ = layer.stateless_call(trainable, [], inputs, inputs, **kwargs)
            return keras.ops.sum(out * pattern), out

        values = [v.value for v in layer.trainable_variables]
        (_, out), (d_weights, d_x) = jax.jit(jax.value_and_grad(loss, argnums=(0, 1), has_aux=True))(values, x)
        grads = [d_x, *d_weights]
    else:
        import tensorflow as tf

        inputs = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = layer(inputs, inputs, **kwargs)
            total = keras.ops.sum(out * pattern)
        grads = tape.gradient(total, [inputs, *layer.trainable_variables])
    return [keras.ops.convert_to_numpy(t) for t in (out, *grads)]


@pytest.fixture(scope="module")
def inputs() -> np.ndarray:
    return np.random.default_rng(1).normal(size=(B, T, D)).astype("float32")


MASKINGS = [  # (causal, padded); the quick tier: a padded bidirectional call and a causal one
    pytest.param(False, True, id="bidirectional-padded"),
    pytest.param(True, False, id="causal"),
    pytest.param(False, False, id="bidirectional", marks=pytest.mark.slow),
    pytest.param(True, True, id="causal-padded", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("causal", "padded"), MASKINGS)
@pytest.mark.parametrize("options", row_options())
def test_blocks_compute_the_whole_matrix_outputs_and_gradients(options, causal, padded, inputs):
    whole, blocked = twins(options)
    kwargs = {"use_causal_mask": causal}
    if padded:
        kwargs["query_mask"] = kwargs["value_mask"] = padding()
    expected = outputs_and_gradients(whole, inputs, kwargs)
    actual = outputs_and_gradients(blocked, inputs, kwargs)
    assert np.abs(expected[0]).max() > 0.1  # the outputs are not all bias
    for want, got in zip(expected, actual):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def attention_masks() -> list:
    """`(id, mask)`: a random mask (rows never empty), one per head, and a lower-triangular one made by
    hand (a centred convolution's later taps then closed: `AttentionContext.future_open`)."""
    rng = np.random.default_rng(5)
    random = rng.uniform(size=(B, T, T)) < 0.7
    random[:, :, 0] = True
    per_head = rng.uniform(size=(B, H, T, T)) < 0.7
    per_head[..., 1] = True
    lower = np.broadcast_to(np.tril(np.ones((T, T), bool)), (B, T, T)).copy()
    return [pytest.param(m, id=name) for name, m in (("random", random), ("per-head", per_head), ("lower", lower))]


@pytest.mark.parametrize("mask", attention_masks())
@pytest.mark.parametrize("conv", [CONV_AFTER, CONV_BEFORE], ids=["conv-after", "conv-before"])
def test_an_attention_mask_is_sliced_per_block(conv, mask, inputs):
    whole, blocked = twins({**conv, "relative_bias": True, "talking_heads": True, "max_len": T})
    kwargs = {"attention_mask": mask}
    if mask.ndim == 3:  # Keras' layer broadcasts a padding mask (b, 1, k) over a per-head mask's heads, not its batch
        kwargs["value_mask"] = padding()
    for want, got in zip(outputs_and_gradients(whole, inputs, kwargs), outputs_and_gradients(blocked, inputs, kwargs)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_no_output_reads_a_later_token_under_a_causal_mask(inputs):
    _, blocked = twins({**CONV_AFTER, "relative_position_representation": 2, "talking_heads": True})
    before = keras.ops.convert_to_numpy(blocked(inputs, inputs, use_causal_mask=True))
    for position in (2, 3, 7):  # inside a block, at a block's first row, inside the last full block
        changed = inputs.copy()
        changed[:, position] += 1.0
        after = keras.ops.convert_to_numpy(blocked(changed, changed, use_causal_mask=True))
        np.testing.assert_array_equal(after[:, :position], before[:, :position])
        assert np.abs(after[:, position] - before[:, position]).max() > 1e-3


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_pads_change_no_real_output(causal, inputs):
    _, blocked = twins({**CONV_AFTER, "alibi": True, "talking_heads": True})
    mask = padding()
    kwargs = {"query_mask": mask, "value_mask": mask, "use_causal_mask": causal}
    before = keras.ops.convert_to_numpy(blocked(inputs, inputs, **kwargs))
    changed = np.where(mask[..., None], inputs, 5.0 * np.random.default_rng(6).normal(size=inputs.shape))
    after = keras.ops.convert_to_numpy(blocked(changed.astype("float32"), changed.astype("float32"), **kwargs))
    np.testing.assert_array_equal(after[mask], before[mask])


def test_query_block_round_trips_and_the_cache_path_is_unaffected(inputs, tmp_path):
    whole, blocked = twins({**CONV_AFTER, "relative_bias": True, "max_len": T})
    assert blocked.get_config()["query_block"] == BLOCK
    model_input = keras.Input((T, D))
    model = keras.Model(model_input, blocked(model_input, model_input, use_causal_mask=True))
    model.save(tmp_path / "blocked.keras")
    loaded = keras.models.load_model(tmp_path / "blocked.keras")
    assert loaded.layers[-1].query_block == BLOCK
    np.testing.assert_allclose(loaded(inputs), model(inputs), rtol=1e-6, atol=1e-6)
    cache = blocked.empty_cache(B, T)
    for position in range(T):  # token by token: the cached rows, never blocks
        step, cache = blocked(inputs[:, position : position + 1], inputs[:, position : position + 1],
                              cache=cache, cache_update_index=position)  # fmt: skip
    expected = keras.ops.convert_to_numpy(whole(inputs, inputs, use_causal_mask=True))[:, -1:]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(step), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", [0, -2, 2.5, True, "64"])
def test_a_bad_query_block_is_refused_by_name(value):
    with pytest.raises(ValueError, match="query_block"):
        MultiHeadAttention(2, 4, attention_conv="2d", query_block=value)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the compiled step's memory analysis is JAX's")
@pytest.mark.slow  # XLA compiles three steps at 1,024 tokens
@pytest.mark.parametrize("case", ["conv2d", "mta"])
def test_blocks_plan_a_fraction_of_the_whole_matrix_temporaries(case):
    """Blocks of 64 of 1,024 queries: planned temporaries under half the whole matrix path's (about 0.4x)."""
    settings = blocked_bench.BlockedSettings(lengths=(1024,), cases=(case,), block=64, memory_limit=0)  # plans only
    (row,) = blocked_bench.run_blocked_benchmark(settings, measured=lambda row: None)
    assert row.seconds == {}
    assert row.temp_bytes["blocked"] < row.temp_bytes["whole"] / 2, row.temp_bytes
