"""Independent references for the layers of `convatt.layers`, in one place.

Loop-by-loop NumPy (float64) versions of the papers' equations, written without the
layers' vectorised tricks, and Keras' own Conv1D / Conv2D run per head with copied
weights (the layers the paper's code used). The per-layer tests compare against these.
"""

from __future__ import annotations

import math

import keras
import numpy as np


def relu(x):
    return np.maximum(x, 0.0)


def identity(x):
    return x


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---------------------------------------------------------------- score modifications


def position_interaction(scores, interactions):
    """`scores (b, h, q, k) + A^p[h, i, j]` (Dufter et al. §2.3, +P)."""
    out = np.array(scores, dtype=np.float64)
    b, h, q, k = out.shape
    for n in range(b):
        for head in range(h):
            for i in range(q):
                for j in range(k):
                    out[n, head, i, j] += interactions[head, i, j]
    return out


def relative_bias(scores, biases, max_len):
    """`scores + a^r[h, i - j + max_len]` (+R)."""
    out = np.array(scores, dtype=np.float64)
    _, h, q, k = out.shape
    for head in range(h):
        for i in range(q):
            for j in range(k):
                out[:, head, i, j] += biases[head, i - j + max_len]
    return out


def alibi_slope(head: int, num_heads: int) -> float:
    """Press et al.'s slope of head `head` (0-based): 2^(-8 (head + 1) / n)."""
    return 2.0 ** (-8.0 * (head + 1) / num_heads)


def alibi(scores):
    """`scores - m_h |i - j|`, the symmetric ALiBi bias."""
    out = np.array(scores, dtype=np.float64)
    _, h, q, k = out.shape
    for head in range(h):
        for i in range(q):
            for j in range(k):
                out[:, head, i, j] -= alibi_slope(head, h) * abs(i - j)
    return out


def sinusoidal_encoding(length: int, d: int, max_wavelength: float = 10000.0):
    """Vaswani et al. §3.5: PE[pos, 2i] = sin(pos / w^(2i/d)), PE[pos, 2i+1] = cos(...)."""
    pe = np.zeros((length, d))
    for pos in range(length):
        for i in range(0, d, 2):
            pe[pos, i] = math.sin(pos / max_wavelength ** (i / d))
            if i + 1 < d:
                pe[pos, i + 1] = math.cos(pos / max_wavelength ** (i / d))
    return pe


def temperature_dense(x, kernel, gamma, bias=None):
    """`gamma * (x @ W) (+ bias)` by sums over the input units. x (b, t, d)."""
    b, t, d = x.shape
    units = kernel.shape[1]
    out = np.zeros((b, t, units))
    for n in range(b):
        for s in range(t):
            for u in range(units):
                out[n, s, u] = gamma * sum(x[n, s, i] * kernel[i, u] for i in range(d))
                if bias is not None:
                    out[n, s, u] += bias[u]
    return out


# ---------------------------------------------------------------- convolutions


def conv1d_same(x, kernel, bias, activation=relu):
    """Keras 'same' Conv1D with loops. x (steps, cin), kernel (taps, cin, cout)."""
    steps, taps = x.shape[0], kernel.shape[0]
    before = (taps - 1) // 2
    out = np.zeros((steps, kernel.shape[2]))
    for i in range(steps):
        for tap in range(taps):
            src = i + tap - before
            if 0 <= src < steps:
                for c in range(kernel.shape[1]):
                    out[i] += x[src, c] * kernel[tap, c]
    return activation(out + bias)


def conv2d_same(x, kernel, bias, activation=relu):
    """Keras 'same' single-filter Conv2D with loops. x (rows, cols), kernel (k, k)."""
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
    return activation(out)


def keras_conv1d_per_head(x, kernel, bias, kernel_size, activation):
    """Run the per-head keras.layers.Conv1D the paper's code used, with copied weights."""
    b, heads, q, k = x.shape
    outs = []
    for h in range(heads):
        conv = keras.layers.Conv1D(k, kernel_size, padding="same", activation=activation, kernel_initializer="zeros")
        conv.build((None, q, k))
        conv.set_weights([kernel[h, :, :k, :k].astype("float32"), bias[h, :k].astype("float32")])
        outs.append(keras.ops.convert_to_numpy(conv(x[:, h].astype("float32"))))
    return np.stack(outs, axis=1)


def keras_conv2d_one_head(x, kernel, bias, kernel_size):
    """keras.layers.Conv2D(1, k, 'same', relu) on one head's (b, q, k) matrices, with copied weights."""
    q, k = x.shape[1:]
    conv = keras.layers.Conv2D(1, kernel_size, padding="same", activation="relu", kernel_initializer="zeros")
    conv.build((None, q, k, 1))
    conv.set_weights([kernel[:, :, None, None].astype("float32"), np.atleast_1d(bias).astype("float32")])
    return keras.ops.convert_to_numpy(conv(x[..., None].astype("float32")))[..., 0]


# ---------------------------------------------------------------- Shaw et al. (2018)


def shaw_head(q, k, v, w_key, w_value, clip):
    """One head of Shaw eqs. 3-4 the naive way, with explicit a^K_ij, a^V_ij. q/k/v (n, d).

    Returns (scores e, attention alpha, outputs z)."""
    n, d = q.shape
    a_key = np.zeros((n, n, d))
    a_value = np.zeros((n, n, d))
    for i in range(n):
        for j in range(n):
            rel = max(-clip, min(clip, j - i))  # clip(j - i, k)
            a_key[i, j] = w_key[rel + clip]
            a_value[i, j] = w_value[rel + clip]
    e = np.array([[q[i] @ (k[j] + a_key[i, j]) / math.sqrt(d) for j in range(n)] for i in range(n)])  # eq. 4
    alpha = softmax(e)
    z = np.array([sum(alpha[i, j] * (v[j] + a_value[i, j]) for j in range(n)) for i in range(n)])  # eq. 3
    return e, alpha, z


# ---------------------------------------------------------------- SelfAttention


def self_attention(
    x,
    weights,
    keep=None,
    *,
    num_heads,
    head_dim,
    max_len=None,
    position_interaction=False,
    relative_bias=False,
    temperature=False,
    attention_conv=None,
    conv_kernel_size=3,
    relative_position_representation=None,
    alibi=False,
    kernel_initializer=None,
):
    """NumPy SelfAttention, head by head and position by position (Dufter et al. §2.2-2.5;
    Shaw et al. eqs. 3-4 with explicit a^K_ij / a^V_ij vectors, not the layer's two-term split).

    `weights` in the layer's documented order; `keep` (b, q, k) bool or None.
    Returns (outputs (b, t, heads * head_dim), attention (b, heads, t, t)).
    """
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
                        scores[i, j] -= alibi_slope(h, num_heads) * abs(i - j)
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


def conv2d_taps(x, kernel, bias, first_row: int, activation=relu, row_open=None):
    """Single-filter Conv2D with loops whose row taps start at row offset `first_row`.

    x (rows, cols), kernel (kr, kc); tap (u, v) reads x[i + first_row + u, j + v - (kc - 1) // 2]
    (zero outside). `first_row = -((kr - 1) // 2)` is Keras' 'same'; `-(kr - 1)` is causal.
    `row_open(offset) -> 0/1` drops the taps of a row offset (None: all open)."""
    rows, cols = x.shape
    kr, kc = kernel.shape
    out = np.full((rows, cols), float(bias))
    for i in range(rows):
        for j in range(cols):
            for u in range(kr):
                if row_open is not None and not row_open(first_row + u):
                    continue
                for v in range(kc):
                    r, c = i + first_row + u, j + v - (kc - 1) // 2
                    if 0 <= r < rows and 0 <= c < cols:
                        out[i, j] += kernel[u, v] * x[r, c]
    return activation(out)


def conv1d_taps(x, kernel, bias, first_row: int, activation=relu, row_open=None):
    """Conv1D over rows with loops, channels = columns: x (rows, cols), kernel (k, cols, cols),
    bias (cols,); tap u reads row i + first_row + u (zero outside)."""
    rows, cols = x.shape
    out = np.tile(np.asarray(bias, float), (rows, 1))
    for i in range(rows):
        for u in range(kernel.shape[0]):
            if row_open is not None and not row_open(first_row + u):
                continue
            r = i + first_row + u
            if 0 <= r < rows:
                out[i] += x[r] @ kernel[u]
    return activation(out)


# ------------------------------------------- the layers' earlier keras.ops formulas
# The formulas the layers computed before their kernels were rewritten for speed (the
# clearest statement of what they compute, in keras.ops): the tests check that the
# new kernels give the same values and gradients, on both backends.


def conv2d_depthwise(attention, kernel, bias, causal: bool, future_open=None, activation=None):
    """AttentionConv2D's earlier convolution: a depthwise convolution with the heads as
    channels. attention (b, h, q, k) and kernel (h, rows, cols), keras tensors, float32."""
    from keras import ops

    rows, cols = kernel.shape[1], kernel.shape[2]
    images = ops.transpose(attention, (0, 2, 3, 1))

    def depthwise(images, kernel, padding):
        return ops.depthwise_conv(images, ops.expand_dims(ops.transpose(kernel, (1, 2, 0)), -1), padding=padding)

    if causal:
        left = (cols - 1) // 2
        images = ops.pad(images, [[0, 0], [rows - 1, 0], [left, cols - 1 - left], [0, 0]])
        outputs = depthwise(images, kernel, "valid")
    elif future_open is None:
        outputs = depthwise(images, kernel, "same")
    else:
        offsets = np.arange(rows) - (rows - 1) // 2
        later = ops.convert_to_tensor((offsets > 0).astype("float32").reshape(1, rows, 1))
        outputs = depthwise(images, kernel * (1.0 - later), "same")
        outputs = outputs + depthwise(images, kernel * later, "same") * future_open
    outputs = ops.transpose(outputs, (0, 3, 1, 2)) + ops.reshape(bias, (1, -1, 1, 1))
    return outputs if activation is None else activation(outputs)


def shaw_clipped_distances(query_len: int, key_len: int, max_distance: int) -> np.ndarray:
    """`clip(j - i, k) + k`, `(query_len, key_len)`: the table row of each pair."""
    distance = np.arange(key_len)[None, :] - np.arange(query_len)[:, None]
    return np.clip(distance, -max_distance, max_distance) + max_distance


def shaw_key_term_gathered(scores, query, key_table, max_distance: int):
    """RelativePositionRepresentation.add_float32's earlier formula: the `(q, k, d)` table of
    `a^K_ij` gathered, then one product per query position. Keras tensors, float32."""
    from keras import ops

    indices = shaw_clipped_distances(scores.shape[-2], scores.shape[-1], max_distance)
    a_key = ops.take(key_table, indices, axis=0)
    return scores + ops.einsum("bqhd,qkd->bhqk", query, a_key) / math.sqrt(key_table.shape[-1])


def shaw_value_term_gathered(attention, value_table, max_distance: int):
    """RelativePositionRepresentation.value_term's earlier formula: `sum_j attention_ij a^V_ij`
    with the `(q, k, d)` table of `a^V_ij` gathered. Keras tensors, float32."""
    from keras import ops

    indices = shaw_clipped_distances(attention.shape[-2], attention.shape[-1], max_distance)
    return ops.einsum("bhqk,qkd->bqhd", attention, ops.take(value_table, indices, axis=0))
