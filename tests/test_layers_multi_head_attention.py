"""convatt.layers.MultiHeadAttention: Keras' layer when unmodified; causal, cross-attention
and any length with every modification; the convolutions against loop references.

Causality and lengths are tested by perturbing inputs: a later token changed must leave
every earlier output as it was (and change the later ones, so the test can fail)."""

from __future__ import annotations

from pathlib import Path

import keras
import layer_references as ref
import numpy as np
import pytest
from helpers import skip_where_keras_is_older_than_the_saver
from layer_harness import randomize, run_layer_test, to_numpy

from convatt.layers import AttentionConv1D, AttentionConv2D, MultiHeadAttention, SelfAttention
from convatt.layers import _keras_compat as keras_compat

B, T, D, H, K = 2, 12, 8, 2, 4
DATA = Path(__file__).parent / "data"
LATER = 7  # the token changed by the leak tests

ALONE = {
    "P": dict(position_interaction=True, max_len=T),
    "R": dict(relative_bias=True, max_len=T),
    "R-circulant": dict(relative_bias=True, relative_bias_parameterization="circulant", max_len=T),
    "Temp": dict(temperature=True),
    "Shaw": dict(relative_position_representation=3),
    "ALiBi": dict(alibi=True),
    "Conv": dict(attention_conv="1d", max_len=T),
    "Conv2d": dict(attention_conv="2d"),
    "Conv-pre": dict(attention_conv="1d", max_len=T, conv_before_softmax=True),
    "Conv2d-pre": dict(attention_conv="2d", conv_before_softmax=True),
    "MTA-kq": dict(attention_conv="2d", conv_before_softmax=True, conv_kernel_size=(2, 9)),
    "Conv2d-2x9": dict(attention_conv="2d", conv_kernel_size=(2, 9)),  # MTA's kernel after the softmax
    "Talking": dict(talking_heads=True),
}
COMBINED = {
    "P+R": {**ALONE["P"], **ALONE["R"]},
    "P+R+Temp+Conv2d": {**ALONE["P"], **ALONE["R"], **ALONE["Temp"], **ALONE["Conv2d"]},
    "Conv+Shaw": {**ALONE["Conv"], **ALONE["Shaw"]},
    "Conv2d+Talking": {**ALONE["Conv2d"], **ALONE["Talking"]},
    "MTA-kq+Talking+ALiBi": {**ALONE["MTA-kq"], **ALONE["Talking"], **ALONE["ALiBi"]},
    "Conv2d-pre+Temp+R": {**ALONE["Conv2d-pre"], **ALONE["Temp"], **ALONE["R"]},
}
EVERY = {**ALONE, **COMBINED}
# The cases the leak and mask tests also run under JAX (`make test` deselects tf_only there):
# every modification is in one of them (Shaw alone too: its skews take the lengths under JAX);
# each alone and every combination run under TensorFlow.
JAX_CASES = {
    "none",
    "R-circulant",
    "Shaw",
    "Conv-pre",
    "P+R+Temp+Conv2d",
    "Conv+Shaw",
    "MTA-kq+Talking+ALiBi",
    "Conv2d-pre+Temp+R",
}


def case_param(name: str, *values) -> object:
    """`pytest.param(name, *values)`, marked tf_only unless `name` is in JAX_CASES."""
    return pytest.param(name, *values, marks=() if name in JAX_CASES else pytest.mark.tf_only)


def matrix_case_param(name: str, *values) -> object:
    """`case_param` for a test that runs a whole matrix per case (every mask form, side, ...):
    unless `name` is in JAX_CASES, which together hold every modification, marked slow too:
    `make test` runs the covering cases on both backends, `make test-all` each case alone too."""
    if name in JAX_CASES:
        return pytest.param(name, *values)
    return pytest.param(name, *values, marks=(pytest.mark.tf_only, pytest.mark.slow))


CAUSAL_CALLS = {
    "use_causal_mask": lambda layer, x: layer(x, x, use_causal_mask=True),
    "lower-triangular attention_mask": lambda layer, x: layer(
        x, x, attention_mask=np.tril(np.ones((len(x), x.shape[1], x.shape[1]), bool))
    ),
    "causal and padded keys": lambda layer, x: layer(
        x, x, attention_mask=np.tril(np.ones((len(x), x.shape[1], x.shape[1]), bool)) & KEYS_REAL[:, None, :]
    ),
    "conv_causal and a causal mask": lambda layer, x: layer(x, x, use_causal_mask=True),
}
KEYS_REAL = np.arange(T)[None, :] < np.array([[T], [T - 2]])  # the second sequence has two padded keys


def inputs(seed=0, length=T, batch=B):
    return np.random.default_rng(seed).normal(size=(batch, length, D)).astype("float32")


def built(options, seed=0, length=T, **kwargs):
    layer = MultiHeadAttention(H, K, **options, **kwargs)
    layer(inputs(length=length), inputs(length=length))
    randomize(layer, seed)
    switch_convolutions_on(layer)
    return layer


def switch_convolutions_on(model_or_layer):
    """A random negative bias can make a ReLU'd convolution 0 everywhere (then no test can fail):
    the convolutions' biases a little above 0."""
    layers = model_or_layer._flatten_layers() if hasattr(model_or_layer, "_flatten_layers") else [model_or_layer]
    for layer in layers:
        if isinstance(layer, (AttentionConv1D, AttentionConv2D)):
            layer.bias.assign(np.full(layer.bias.shape, 0.1, "float32"))


def changed_at(x, position):
    perturbed = x.copy()
    perturbed[:, position] += np.random.default_rng(9).normal(size=perturbed[:, position].shape) * 2.0
    return perturbed


LEAK_CASES = [
    case_param(name, call)
    for name in EVERY
    for call in CAUSAL_CALLS
    if not call.startswith("conv_causal") or "attention_conv" in EVERY[name]  # conv_causal needs a convolution
]


@pytest.mark.parametrize("name, call", LEAK_CASES)
def test_no_output_depends_on_a_later_token(name, call):
    extra = {"conv_causal": True} if call.startswith("conv_causal") else {}
    layer = built(EVERY[name], **extra)
    x = inputs()
    before = keras.ops.convert_to_numpy(CAUSAL_CALLS[call](layer, x))
    after = keras.ops.convert_to_numpy(CAUSAL_CALLS[call](layer, changed_at(x, LATER)))
    np.testing.assert_allclose(after[:, :LATER], before[:, :LATER], atol=1e-6, err_msg="a later token leaked")
    assert np.abs(after[:, LATER:] - before[:, LATER:]).max() > 1e-3  # the change does reach the later outputs


@pytest.mark.parametrize("name", ["Conv", "Conv2d", "Conv2d-pre", "MTA-kq"])
def test_without_a_causal_mask_the_convolutions_read_later_queries(name):
    """The leak test can fail: bidirectional (the paper's setting), a later token moves earlier outputs."""
    layer = built(ALONE[name])
    x = inputs()
    before = keras.ops.convert_to_numpy(layer(x, x, attention_mask=np.ones((B, T, T), bool)))
    after = keras.ops.convert_to_numpy(layer(*(2 * [changed_at(x, LATER)]), attention_mask=np.ones((B, T, T), bool)))
    assert np.abs(after[:, LATER - 1] - before[:, LATER - 1]).max() > 1e-4


def test_no_modification_computes_what_keras_computes():
    x, y = inputs(1), inputs(2, length=9)
    mask = np.random.default_rng(3).random((B, T, 9)) > 0.3
    for kwargs in (dict(), dict(output_shape=5, use_bias=False), dict(dropout=0.3)):
        theirs = keras.layers.MultiHeadAttention(H, K, **kwargs)
        ours = MultiHeadAttention(H, K, **kwargs)
        theirs(x, y), ours(x, y)
        randomize(theirs, 4)
        ours.set_weights(theirs.get_weights())
        calls = [
            dict(query=x, value=x, use_causal_mask=True),
            dict(query=x, value=y, attention_mask=mask, return_attention_scores=True),
            dict(query=x, value=y, key=y * 0.5),
            dict(query=x, value=x, attention_mask=np.tril(np.ones((B, T, T), bool)), use_causal_mask=True),
        ]
        for call in calls:
            for got, want in zip(to_numpy(ours(**call)), to_numpy(theirs(**call))):
                np.testing.assert_allclose(got, want, atol=1e-5)


def test_keras_masks_of_the_inputs_are_honoured():
    """Embedding(mask_zero=True): padded keys get no weight; with no modification, Keras' numbers."""
    ids = np.array([[3, 5, 7, 2, 0, 0], [4, 4, 1, 0, 0, 0]])
    outputs = {}
    for name, make in (("keras", keras.layers.MultiHeadAttention), ("ours", MultiHeadAttention)):
        tokens = keras.Input((None,), dtype="int32")
        x = keras.layers.Embedding(10, D, mask_zero=True, name="embed")(tokens)
        out, scores = make(H, K, name="attention")(x, x, return_attention_scores=True)
        model = keras.Model(tokens, [out, scores])
        randomize(model, 5)
        outputs[name] = to_numpy(model(ids))
    for got, want in zip(outputs["ours"], outputs["keras"]):
        np.testing.assert_allclose(got, want, atol=1e-5)
    tokens = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(10, D, mask_zero=True)(tokens)
    _, scores = MultiHeadAttention(H, K, attention_conv="2d", alibi=True)(x, x, return_attention_scores=True)
    model = keras.Model(tokens, scores)
    randomize(model, 6)
    switch_convolutions_on(model)
    scores = keras.ops.convert_to_numpy(model(ids))
    assert np.all(scores[0, :, :4, 4:] == 0) and np.all(scores[1, :, :3, 3:] == 0)  # the real rows
    if keras_compat.SOFTMAX_ZEROES_EMPTY_ROWS:  # the padded rows: none (before Keras 3.10: uniform, as its layer)
        assert np.all(scores[0, :, :, 4:] == 0) and np.all(scores[1, :, :, 3:] == 0)
    assert np.abs(scores[0, :, :4, :4]).max() > 0


@pytest.mark.parametrize("name", [case_param(n) for n in ("Conv2d", "Conv", "MTA-kq", "Shaw", "P+R")])
def test_cross_attention_with_other_query_and_key_lengths(name):
    layer = built(EVERY[name])  # max_len T covers both lengths
    queries, memory = inputs(1, length=5), inputs(2, length=9)
    out, scores = layer(queries, memory, return_attention_scores=True)
    assert tuple(out.shape) == (B, 5, D) and tuple(scores.shape) == (B, H, 5, 9)
    memory_mask = np.arange(9)[None, None, :] < 6
    _, scores = layer(
        queries, memory, attention_mask=np.broadcast_to(memory_mask, (B, 5, 9)), return_attention_scores=True
    )
    assert np.all(keras.ops.convert_to_numpy(scores)[..., 6:] == 0)


def test_value_dim_other_than_key_dim():
    """(Keras 3.15's own layer fails here on JAX: its fused kernel wants value_dim == key_dim.)"""
    layer = built(ALONE["Shaw"], value_dim=6, output_shape=5)
    out = layer(inputs(1), inputs(2, length=9), use_causal_mask=True)
    assert tuple(out.shape) == (B, T, 5)
    assert tuple(layer.modifications["relative_position_representation"].value_embeddings.shape) == (7, 6)


@pytest.mark.parametrize("name", ["Conv", "Conv2d", "MTA-kq"])
def test_a_decoders_cross_attention_is_causal_along_its_queries_with_conv_causal(name):
    layer = built(EVERY[name], conv_causal=True)
    queries, memory = inputs(1, length=T), inputs(2, length=9)
    before = keras.ops.convert_to_numpy(layer(queries, memory))
    after = keras.ops.convert_to_numpy(layer(changed_at(queries, LATER), memory))
    np.testing.assert_allclose(after[:, :LATER], before[:, :LATER], atol=1e-6)
    assert np.abs(after[:, LATER:] - before[:, LATER:]).max() > 1e-3


@pytest.mark.parametrize("name", [case_param(n) for n in ("Conv2d", "MTA-kq", "ALiBi", "Shaw", "Talking", "Temp")])
def test_modifications_without_per_position_weights_take_any_length(name):
    x = keras.Input((None, D))
    model = keras.Model(x, MultiHeadAttention(H, K, **ALONE[name])(x, x, use_causal_mask=True))
    randomize(model, 7)
    short = inputs(1, length=16)
    longer = np.concatenate([short, inputs(2, length=16)], axis=1)
    out_short, out_long = (keras.ops.convert_to_numpy(model(v)) for v in (short, longer))
    assert out_long.shape == (B, 32, D)
    np.testing.assert_allclose(out_long[:, :16], out_short, atol=1e-5)  # causal: the prefix is the short input


@pytest.mark.parametrize("name", ["P", "R", "Conv"])
@pytest.mark.tf_only
def test_per_position_weights_refuse_a_longer_input_and_need_max_len(name):
    layer = MultiHeadAttention(H, K, **{**ALONE[name], "max_len": 16})
    layer(inputs(length=16), inputs(length=16))
    with pytest.raises(ValueError, match="max_len=16"):
        layer(inputs(length=32), inputs(length=32))
    with pytest.raises(ValueError, match="needs `max_len`"):
        MultiHeadAttention(H, K, **{**ALONE[name], "max_len": None})


@pytest.mark.tf_only
def test_bad_options_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="needs an attention_conv"):
        MultiHeadAttention(H, K, conv_causal=True)
    with pytest.raises(ValueError, match="int conv_kernel_size"):
        MultiHeadAttention(H, K, attention_conv="1d", max_len=8, conv_kernel_size=(2, 3))
    with pytest.raises(ValueError, match="one attention axis"):
        MultiHeadAttention(H, K, alibi=True, attention_axes=(1, 2))(np.zeros((1, 3, 4, D)), np.zeros((1, 3, 4, D)))


@pytest.mark.tf_only
def test_the_bidirectional_attention_is_the_tagger_layers():
    """Same projections, no bias: the paper's attention maps, from SelfAttention and from the drop-in."""
    options = dict(position_interaction=True, relative_bias=True, attention_conv="1d", max_len=T)
    tagger = SelfAttention(H, K, temperature=True, **options)
    drop_in = MultiHeadAttention(H, K, use_bias=False, temperature=True, **options)
    x = inputs(3)
    tagger(x), drop_in(x, x)
    randomize(tagger, 8)
    weights = {w.path.split("/", 1)[1]: keras.ops.convert_to_numpy(w) for w in tagger.weights}
    for variable in drop_in.weights:
        name = variable.path.split("/", 1)[1]
        source = {"query/kernel": "query_kernel", "key/kernel": "key_kernel", "value/kernel": "value_kernel"}
        variable.assign(weights.get(source.get(name, name), np.random.default_rng(0).normal(size=variable.shape)))
    _, want = tagger(x, return_attention_scores=True)
    _, got = drop_in(x, x, return_attention_scores=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want), atol=1e-5)


@pytest.mark.parametrize("kernel_size", [3, (2, 9), (4, 3)])
@pytest.mark.parametrize("mode", ["centred", "causal", "later rows dropped"])
def test_conv2d_taps_against_loops(kernel_size, mode):
    layer = AttentionConv2D(H, kernel_size=kernel_size)
    x = np.random.default_rng(1).random((B, H, 7, 10)).astype("float32")
    layer(x)
    randomize(layer, 2)
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in layer.weights)
    rows = kernel.shape[1]
    first = -(rows - 1) if mode == "causal" else -((rows - 1) // 2)
    row_open = (lambda offset: offset <= 0) if mode == "later rows dropped" else None
    future_open = np.array([0.0, 1.0], "float32").reshape(B, 1, 1, 1) if row_open else None
    got = keras.ops.convert_to_numpy(layer.convolve_float32(x, causal=mode == "causal", future_open=future_open))
    for b in range(B):
        for h in range(H):
            open_rows = row_open if b == 0 else None
            want = ref.conv2d_taps(x[b, h], kernel[h], bias[h], first, row_open=open_rows)
            np.testing.assert_allclose(got[b, h], want, atol=1e-5)


@pytest.mark.parametrize("mode", ["centred", "causal", "later rows dropped"])
def test_conv1d_taps_against_loops(mode):
    layer = AttentionConv1D(max_len=10, num_heads=H, kernel_size=3)
    x = np.random.default_rng(1).random((B, H, 7, 8)).astype("float32")
    layer(x)
    randomize(layer, 3)
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in layer.weights)
    first = -2 if mode == "causal" else -1
    row_open = (lambda offset: offset <= 0) if mode == "later rows dropped" else None
    future_open = np.array([0.0, 1.0], "float32").reshape(B, 1, 1, 1) if row_open else None
    got = keras.ops.convert_to_numpy(layer.convolve_float32(x, causal=mode == "causal", future_open=future_open))
    for b in range(B):
        for h in range(H):
            open_rows = row_open if b == 0 else None
            want = ref.conv1d_taps(x[b, h], kernel[h][:, :8, :8], bias[h, :8], first, row_open=open_rows)
            np.testing.assert_allclose(got[b, h], want, atol=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        dict(attention_conv="2d", temperature=True, talking_heads=True, alibi=True),
        dict(
            position_interaction=True,
            relative_bias=True,
            attention_conv="1d",
            max_len=T,
            relative_position_representation=2,
        ),
    ],
    ids=["conv2d-temp-talking-alibi", "p-r-conv-shaw"],
)
def test_layer_checks_round_trips_and_dtype_policies(options, tmp_path):
    x = inputs(4)
    run_layer_test(
        MultiHeadAttention,
        dict(num_heads=H, key_dim=K, **options),
        (x, x),
        [(B, T, D), (B, H, T, T)],
        tmp_path,
        call_kwargs=dict(use_causal_mask=True, return_attention_scores=True),
    )


def test_jit_compiled_training_matches_eager_and_learns_the_previous_token():
    """A causal model must learn to output the previous token (needs attention to position i-1)."""
    keras.utils.set_random_seed(0)  # before the layers are built: their initial weights too
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 9, size=(256, 10))
    targets = np.concatenate([np.zeros((256, 1), int), ids[:, :-1]], axis=1)
    tokens = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(9, 16)(tokens)
    y = MultiHeadAttention(2, 8, attention_conv="2d", conv_before_softmax=True, conv_kernel_size=(2, 3))(
        x, x, use_causal_mask=True
    )
    model = keras.Model(tokens, keras.layers.Dense(9)(keras.layers.Add()([x, y])))
    model.compile(
        keras.optimizers.Adam(0.02),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=True,
    )
    history = model.fit(ids, targets, batch_size=32, epochs=30, verbose=0)
    np.testing.assert_allclose(model.predict(ids[:4], verbose=0), keras.ops.convert_to_numpy(model(ids[:4])), atol=1e-4)
    assert history.history["accuracy"][-1] > 0.8  # chance is 1/8; without positions only the convolution finds i-1


@pytest.mark.parametrize("name", ["Conv", "Conv2d", "MTA-kq", "P+R+Temp+Conv2d", "Conv+Shaw"])
def test_the_tagger_layer_is_causal_too(name):
    """SelfAttention shares the implementation: the same leak test through its one-input call."""
    layer = SelfAttention(H, K, **EVERY[name])
    x = inputs()
    layer(x)
    randomize(layer, 1)
    before = keras.ops.convert_to_numpy(layer(x, use_causal_mask=True))
    after = keras.ops.convert_to_numpy(layer(changed_at(x, LATER), use_causal_mask=True))
    np.testing.assert_allclose(after[:, :LATER], before[:, :LATER], atol=1e-6)
    assert np.abs(after[:, LATER:] - before[:, LATER:]).max() > 1e-3


@pytest.mark.tf_only
def test_max_len_binds_only_the_per_position_weights():
    """Built with max_len=16 and no per-position weights, both layers take 32 tokens."""
    options = dict(max_len=16, attention_conv="2d", alibi=True, relative_position_representation=2)
    tagger, drop_in = SelfAttention(H, K, **options), MultiHeadAttention(H, K, **options)
    tagger(inputs(length=16)), drop_in(inputs(length=16), inputs(length=16))
    assert tuple(tagger(inputs(length=32)).shape) == (B, 32, H * K)
    assert tuple(drop_in(inputs(length=32), inputs(length=32)).shape) == (B, 32, D)
    with pytest.raises(ValueError, match="max_len=16"):
        SelfAttention(H, K, max_len=16, position_interaction=True)(inputs(length=32))


@pytest.mark.tf_only
def test_keras_weights_come_first_in_keras_order_and_positional_arguments_keep_their_places():
    x = inputs(1)
    theirs = keras.layers.MultiHeadAttention(H, K, None, 0.25)
    ours = MultiHeadAttention(H, K, None, 0.25, **EVERY["P+R+Temp+Conv2d"])
    theirs(x, x), ours(x, x)
    assert ours.dropout == 0.25 and ours.get_config()["dropout"] == 0.25
    keras_paths = [w.path.split("/", 1)[1] for w in theirs.weights]
    assert [w.path.split("/", 1)[1] for w in ours.weights][: len(keras_paths)] == keras_paths
    assert [id(w) for w in ours.trainable_variables] == [id(w) for w in ours.trainable_weights]
    randomize(theirs, 2)
    ours.set_weights(theirs.get_weights() + ours.get_weights()[len(keras_paths) :])
    for got, want in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_array_equal(got, want)


BAD_OPTIONS = {
    "conv_kernel_size": [dict(attention_conv="2d", conv_kernel_size=2.7), dict(conv_kernel_size=5)],
    "max_len": [dict(max_len=0), dict(max_len=-5), dict(max_len=2.5)],
    "relative_position_representation": [dict(relative_position_representation=True)],
    "alibi": [dict(alibi="yes")],
    "temperature": [dict(temperature=1)],
    "attention_conv": [dict(attention_conv="3d")],
    "relative_bias_parameterization": [dict(relative_bias_parameterization="fft")],
    "conv_causal": [dict(conv_causal=True)],
    "weight_order": [dict(weight_order="mine")],
}


@pytest.mark.parametrize("option, options", [(o, v) for o, vs in BAD_OPTIONS.items() for v in vs])
@pytest.mark.tf_only
def test_a_wrong_option_is_refused_at_construction_naming_it(option, options):
    with pytest.raises(ValueError, match=option):
        MultiHeadAttention(H, K, **options)


@pytest.mark.parametrize("name", ["multi_head_attention", "keras_hub_blocks"])
@pytest.mark.tf_only
def test_a_model_saved_by_convatt_0_1_0_loads(name):
    """Saved (compiled, after a step of Adam) by the code of 0.1.0, whose weights listed the
    modifications first: the weights, the outputs and the optimizer's state (its variables
    in that order: a shape that differs fails the load) load."""
    if name == "keras_hub_blocks":
        pytest.importorskip("keras_hub")
        import convatt.layers.keras_hub_blocks  # noqa: F401 (registers the blocks)
    skip_where_keras_is_older_than_the_saver(DATA / f"{name}_0.1.0.keras")
    data = dict(np.load(DATA / f"{name}_0.1.0.npz"))
    model = keras.models.load_model(DATA / f"{name}_0.1.0.keras")
    outputs = data.pop("outputs")
    inputs = data["ids"] if "ids" in data else [data["source"], data["target"]]
    np.testing.assert_allclose(model.predict(inputs, verbose=0), outputs, atol=1e-5)
    assert keras.ops.convert_to_numpy(model.optimizer.iterations) > 0


@pytest.fixture
def attention_calls(monkeypatch) -> list:
    """`(is_causal, mask)` of each call of `ops.dot_product_attention` from Keras' layer's module."""
    from keras.src.layers.attention import multi_head_attention as keras_module

    calls = []
    original = keras_module.ops.dot_product_attention

    def spy(*args, **kwargs):
        calls.append((kwargs.get("is_causal"), kwargs.get("mask")))
        return original(*args, **kwargs)

    monkeypatch.setattr(keras_module.ops, "dot_product_attention", spy)
    return calls


def test_a_plain_causal_call_calls_the_backend_as_keras_layer_does(attention_calls):
    """No modification, `use_causal_mask=True` and no other mask: the backend's attention called as
    Keras' own layer calls it: `is_causal=True` and no mask tensor where Keras has the fused causal
    kernel (3.15+), the causal mask as a tensor before."""
    x = inputs(1)
    for layer in (keras.layers.MultiHeadAttention(H, K), MultiHeadAttention(H, K)):
        layer(x, x, use_causal_mask=True)
    (their_causal, their_mask), (our_causal, our_mask) = attention_calls
    assert our_causal == their_causal and (our_mask is None) == (their_mask is None)
    assert (our_mask is None) == keras_compat.FUSED_CAUSAL
    MultiHeadAttention(H, K)(x, x, use_causal_mask=True, attention_mask=np.ones((B, T, T), bool))
    assert not attention_calls[-1][0] and attention_calls[-1][1] is not None


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_the_temperature_alone_is_keras_attention_on_scaled_projections(causal, attention_calls):
    """Each head's temperature scales its queries, keys and values: the layer equals Keras' layer
    with those scales in its projections' weights, through Keras' own attention call (the
    backend's fused kernel where there is one), called as Keras' layer calls it."""
    x = inputs(1)
    ours, theirs = built(ALONE["Temp"]), keras.layers.MultiHeadAttention(H, K)
    theirs(x, x)
    *weights, gamma = ours.get_weights()  # Keras' weights in Keras' order, then the temperature
    for index, row in ((0, 0), (2, 1), (4, 2)):  # query, key, value: kernel (D, H, K), bias (H, K)
        weights[index] = weights[index] * gamma[row][None, :, None]
        weights[index + 1] = weights[index + 1] * gamma[row][:, None]
    theirs.set_weights(weights)
    got = to_numpy(ours(x, x, use_causal_mask=causal))[0]
    expected = to_numpy(theirs(x, x, use_causal_mask=causal))[0]
    (our_causal, our_mask), (their_causal, their_mask) = attention_calls[-2:]
    assert our_causal == their_causal and (our_mask is None) == (their_mask is None)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    with_scores, _ = to_numpy(ours(x, x, use_causal_mask=causal, return_attention_scores=True))  # convatt's path
    np.testing.assert_allclose(with_scores, got, atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="the compiled step's memory analysis is JAX's")
def test_a_plain_causal_call_takes_as_much_memory_as_keras_layer():
    from convatt.speed.attention_bench import _layer_step

    x = keras.ops.convert_to_tensor(inputs(1, length=64))
    theirs = _layer_step(keras.layers.MultiHeadAttention(H, K), x, causal=True)
    ours = _layer_step(MultiHeadAttention(H, K), x, causal=True)
    assert ours.temp_bytes == theirs.temp_bytes and ours.total_bytes == theirs.total_bytes


@pytest.mark.parametrize("options", [ALONE["R-circulant"], ALONE["P"], ALONE["Conv"]], ids=str)
@pytest.mark.parametrize("jit_compile", [False, True])
def test_an_input_longer_than_max_len_fails_inside_predict_naming_max_len(options, jit_compile):
    """After calls of other lengths the compiled step is traced for any length (TensorFlow's
    relaxed shapes): the check runs in the graph, and under XLA as a compile error."""
    x = keras.Input((None, D))
    model = keras.Model(x, MultiHeadAttention(H, K, **options)(x, x))
    model.compile(jit_compile=jit_compile)
    for length in (4, 5):
        model.predict(inputs(length=length), verbose=0)
    with pytest.raises(Exception, match=f"max_len[=_]{T}") as error:
        model.predict(inputs(length=T + 3), verbose=0)
    if keras.backend.backend() == "jax" or not jit_compile:
        assert str(T + 3) in str(error.value)  # the length too (XLA's message has the excess: -3)
