"""SelfAttention against an independent loop-by-loop NumPy reference, for every option.

The reference follows the papers' equations head by head and position by position:
Dufter et al. (2020) §2.2-2.5 and, for `relative_position_representation`, Shaw et
al. (2018) eqs. 3-4 with explicit a^K_ij / a^V_ij vectors (not the layer's two-term
split of eq. 5).
"""
import math

import numpy as np
import pytest
import keras

from convatt.layers import SelfAttention

B, T, D, H, DH, MAX_LEN = 2, 6, 5, 2, 3, 8
ATOL = 2e-5


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def conv1d_same(x, kernel, bias):
    """Keras 'same' Conv1D + ReLU. x (steps, cin), kernel (taps, cin, cout)."""
    steps, taps = x.shape[0], kernel.shape[0]
    before = (taps - 1) // 2
    out = np.tile(bias, (steps, 1)).astype(float)
    for i in range(steps):
        for tap in range(taps):
            if 0 <= i + tap - before < steps:
                out[i] += x[i + tap - before] @ kernel[tap]
    return np.maximum(out, 0)


def conv2d_same(x, kernel, bias):
    """Keras 'same' single-filter Conv2D + ReLU."""
    rows, cols = x.shape
    k = kernel.shape[0]
    before = (k - 1) // 2
    out = np.full((rows, cols), float(bias))
    for i in range(rows):
        for j in range(cols):
            for u in range(k):
                for v in range(k):
                    r, c = i + u - before, j + v - before
                    if 0 <= r < rows and 0 <= c < cols:
                        out[i, j] += kernel[u, v] * x[r, c]
    return np.maximum(out, 0)


def reference(x, weights, keep=None, *, num_heads=H, head_dim=DH, max_len=MAX_LEN, position_interaction=False,
              relative_bias=False, temperature=False, attention_conv=None, conv_kernel_size=3,
              relative_position_representation=None, alibi=False, kernel_initializer=None):
    """NumPy SelfAttention. `weights` in the layer's documented order; `keep` (b, q, k) bool or None."""
    w = [np.asarray(v, np.float64) for v in weights]
    wq, wk, wv = w.pop(0), w.pop(0), w.pop(0)
    gamma = w.pop(0) if temperature else np.ones((3, num_heads))
    ap = w.pop(0) if position_interaction else None
    ar = w.pop(0) if relative_bias else None
    if relative_position_representation is not None:
        clip = relative_position_representation
        w_key, w_value = w.pop(0), w.pop(0)  # rows: distances -clip .. clip
    if attention_conv:
        conv_kernel, conv_bias = w.pop(0), w.pop(0)
    assert not w, "more weights than the options explain"

    b, t, _ = x.shape
    out = np.zeros((b, t, num_heads * head_dim))
    attention = np.zeros((b, num_heads, t, t))
    for n in range(b):
        for h in range(num_heads):
            q = x[n] @ (gamma[0, h] * wq[:, h, :])
            k = x[n] @ (gamma[1, h] * wk[:, h, :])
            v = x[n] @ (gamma[2, h] * wv[:, h, :])
            if relative_position_representation is not None:
                # Shaw eqs. 3-4: explicit edge vectors a_ij = w[clip(j - i, k)].
                a_key = np.zeros((t, t, head_dim))
                a_value = np.zeros((t, t, head_dim))
                for i in range(t):
                    for j in range(t):
                        d = max(-clip, min(clip, j - i))
                        a_key[i, j] = w_key[d + clip]
                        a_value[i, j] = w_value[d + clip]
            scores = np.zeros((t, t))
            for i in range(t):
                for j in range(t):
                    key_j = k[j] + (a_key[i, j] if relative_position_representation is not None else 0)
                    scores[i, j] = q[i] @ key_j / math.sqrt(head_dim)
                    if position_interaction:
                        scores[i, j] += ap[h, i, j]
                    if relative_bias:
                        scores[i, j] += ar[h, i - j + max_len]
                    if alibi:
                        scores[i, j] -= 2.0 ** (-8.0 * (h + 1) / num_heads) * abs(i - j)
                    if keep is not None and not keep[n, i, j]:
                        scores[i, j] = -1e9
            att = softmax(scores)
            if keep is not None:
                att = att * keep[n]
            if attention_conv == "1d":
                att = conv1d_same(att, conv_kernel[h, :, :t, :t], conv_bias[h, :t])
            elif attention_conv == "2d":
                att = conv2d_same(att, conv_kernel[h], conv_bias[h])
            if attention_conv and keep is not None:
                att = att * keep[n]
            z = np.zeros((t, head_dim))
            for i in range(t):
                for j in range(t):
                    v_j = v[j] + (a_value[i, j] if relative_position_representation is not None else 0)
                    z[i] += att[i, j] * v_j
            out[n, :, h * head_dim : (h + 1) * head_dim] = z
            attention[n, h] = att
    return out, attention


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
    return keras.ops.convert_to_numpy(out), keras.ops.convert_to_numpy(att)


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
    "all": dict(position_interaction=True, relative_bias=True, temperature=True, attention_conv="1d",
                relative_position_representation=2, alibi=True),
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


def test_parameter_counts_and_weight_layout():
    # The acceptance count: 3 * 364 * 364 + 14,400 + 480 + 12 + 40.
    layer = SelfAttention(4, 91, 60, position_interaction=True, relative_bias=True, temperature=True,
                          attention_conv="2d")
    out = layer(keras.Input((60, 364)))
    assert tuple(out.shape) == (None, 60, 364)
    assert layer.count_params() == 3 * 364 * 364 + 14_400 + 480 + 12 + 40 == 412_420
    assert [w.path.split("/", 1)[1] for w in layer.weights] == [
        "query_kernel", "key_kernel", "value_kernel", "temperature",
        "position_interaction/interactions", "relative_bias/biases", "attention_conv/kernel", "attention_conv/bias",
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
        "relative_position_representation/key_embeddings", "relative_position_representation/value_embeddings"]


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
        inputs, return_attention_scores=True)
    assert tuple(out.shape) == (None, T, H * DH) and tuple(att.shape) == (None, H, T, T)


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
        SelfAttention(2, 4, kernel_initializer="zeros")(np.zeros((1, 3, 3), "float32"),
                                                       attention_mask=np.ones((1, 1, 3, 3), bool))


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
