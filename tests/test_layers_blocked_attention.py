"""The attention in blocks of queries (`query_block`) against the whole matrix: every row of the
modification table, causal and not, padded and not, outputs and gradients equal to float rounding."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from test_layers_modification_table import row_options as table_rows

from convatt.layers import MultiHeadAttention
from convatt.layers.core import blocked_attention
from convatt.layers.core.blocked_attention import block_size, position_dropout
from convatt.speed import blocked_bench

B, T, D, H = 2, 11, 8, 2
BLOCK = 3  # T = 3 blocks of 3 and one of 2: halos cross every block boundary
CONV_AFTER = {"attention_conv": "2d", "conv_kernel_size": (3, 3)}
CONV_BEFORE = {"attention_conv": "1d", "conv_before_softmax": True, "conv_kernel_size": 4}


def row_options() -> list:
    """Each row alone and beside each convolution (whose halo rows then carry it), at length `T`."""
    return table_rows(T, CONV_AFTER, CONV_BEFORE)


def twins(options: dict, blocks: tuple = (None, BLOCK)) -> tuple[MultiHeadAttention, MultiHeadAttention]:
    """The whole-matrix layer and the blocked one (or layers of any two `blocks`), with the same
    weights (random, non-zero biases)."""
    whole, blocked = (MultiHeadAttention(H, D // H, query_block=block, **options) for block in blocks)
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

        others = [v.value for v in layer.non_trainable_variables]  # a dropout's seed

        def loss(trainable, inputs):
            out, _ = layer.stateless_call(trainable, others, inputs, inputs, **kwargs)
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


MASKINGS = [  # (causal, padded); the quick tier: a padded bidirectional call (causal calls: the tests below)
    pytest.param(False, True, id="bidirectional-padded"),
    pytest.param(True, False, id="causal", marks=pytest.mark.slow),
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


@pytest.mark.parametrize("causal", [pytest.param(False, marks=pytest.mark.slow), True], ids=["bidirectional", "causal"])
def test_dropout_drops_the_same_entries_whatever_the_blocks(causal, inputs):
    """Blocks of 3 and of 5 queries, one seed: the same outputs and gradients (each block's
    recomputation in the backward pass drops what its forward pass dropped), not the undropped ones."""
    options = {**CONV_AFTER, "relative_position_representation": 2, "dropout": 0.5, "seed": 7}
    threes, fives = twins(options, blocks=(BLOCK, 5))
    kwargs = {"use_causal_mask": causal, "training": True}
    dropped = outputs_and_gradients(threes, inputs, kwargs)
    for want, got in zip(dropped, outputs_and_gradients(fives, inputs, kwargs)):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)  # 1e-5 of weights doubled by the dropout
    undropped = outputs_and_gradients(threes, inputs, {"use_causal_mask": causal, "training": False})
    assert np.abs(dropped[0] - undropped[0]).max() > 0.1


def test_position_dropout_drops_at_its_rate_per_entry():
    weights = keras.ops.ones((2, 3, 64, 48))
    rows = keras.ops.arange(64, dtype="int32")
    dropped = keras.ops.convert_to_numpy(position_dropout(weights, 0.3, keras.ops.convert_to_tensor(5), rows))
    assert abs((dropped == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(dropped[dropped > 0], 1 / 0.7, rtol=1e-6)
    kept = dropped > 0
    assert (kept[0, 0] != kept[0, 1]).mean() > 0.3 and (kept[0, 0] != kept[1, 0]).mean() > 0.3  # heads, batch
    assert (kept[0, 0, :, :-1] != kept[0, 0, :, 1:]).mean() > 0.3  # neighbouring keys
    other_seed = keras.ops.convert_to_numpy(position_dropout(weights, 0.3, keras.ops.convert_to_tensor(6), rows))
    assert (kept != (other_seed > 0)).mean() > 0.3
    some_rows = position_dropout(weights[:, :, 10:20], 0.3, keras.ops.convert_to_tensor(5), rows[10:20])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(some_rows), dropped[:, :, 10:20])


def test_auto_blocks_only_past_a_quarter_gib_of_matrix_per_example():
    assert block_size("auto", 4, 4096, 4096) is None  # 256 MiB: the whole matrix
    assert block_size("auto", 4, 4097, 4096) == 1024  # a block's matrix at most 64 MiB
    assert block_size("auto", 4, 32768, 32768) == 128
    assert block_size("auto", 64, 65536, 65536) == 16  # never fewer queries than 16
    assert (
        block_size(3, 2, 11, 11) == 3
        and block_size(256, 2, 100, 100) is None
        and block_size(None, 2, 10**6, 10**6) is None
    )


def test_auto_is_the_default_and_computes_in_blocks_past_its_threshold(inputs, monkeypatch):
    length = 40
    x = np.random.default_rng(8).normal(size=(B, length, D)).astype("float32")
    whole, auto = twins({**CONV_AFTER, "alibi": True}, blocks=(None, "auto"))
    assert MultiHeadAttention(H, D // H, attention_conv="2d").query_block == "auto"
    calls = []
    original = blocked_attention.blocked_attention

    def spy(layer, query, key, value, call, *args, **kwargs):
        calls.append(call.block_size)
        return original(layer, query, key, value, call, *args, **kwargs)

    monkeypatch.setattr("convatt.layers.core.multi_head_attention.blocked_attention", spy)
    expected = keras.ops.convert_to_numpy(whole(x, x, use_causal_mask=True))
    keras.ops.convert_to_numpy(auto(x, x, use_causal_mask=True))
    assert calls == []  # 40 x 40 floats: the whole matrix
    monkeypatch.setattr(blocked_attention, "AUTO_ABOVE_BYTES", 0)
    monkeypatch.setattr(blocked_attention, "AUTO_BLOCK_BYTES", 16 * 4 * H * length)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(auto(x, x, use_causal_mask=True)), expected, rtol=1e-5, atol=1e-5
    )
    assert calls == [16]


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_a_model_in_blocks_trains_as_on_the_whole_matrix(jit_compile, inputs):
    """`fit`'s compiled step (TensorFlow's graph and XLA; JAX's jit): the same weights after
    three steps of SGD, blocks of 3 against the whole matrix."""
    if keras.backend.backend() == "jax" and not jit_compile:
        pytest.skip("JAX always compiles with XLA")
    models = []
    for block in (None, BLOCK):
        x = keras.Input((T, D))
        layer = MultiHeadAttention(H, D // H, query_block=block, **CONV_AFTER, relative_bias=True, max_len=T)
        models.append(keras.Model(x, layer(x, x, use_causal_mask=True)))
    models[1].set_weights(models[0].get_weights())
    initial = models[0].get_weights()
    target = np.random.default_rng(9).normal(size=(B, T, D)).astype("float32")
    for model in models:
        model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=jit_compile)
        for _ in range(3):
            model.train_on_batch(inputs, target)
    for want, got in zip(*(m.get_weights() for m in models)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert max(np.abs(a - b).max() for a, b in zip(initial, models[0].get_weights())) > 1e-3  # it trained


CRASHED_JAXLIB = """
import keras, numpy as np
from convatt.layers import MultiHeadAttention
from convatt.speed.attention_bench import _layer_step

mta = dict(attention_conv="2d", conv_before_softmax=True, conv_kernel_size=(2, 9))
layer = MultiHeadAttention(4, 32, **mta, query_block=128)
x = keras.ops.convert_to_tensor(np.random.default_rng(0).normal(size=(2, 1000, 128)).astype("float32"))
_layer_step(layer, x, causal=False).run()
print("gradient done")
"""


@pytest.mark.slow  # about a minute of compilation and a 1,000-token gradient
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the crash was XLA's CPU dot under JAX")
def test_the_gradient_of_blocked_mta_at_1000_tokens_does_not_crash_the_process():
    """jaxlib 0.10.2's CPU dot (YNNPACK) ended this process with SIGSEGV (1,024 tokens or the whole
    matrix did not); setup.cfg excludes that jaxlib. A process of its own, so a crash fails the test
    instead of ending pytest's."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", CRASHED_JAXLIB], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "gradient done" in done.stdout, (done.returncode, done.stderr[-2000:])
