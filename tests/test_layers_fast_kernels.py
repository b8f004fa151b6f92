"""The sublayers' fast kernels against their earlier keras.ops formulas (tests/layer_references.py):
same values and gradients, on the backend the tests run under (run them under both)."""

from dataclasses import replace

import keras
import layer_references as ref
import numpy as np
import pytest
from kernel_gradients import value_and_gradients

from convatt.layers import AttentionConv2D, RelativePositionRepresentation, talking_heads
from convatt.layers._utils import SUM_CHUNK, chunk_sums
from convatt.layers.attention_conv2d import convolve_heads
from convatt.layers.forms import drop_in_forms
from convatt.layers.relative_position_representation import spread_by_distance, sum_by_distance
from convatt.layers.talking_heads import mix_heads

ATOL = 2e-5


def _close(new: list[np.ndarray], old: list[np.ndarray]) -> None:
    for a, b in zip(new, old, strict=True):
        np.testing.assert_allclose(a, b, atol=ATOL * max(1.0, np.abs(b).max()), rtol=1e-4)


@pytest.mark.parametrize("kernel_size", [(3, 3), (5, 5), (2, 9)])
@pytest.mark.parametrize("causal, future_open", [(False, None), (True, None), (False, (1.0, 0.0))])
@pytest.mark.parametrize("form", ["convolved", "row_summed", "tapped"])
def test_conv2d_stencil_equals_the_depthwise_convolution(kernel_size, causal, future_open, form):
    """Every form of the kernel's gradient (a depthwise convolution on a CPU under JAX, sums along
    the key axis under TensorFlow, a sum per tap on a GPU or TPU) is checked here, on the CPU."""

    def forms():  # resolved when traced, as a layer's
        return replace(drop_in_forms(), conv2d="stencil", conv2d_kernel_gradient=form)

    activation = None if kernel_size == (2, 9) else "relu"  # before the softmax (MTA) / after it (the paper)
    rng = np.random.default_rng(sum(kernel_size))
    heads, q, k = 3, 7, 11
    layer = AttentionConv2D(heads, kernel_size=kernel_size, activation=activation)
    layer.build((None, heads, q, k))
    kernel = rng.normal(size=(heads, *kernel_size))
    bias = rng.normal(size=heads)
    attention = rng.uniform(-1, 1, size=(2, heads, q, k))
    opens = None if future_open is None else np.reshape(future_open, (2, 1, 1, 1)).astype("float32")
    act = keras.activations.get(activation)

    def new(attention, kernel, bias):
        return convolve_heads(attention, kernel, bias, layer.activation, causal, opens, forms())

    def old(attention, kernel, bias):
        return ref.conv2d_depthwise(attention, kernel, bias, causal, opens, activation=act)

    _close(value_and_gradients(new, attention, kernel, bias), value_and_gradients(old, attention, kernel, bias))
    layer.set_weights([kernel.astype("float32"), bias.astype("float32")])  # the layer's own call: the same
    by_layer = layer.convolve_float32(attention.astype("float32"), causal=causal, future_open=opens, forms=forms())
    _close([keras.ops.convert_to_numpy(by_layer)], value_and_gradients(old, attention, kernel, bias)[:1])


@pytest.mark.parametrize("causal", [False, True])
def test_row_summed_kernel_gradient_over_keys_longer_than_a_chunk(causal):
    """TensorFlow's form sums the key axis in chunks of `SUM_CHUNK` (45 keys: a chunk and a
    padded one)."""
    rng = np.random.default_rng(3)
    attention, kernel, bias = rng.uniform(-1, 1, size=(2, 2, 6, 45)), rng.normal(size=(2, 2, 9)), rng.normal(size=2)
    layer = AttentionConv2D(2, kernel_size=(2, 9), activation=None)
    layer.build((None, 2, 6, 45))

    def new(attention, kernel, bias):
        forms = replace(drop_in_forms(), conv2d_kernel_gradient="row_summed")  # chunked under XLA
        return convolve_heads(attention, kernel, bias, layer.activation, causal, None, forms)

    def old(attention, kernel, bias):
        return ref.conv2d_depthwise(attention, kernel, bias, causal, None, activation=None)

    for xla in (False, True):
        _close(
            value_and_gradients(new, attention, kernel, bias, xla=xla),
            value_and_gradients(old, attention, kernel, bias),
        )


# (q, k, clip): cross-attention both ways, a cached step's query of 1, lengths 1, clip 0, clip >= the lengths
# and keys longer than a chunk of the far sums (`chunk_sums`)
SHAW_SHAPES = [
    (5, 9, 3),
    (9, 4, 1),
    (4, 4, 7),
    (3, 3, 0),
    (1, 6, 2),
    (1, 1, 1),
    (2, 9, 5),
    (7, 3, 2),
    (6, 6, 2),
    (4, 45, 3),
]


@pytest.mark.parametrize("q, k, clip", SHAW_SHAPES)
@pytest.mark.parametrize("xla", [False, True], ids=["as-run", "xla"])
def test_shaw_terms_equal_the_gathered_tables(q, k, clip, xla):
    """The skews where they run (JAX; TensorFlow under XLA, `xla`), else the gathered tables."""
    if xla and keras.backend.backend() == "jax":
        pytest.skip("JAX compiles with XLA either way")
    rng = np.random.default_rng(q * 100 + k * 10 + clip)
    b, h, d = 2, 3, 4
    layer = RelativePositionRepresentation(clip, d)
    layer.build()
    tables = [t.astype("float32") for t in rng.normal(size=(2, 2 * clip + 1, d))]
    layer.set_weights(tables)
    key_table, value_table = (keras.ops.convert_to_tensor(t) for t in tables)
    scores, query = rng.normal(size=(b, h, q, k)), rng.normal(size=(b, q, h, d))
    attention = rng.uniform(size=(b, h, q, k))
    _close(
        value_and_gradients(layer.add_float32, scores, query, xla=xla),
        value_and_gradients(lambda s, x: ref.shaw_key_term_gathered(s, x, key_table, clip), scores, query),
    )
    _close(
        value_and_gradients(layer.value_term, attention, xla=xla),
        value_and_gradients(lambda a: ref.shaw_value_term_gathered(a, value_table, clip), attention),
    )


@pytest.mark.parametrize("q, k, clip", SHAW_SHAPES)
@pytest.mark.parametrize("accelerator", [False, True], ids=["cpu-gradient", "accelerator-gradient"])
def test_distance_spreads_and_sums_equal_gathers(q, k, clip, accelerator):
    """The two linear maps that also carry the tables' gradients (on a CPU each is the other's
    transpose as its custom gradient; on a GPU or TPU autodiff's): both forms, on the CPU."""
    forms = replace(drop_in_forms(), shaw_gradient="autodiff" if accelerator else "transposed", chunked_sums=False)
    rng = np.random.default_rng(q * 100 + k * 10 + clip)
    indices = ref.shaw_clipped_distances(q, k, clip)
    one_hot = keras.ops.convert_to_tensor(np.eye(2 * clip + 1, dtype="float32")[indices])  # (q, k, 2 clip + 1)
    per_distance, weights = rng.normal(size=(2, 3, q, 2 * clip + 1)), rng.normal(size=(2, 3, q, k))
    _close(
        value_and_gradients(lambda x: spread_by_distance(x, q, k, clip, forms), per_distance),
        value_and_gradients(lambda x: keras.ops.einsum("bhqr,qkr->bhqk", x, one_hot), per_distance),
    )
    _close(
        value_and_gradients(lambda x: sum_by_distance(x, clip, forms), weights),
        value_and_gradients(lambda x: keras.ops.einsum("bhqk,qkr->bhqr", x, one_hot), weights),
    )


@pytest.mark.parametrize("chunk", [None, 7], ids=["whole", "chunks-of-7"])
@pytest.mark.parametrize("xla", [False, True], ids=["as-run", "xla"])
def test_talking_heads_mixing_equals_the_einsum(xla, chunk, monkeypatch):
    """The kernel's gradient per example, in chunks of (query, key) pairs that do not divide 30."""
    if chunk is not None:
        monkeypatch.setattr(talking_heads, "KERNEL_GRADIENT_CHUNK", chunk)
    rng = np.random.default_rng(7)
    maps, kernel = rng.normal(size=(2, 3, 5, 6)), rng.normal(size=(3, 3))
    _close(
        value_and_gradients(
            lambda m, w: mix_heads(m, w, drop_in_forms().talking_heads_gradient), maps, kernel, xla=xla
        ),
        value_and_gradients(lambda m, w: keras.ops.einsum("bhqk,hg->bgqk", m, w), maps, kernel),
    )


def _mixing_gradient() -> str:
    """The talking heads' kernel gradient of the drop-in's forms, resolved when traced."""
    return drop_in_forms().talking_heads_gradient


def test_talking_heads_mixing_with_the_batch_size_unknown_when_traced():
    """TensorFlow's per-example kernel gradient (with XLA) needs the batch size; unknown, autodiff's."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("JAX traces every shape")
    import tensorflow as tf

    rng = np.random.default_rng(8)
    maps, kernel = rng.normal(size=(2, 3, 5, 6)).astype("float32"), rng.normal(size=(3, 3)).astype("float32")

    @tf.function(input_signature=[tf.TensorSpec((None, 3, 5, 6)), tf.TensorSpec((3, 3))], jit_compile=True)
    def step(maps, kernel):
        with tf.GradientTape() as tape:
            tape.watch([maps, kernel])
            mixed = mix_heads(maps, kernel, _mixing_gradient())
            total = tf.reduce_sum(mixed * tf.range(6, dtype="float32"))
        return tape.gradient(total, [maps, kernel])

    weight = np.broadcast_to(np.arange(6, dtype="float32"), maps.shape)  # d total / d mixed
    expected = [np.einsum("bgqk,hg->bhqk", weight, kernel), np.einsum("bhqk,bgqk->hg", maps, weight)]
    _close([t.numpy() for t in step(tf.constant(maps), tf.constant(kernel))], expected)


@pytest.mark.parametrize("length", [1, 32, 33, 96, 100])
def test_chunk_sums_add_up_to_the_sum_of_the_last_axis(length):
    x = np.random.default_rng(length).normal(size=(2, 3, length))
    chunks = value_and_gradients(lambda x: chunk_sums(x, drop_in_forms().chunked_sums), x, xla=True)[0]  # under XLA
    assert chunks.shape == (2, 3, -(-length // SUM_CHUNK) if length > SUM_CHUNK else 1)
    np.testing.assert_allclose(chunks.sum(-1), x.sum(-1), rtol=1e-5, atol=1e-5)
    if length > SUM_CHUNK:
        np.testing.assert_allclose(chunks[..., 0], x[..., :SUM_CHUNK].sum(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        {"relative_position_representation": 3},
        {"attention_conv": "2d"},
        {"attention_conv": "2d", "conv_kernel_size": (2, 9), "conv_before_softmax": True},
        {"position_interaction": True},
        {"talking_heads": True},
    ],
    ids=["shaw", "conv2d", "mta", "p", "talking-heads"],
)
def test_the_layer_under_tensorflows_xla_computes_what_it_computes_without(options):
    """TensorFlow's `jit_compile=True` takes other forms (Shaw's skews): the same outputs and
    weight gradients as TensorFlow's graph without XLA, to float tolerance."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's choice between its two compilations")
    import tensorflow as tf

    from convatt.layers import MultiHeadAttention

    layer = MultiHeadAttention(num_heads=2, key_dim=4, max_len=9, **options)
    x = tf.constant(np.random.default_rng(5).normal(size=(2, 9, 8)).astype("float32"))
    layer(x, x, use_causal_mask=True)

    def step(x):
        with tf.GradientTape() as tape:
            out = layer(x, x, use_causal_mask=True)
            total = tf.reduce_sum(out * _pattern_like(out))
        return [out, *tape.gradient(total, layer.trainable_variables)]

    with_xla, without = (tf.function(step, jit_compile=jit)(x) for jit in (True, False))  # gathered: sparse gradients
    _close([tf.convert_to_tensor(t).numpy() for t in with_xla], [tf.convert_to_tensor(t).numpy() for t in without])


def _pattern_like(out):
    return keras.ops.convert_to_tensor(np.random.default_rng(9).uniform(-1, 1, size=tuple(out.shape)).astype("float32"))
