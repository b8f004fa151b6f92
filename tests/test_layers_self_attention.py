"""SelfAttention: the layer harness, and an independent loop-by-loop NumPy reference
(`layer_references.self_attention`) for every option, with and without masks.

The reference follows the papers' equations head by head and position by position:
Dufter et al. (2020) §2.2-2.5 and, for `relative_position_representation`, Shaw et
al. (2018) eqs. 3-4 with explicit a^K_ij / a^V_ij vectors (not the layer's two-term
split of eq. 5).
"""

import math

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import SelfAttention

B, T, D, H, DH, MAX_LEN = 2, 6, 5, 2, 3, 8
ATOL = 2e-5


def reference(x, weights, keep=None, **options):
    """`layer_references.self_attention` with this file's sizes."""
    return ref.self_attention(x, weights, keep, **{"num_heads": H, "head_dim": DH, "max_len": MAX_LEN, **options})


def make_layer(rng, t=T, **options):
    """A built SelfAttention with random weights (temperatures away from 1, positive conv biases)."""
    options.setdefault("max_len", MAX_LEN)
    layer = SelfAttention(H, DH, kernel_initializer="zeros", **options)
    layer.build((None, t, D))
    weights = []
    for var in layer.weights:
        if var.path.endswith("temperature"):
            value = rng.uniform(0.5, 2.0, var.shape)
        elif var.path.endswith("attention_conv/bias"):
            value = rng.uniform(0.0, 0.3, var.shape)
        else:
            value = rng.normal(0.0, 0.6, var.shape)
        weights.append(value)
    layer.set_weights([v.astype("float32") for v in weights])
    return layer, weights


def run(layer, x, **kwargs):
    out, att = layer(x.astype("float32"), return_attention_scores=True, **kwargs)
    return (
        keras.ops.convert_to_numpy(keras.ops.cast(out, "float32")),
        keras.ops.convert_to_numpy(keras.ops.cast(att, "float32")),
    )


OPTIONS = {
    "plain": {},
    "P": dict(position_interaction=True),
    "R": dict(relative_bias=True),
    "temp": dict(temperature=True),
    "conv1d": dict(attention_conv="1d"),
    "conv2d": dict(attention_conv="2d"),
    "P+R+temp+conv1d": dict(position_interaction=True, relative_bias=True, temperature=True, attention_conv="1d"),
    "P+R+temp+conv2d": dict(position_interaction=True, relative_bias=True, temperature=True, attention_conv="2d"),
    "shaw": dict(relative_position_representation=2),
    "alibi": dict(alibi=True),
    "all": dict(
        position_interaction=True,
        relative_bias=True,
        temperature=True,
        attention_conv="1d",
        relative_position_representation=2,
        alibi=True,
    ),
}


@pytest.mark.parametrize("t", [MAX_LEN, T], ids=["t=max_len", "t<max_len"])
@pytest.mark.parametrize("name", list(OPTIONS))
def test_matches_numpy_reference(name, t):
    rng = np.random.default_rng(100 * list(OPTIONS).index(name) + t)
    options = OPTIONS[name]
    layer, weights = make_layer(rng, t=t, **options)
    x = rng.normal(size=(B, t, D))
    out, att = run(layer, x)
    ref_out, ref_att = reference(x, weights, **options)
    assert out.shape == (B, t, H * DH) and att.shape == (B, H, t, t)
    np.testing.assert_allclose(att, ref_att, atol=ATOL)
    np.testing.assert_allclose(out, ref_out, atol=ATOL)
    # Without a convolution the attention rows are distributions.
    if "attention_conv" not in options:
        np.testing.assert_allclose(att.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", ["plain", "P+R+temp+conv1d", "P+R+temp+conv2d", "all"])
def test_masks_match_numpy_reference(name):
    rng = np.random.default_rng(11)
    options = OPTIONS[name]
    layer, weights = make_layer(rng, **options)
    x = rng.normal(size=(B, T, D))
    lengths = np.array([T, 3])
    seq_mask = np.arange(T)[None, :] < lengths[:, None]  # (b, t)

    # Keras mask: keys and queries.
    keep = seq_mask[:, :, None] & seq_mask[:, None, :]
    out, att = run(layer, x, mask=seq_mask)
    ref_out, ref_att = reference(x, weights, keep, **options)
    np.testing.assert_allclose(att, ref_att, atol=ATOL)
    np.testing.assert_allclose(out, ref_out, atol=ATOL)
    assert not out[1, 3:].any() and not att[1, :, :, 3:].any()

    # attention_mask (b, t): keys only.
    keep = np.broadcast_to(seq_mask[:, None, :], (B, T, T))
    out, att = run(layer, x, attention_mask=seq_mask)
    ref_out, ref_att = reference(x, weights, keep, **options)
    np.testing.assert_allclose(out, ref_out, atol=ATOL)
    assert out[1, 3:].any()  # padded queries still attend to the real keys

    # attention_mask (b, t, t): arbitrary pairs (here: a band of width 1), combined with the Keras mask.
    band = np.abs(np.arange(T)[:, None] - np.arange(T)[None, :]) <= 1
    pairs = np.broadcast_to(band, (B, T, T)).copy()
    pairs[0, 2, :] = False  # a fully masked row
    keep = pairs & seq_mask[:, :, None] & seq_mask[:, None, :]
    out, att = run(layer, x, mask=seq_mask, attention_mask=pairs.astype("int32"))
    ref_out, ref_att = reference(x, weights, keep, **options)
    np.testing.assert_allclose(att, ref_att, atol=ATOL)
    np.testing.assert_allclose(out, ref_out, atol=ATOL)
    assert np.isfinite(out).all()


@pytest.mark.parametrize("name", list(OPTIONS))
def test_padding_does_not_change_real_positions(name):
    """With a mask, appending padding (of any content) leaves the real outputs as they were."""
    rng = np.random.default_rng(5)
    layer, _ = make_layer(rng, **OPTIONS[name])
    real = rng.normal(size=(1, 4, D))
    padded = np.concatenate([real, rng.normal(size=(1, T - 4, D))], axis=1)
    mask = np.arange(T)[None, :] < 4
    short, _ = run(layer, real)
    long, _ = run(layer, padded, mask=mask)
    np.testing.assert_allclose(long[:, :4], short, atol=ATOL)


def test_keras_mask_from_embedding_is_used_and_passed_on():
    rng = np.random.default_rng(3)
    layer, weights = make_layer(rng, position_interaction=True)
    ids = keras.Input((T,), dtype="int32")
    embedding = keras.layers.Embedding(10, D, mask_zero=True, embeddings_initializer="zeros")
    z = layer(embedding(ids))
    model = keras.Model(ids, z)
    tokens = np.array([[1, 2, 3, 4, 5, 6], [4, 5, 6, 0, 0, 0]])
    embedding.set_weights([rng.normal(size=(10, D)).astype("float32")])
    x = keras.ops.convert_to_numpy(embedding(tokens))
    seq_mask = tokens != 0
    ref_out, _ = reference(x, weights, seq_mask[:, :, None] & seq_mask[:, None, :], position_interaction=True)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(tokens)), ref_out, atol=ATOL)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.compute_mask(x, seq_mask)), seq_mask)


@pytest.mark.tf_only
def test_parameter_counts_and_weight_layout():
    # The acceptance count: 3 * 364 * 364 + 14,400 + 480 + 12 + 40.
    layer = SelfAttention(
        4, 91, 60, position_interaction=True, relative_bias=True, temperature=True, attention_conv="2d"
    )
    out = layer(keras.Input((60, 364)))
    assert tuple(out.shape) == (None, 60, 364)
    assert layer.count_params() == 3 * 364 * 364 + 14_400 + 480 + 12 + 40 == 412_420
    assert [w.path.split("/", 1)[1] for w in layer.weights] == [
        "query_kernel",
        "key_kernel",
        "value_kernel",
        "temperature",
        "position_interaction/interactions",
        "relative_bias/biases",
        "attention_conv/kernel",
        "attention_conv/bias",
    ]
    assert [tuple(w.shape) for w in layer.weights[:4]] == [(364, 4, 91)] * 3 + [(3, 4)]
    np.testing.assert_array_equal(layer.get_weights()[3], 1.0)

    conv1d = SelfAttention(4, 91, 60, temperature=True, attention_conv="1d")
    conv1d.build((None, 60, 364))
    assert conv1d.count_params() == 3 * 364 * 364 + 12 + 4 * 10_860
    plain = SelfAttention(4, 91)
    plain.build((None, None, 364))
    assert plain.count_params() == 3 * 364 * 364
    shaw = SelfAttention(4, 91, relative_position_representation=16, alibi=True)
    shaw.build((None, 60, 364))
    assert shaw.count_params() == 3 * 364 * 364 + 2 * 33 * 91
    assert [w.path.split("/", 1)[1] for w in shaw.weights][3:] == [
        "relative_position_representation/key_embeddings",
        "relative_position_representation/value_embeddings",
    ]


@pytest.mark.tf_only
def test_projection_init_is_per_head_glorot_uniform():
    keras.utils.set_random_seed(0)
    layer = SelfAttention(4, 91)
    layer.build((None, 60, 364))
    limit = math.sqrt(6 / (364 + 91))  # glorot-uniform of one head's (364, 91) matrix
    kernels = layer.get_weights()
    for kernel in kernels:
        assert limit * 0.99 < np.abs(kernel).max() <= limit
    assert not np.allclose(kernels[0], kernels[1])


@pytest.mark.parametrize("initializer", ["random_normal", "orthogonal", keras.initializers.RandomUniform(seed=3)])
@pytest.mark.tf_only
def test_projections_start_distinct_with_any_initializer(initializer):
    """One initializer object must not give W_q, W_k and W_v the same start (Keras 3
    random initializers repeat their values when called twice)."""
    layer = SelfAttention(2, 3, kernel_initializer=initializer)
    layer.build((None, 5, 6))
    query, key, value = layer.get_weights()
    assert not np.allclose(query, key) and not np.allclose(key, value) and not np.allclose(query, value)


def test_variable_length_in_functional_model():
    rng = np.random.default_rng(8)
    layer, weights = make_layer(rng, position_interaction=True, relative_bias=True, attention_conv="1d")
    inputs = keras.Input((None, D))
    model = keras.Model(inputs, layer(inputs))
    for t in (2, 5, MAX_LEN):
        x = rng.normal(size=(3, t, D))
        ref_out, _ = reference(x, weights, position_interaction=True, relative_bias=True, attention_conv="1d")
        np.testing.assert_allclose(keras.ops.convert_to_numpy(model.predict(x, verbose=0)), ref_out, atol=ATOL)


def test_return_attention_scores_in_functional_model():
    inputs = keras.Input((T, D))
    out, att = SelfAttention(H, DH, max_len=T, attention_conv="2d", kernel_initializer="zeros")(
        inputs, return_attention_scores=True
    )
    assert tuple(out.shape) == (None, T, H * DH) and tuple(att.shape) == (None, H, T, T)


@pytest.mark.tf_only
def test_errors():
    for option in (dict(position_interaction=True), dict(relative_bias=True), dict(attention_conv="1d")):
        with pytest.raises(ValueError, match="max_len"):
            SelfAttention(2, 4, **option)
    SelfAttention(2, 4, attention_conv="2d", alibi=True, relative_position_representation=3)  # no max_len needed
    with pytest.raises(ValueError, match="attention_conv"):
        SelfAttention(2, 4, max_len=5, attention_conv="3d")
    with pytest.raises(ValueError, match="max_len=5"):
        SelfAttention(2, 4, max_len=5, position_interaction=True)(np.zeros((1, 6, 3), "float32"))
    with pytest.raises(ValueError, match="attention_mask"):
        SelfAttention(2, 4, kernel_initializer="zeros")(
            np.zeros((1, 3, 3), "float32"), attention_mask=np.ones((1, 1, 3, 3), bool)
        )


def test_every_weight_is_trained():
    """One SGD step changes every weight, except a^r[:, 0], the RelativeBias entry no offset uses."""
    rng = np.random.default_rng(9)
    options = OPTIONS["all"]
    layer, _ = make_layer(rng, t=MAX_LEN, **options)
    inputs = keras.Input((MAX_LEN, D))
    model = keras.Model(inputs, layer(inputs))
    model.compile(keras.optimizers.SGD(0.1), "mse")
    before = {w.path: keras.ops.convert_to_numpy(w.value) for w in layer.weights}
    x = rng.normal(size=(4, MAX_LEN, D)).astype("float32")
    model.fit(x, rng.normal(size=(4, MAX_LEN, H * DH)).astype("float32"), batch_size=4, epochs=1, verbose=0)
    for w in layer.weights:
        delta = np.abs(keras.ops.convert_to_numpy(w.value) - before[w.path])
        if w.path.endswith("relative_bias/biases"):
            assert not delta[:, 0].any() and (delta[:, 1:] > 0).all()
        else:
            assert delta.max() > 0, w.path


# ---------------------------------------------------------------- harness, dtype policies

ALL_SUBLAYERS = dict(
    max_len=MAX_LEN,
    position_interaction=True,
    relative_bias=True,
    temperature=True,
    attention_conv="1d",
    relative_position_representation=2,
    alibi=True,
    kernel_initializer="zeros",
)


@pytest.mark.tf_only
def test_layer_harness_every_option_with_mask_and_scores(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, D)).astype("float32")
    mask = (np.arange(T)[None, :] < np.array([[T], [4]])).astype("int32")
    run_layer_test(
        SelfAttention,
        dict(num_heads=H, head_dim=DH, **ALL_SUBLAYERS),
        x,
        [(B, T, H * DH), (B, H, T, T)],
        tmp_path,
        call_kwargs=dict(attention_mask=mask, return_attention_scores=True),
        expected_num_weights=10,
    )


@pytest.mark.tf_only
def test_layer_harness_conv2d(tmp_path):
    x = np.random.default_rng(1).normal(size=(B, T, D)).astype("float32")
    run_layer_test(
        SelfAttention,
        dict(num_heads=H, head_dim=DH, temperature=True, attention_conv="2d", kernel_initializer="zeros"),
        x,
        (B, T, H * DH),
        tmp_path,
    )


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_policy_eager_and_symbolic_outputs_agree(policy):
    """The issue's case: eager and symbolic calls both give the compute dtype, with sublayers."""
    compute = keras.dtype_policies.get(policy).compute_dtype
    layer = SelfAttention(2, 8, max_len=12, position_interaction=True, kernel_initializer="zeros", dtype=policy)
    symbolic = layer(keras.Input((12, 5)))
    eager = layer(np.random.default_rng(0).random((2, 12, 5)).astype("float32"))
    assert keras.backend.standardize_dtype(symbolic.dtype) == compute
    assert keras.backend.standardize_dtype(eager.dtype) == compute
    assert layer._position_interaction.dtype_policy.name == policy
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in layer.weights)


@pytest.mark.parametrize("position", ["position_interaction", "relative_bias"])
def test_large_position_terms_are_added_in_float32(position):
    """With scores exactly 0 (zero projections), the attention is softmax(A^p) or softmax(A^r).
    Large position terms (10-30) rounded to bfloat16 would move the probabilities by ~5%;
    computed in float32, only the final rounding of the attention to bfloat16 remains."""
    layer = SelfAttention(
        H, DH, max_len=MAX_LEN, kernel_initializer="zeros", dtype="mixed_bfloat16", **{position: True}
    )
    layer.build((None, MAX_LEN, D))
    rng = np.random.default_rng(3)
    terms = rng.uniform(10, 30, layer.weights[3].shape)
    layer.weights[3].assign(terms.astype("float32"))
    _, att = run(layer, rng.normal(size=(1, MAX_LEN, D)))
    zeros = [np.zeros(w.shape) for w in layer.weights[:3]]
    _, expected = reference(np.zeros((1, MAX_LEN, D)), zeros + [terms], **{position: True})
    np.testing.assert_allclose(att, expected, rtol=2**-8, atol=1e-30)


@pytest.mark.tf_only
def test_from_config_round_trip():
    layer = SelfAttention(
        H,
        DH,
        max_len=T,
        position_interaction=True,
        relative_bias=True,
        temperature=True,
        attention_conv="1d",
        conv_kernel_size=5,
        relative_position_representation=1,
        alibi=True,
        kernel_initializer=keras.initializers.Constant(0.2),
    )
    x = np.random.default_rng(2).uniform(size=(2, T, D)).astype("float32")
    layer(x)
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)
