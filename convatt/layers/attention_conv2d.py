"""2-d convolution over an attention matrix (Dufter et al., 2020, §2.5)."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers._options import check_kernel_size
from convatt.layers._utils import (
    check_scores_shape,
    chunk_sums,
    depends_on_gradient,
    per_head_initializer,
    query_tap_offsets,
    serialized,
    upstream_gradient,
)
from convatt.layers.forms import AttentionForms, drop_in_forms


def kernel_pair(kernel_size) -> tuple[int, int]:
    """`(rows, cols)` of a filter given as an int (square) or a pair `(query_taps, key_taps)`."""
    if isinstance(kernel_size, (list, tuple)):
        if len(kernel_size) != 2:
            raise ValueError(f"kernel_size must be an int or a pair (query_taps, key_taps); received {kernel_size!r}.")
        return int(kernel_size[0]), int(kernel_size[1])
    return int(kernel_size), int(kernel_size)


def convolve_heads(attention, kernel, bias, activation, causal: bool = False, future_open=None, forms=None):
    """`AttentionConv2D`'s computation from its weights: `activation(filter_heads(...) + bias)`,
    the filter's rows on rows `i - rows + 1 .. i` when `causal`, else centred (Keras' 'same').
    With a ReLU (the paper's), one function with its own gradient (`filter_and_relu`). The kernel
    gradient's form is `forms`' (`AttentionForms`; None: `drop_in_forms()`, those for the trace)."""
    forms = forms or drop_in_forms()
    offsets = query_tap_offsets(kernel.shape[1], causal)
    future_open = None if causal else future_open
    if activation is keras.activations.relu:
        return filter_and_relu(attention, kernel, bias, offsets, forms, future_open)
    outputs = filter_heads(attention, kernel, offsets, forms, future_open=future_open)
    return activation(outputs + ops.reshape(bias, (1, -1, 1, 1)))


def depthwise_convolve_heads(attention, kernel, bias, activation, causal: bool = False, future_open=None):
    """`convolve_heads` (the same values) as one depthwise convolution over the matrix with
    the heads as channels (heads last): the layer's first form, the one the tagger's published
    results came from, which `SelfAttention` keeps (the same operations, so the same bits; on
    TensorFlow without XLA a CPU's fastest form too, and the quickest to trace)."""
    rows, cols = kernel.shape[1], kernel.shape[2]
    images = ops.transpose(attention, (0, 2, 3, 1))
    if causal:  # all rows on the past: pad the query axis before only, the key axis as 'same'
        left = (cols - 1) // 2
        images = ops.pad(images, [[0, 0], [rows - 1, 0], [left, cols - 1 - left], [0, 0]])
        outputs = _depthwise(images, kernel, "valid")
    elif future_open is None:
        outputs = _depthwise(images, kernel, "same")
    else:  # the rows reading later queries apart, weighted by future_open
        later = ops.reshape(ops.cast(ops.greater(query_tap_offsets(rows, False), 0), "float32"), (1, rows, 1))
        outputs = _depthwise(images, kernel * (1.0 - later), "same")
        outputs = outputs + _depthwise(images, kernel * later, "same") * future_open
    return activation(ops.transpose(outputs, (0, 3, 1, 2)) + ops.reshape(bias, (1, -1, 1, 1)))


def _depthwise(images, kernel, padding: str):
    """`images` `(b, q, k, heads)` filtered by `kernel` `(heads, rows, cols)`; as `(b, q, k, heads)`."""
    return ops.depthwise_conv(images, ops.expand_dims(ops.transpose(kernel, (1, 2, 0)), -1), padding=padding)


def filter_and_relu(attention, kernel, bias, row_offsets: list[int], forms: AttentionForms, future_open=None):
    """`relu(filter_heads(attention, ...) + bias)` as one function with its own gradient, which
    keeps no more than autodiff of a ReLU must: the ReLU's mask is read from the output
    (`relu(x) > 0` where `x > 0`; the product with the values keeps it anyway), and what the
    kernel's gradient derives from the input (a padded, transposed copy) is computed in the
    backward pass (`depends_on_gradient`), not kept from the forward pass.

    Args:
        attention: float `(batch, heads, query_len, key_len)`.
        kernel: float `(heads, rows, cols)`; bias: float `(heads,)`.
        row_offsets: the query row each kernel row reads, relative to row `i`.
        forms: the forms of the kernel's gradient (`AttentionForms`).
        future_open: optional float `(batch, 1, 1, 1)` (see `filter_heads`).
    """
    col_offsets = _col_offsets(kernel.shape[2])
    open_rows = ops.ones((1, 1, 1, 1), "float32") if future_open is None else future_open

    @ops.custom_gradient
    def convolve(attention, kernel, bias, open_rows):
        scales = [open_rows if offset > 0 else None for offset in row_offsets]
        outputs = stencil(attention, kernel, row_offsets, col_offsets, scales) + ops.reshape(bias, (1, -1, 1, 1))
        outputs = ops.relu(outputs)

        def gradient(*args, upstream=None):
            upstream = upstream_gradient(args, upstream)
            upstream = ops.where(ops.greater(outputs, 0), upstream, ops.zeros_like(upstream))
            anchored = depends_on_gradient(attention, upstream, forms.anchored)
            d_input, d_kernel = _stencil_gradients(anchored, upstream, kernel, row_offsets, col_offsets, scales, forms)
            return d_input, d_kernel, ops.sum(upstream, axis=(0, 2, 3)), ops.zeros_like(open_rows)

        return outputs, gradient

    return convolve(attention, kernel, bias, open_rows)


def filter_heads(attention, kernel, row_offsets: list[int], forms: AttentionForms, future_open=None):
    """Each head's matrix filtered by its own kernel (no bias), with a gradient that keeps
    nothing but the input.

    `out[b, h, i, j] = sum_{r, c} kernel[h, r, c] * attention[b, h, i + row_offsets[r],
    j + c - (cols - 1) // 2]`, zero outside the matrix (the key axis as Keras' 'same'),
    the kernel rows of positive offsets (later queries) times `future_open` when given.
    Forward and input gradient are `stencil`s (shifted multiply-adds, one fused pass
    under XLA); the kernel's gradient a multiply-and-sum of shifted slices per tap.

    Args:
        attention: float `(batch, heads, query_len, key_len)`.
        kernel: float `(heads, rows, cols)`.
        row_offsets: the query row each kernel row reads, relative to row `i`
            (`query_tap_offsets`: contiguous, 0 among them).
        forms: the forms of the kernel's gradient (`AttentionForms`).
        future_open: optional float `(batch, 1, 1, 1)`.
    """
    col_offsets = _col_offsets(kernel.shape[2])
    open_rows = ops.ones((1, 1, 1, 1), "float32") if future_open is None else future_open

    @ops.custom_gradient
    def convolve(attention, kernel, open_rows):
        scales = [open_rows if offset > 0 else None for offset in row_offsets]

        def gradient(*args, upstream=None):
            upstream = upstream_gradient(args, upstream)
            d_input, d_kernel = _stencil_gradients(attention, upstream, kernel, row_offsets, col_offsets, scales, forms)
            return d_input, d_kernel, ops.zeros_like(open_rows)

        return stencil(attention, kernel, row_offsets, col_offsets, scales), gradient

    return convolve(attention, kernel, open_rows)


def _col_offsets(cols: int) -> list[int]:
    """The key column each kernel column reads, relative to column `j` (Keras' 'same')."""
    return [col - (cols - 1) // 2 for col in range(cols)]


def _stencil_gradients(x, upstream, kernel, row_offsets: list[int], col_offsets: list[int], scales: list, forms):
    """`stencil`'s gradients with respect to `x` and the kernel, given its output's gradient:
    the input's is the stencil with the mirrored kernel (`out[i]` reads `in[i + d]`, so
    `in[i]` gets `out[i - d]`)."""
    # one axis a call: Keras < 3.9's TensorFlow backend fails on a tuple of axes
    mirrored = ops.flip(ops.flip(kernel, axis=1), axis=2)
    rows, columns = [-d for d in reversed(row_offsets)], [-d for d in reversed(col_offsets)]
    d_input = stencil(upstream, mirrored, rows, columns, scales[::-1])
    return d_input, stencil_kernel_gradient(x, upstream, row_offsets, col_offsets, scales, forms)


def stencil(x, kernel, row_offsets: list[int], col_offsets: list[int], row_scales: list | None = None):
    """`out[b, h, i, j] = sum_{r, c} kernel[h, r, c] * scale_r * x[b, h, i + row_offsets[r], j +
    col_offsets[c]]` (zero outside; `scale_r` = `row_scales[r]` or 1) as a sum of shifted
    slices of the zero-padded `x`, which XLA fuses into one pass over the matrix."""
    (top, bottom), (left, right) = _padding(row_offsets), _padding(col_offsets)
    padded = ops.pad(x, [[0, 0], [0, 0], [top, bottom], [left, right]])
    heads = []
    for head in range(x.shape[1]):  # a scalar weight per tap: XLA keeps it in the fused loop
        total = None
        for row, d_row in enumerate(row_offsets):
            band = padded[:, head, top + d_row : _end(bottom - d_row), :]
            terms = [
                band[..., left + d_col : _end(right - d_col)] * kernel[head, row, col]
                for col, d_col in enumerate(col_offsets)
            ]
            row_sum = sum(terms[1:], terms[0])
            if row_scales is not None and row_scales[row] is not None:
                row_sum = row_sum * ops.reshape(row_scales[row], (-1, 1, 1))
            total = row_sum if total is None else total + row_sum
        heads.append(total)
    return ops.stack(heads, axis=1)


def stencil_kernel_gradient(x, upstream, row_offsets: list[int], col_offsets: list[int], row_scales: list, forms):
    """The gradient of `stencil`'s kernel: `d[h, r, c] = sum_{b, i, j} upstream[b, h, i, j] *
    scale_r * x[b, h, i + row_offsets[r], j + col_offsets[c]]`, in the form
    `forms.conv2d_kernel_gradient` (`AttentionForms`): a sum per tap ("tapped": on a GPU or TPU the
    slice fuses into the reduction, where a depthwise convolution with a `(query, key)` filter is
    far slower), one depthwise convolution ("convolved": JAX on a CPU, whose XLA code copies a
    slice before reducing it) or sums along the key axis ("row_summed": TensorFlow on a CPU)."""
    kernel_gradient = KERNEL_GRADIENTS[forms.conv2d_kernel_gradient or "tapped"]
    if kernel_gradient is row_summed_kernel_gradient:
        return kernel_gradient(x, upstream, row_offsets, col_offsets, row_scales, forms.chunked_sums)
    return kernel_gradient(x, upstream, row_offsets, col_offsets, row_scales)


def tapped_kernel_gradient(x, upstream, row_offsets: list[int], col_offsets: list[int], row_scales: list):
    """`stencil_kernel_gradient` as one multiply-and-sum of a shifted slice of the padded `x`
    per tap."""
    (top, bottom), (left, right) = _padding(row_offsets), _padding(col_offsets)
    padded = ops.pad(x, [[0, 0], [0, 0], [top, bottom], [left, right]])
    rows = []
    for d_row, scale in zip(row_offsets, row_scales):
        band = padded[:, :, top + d_row : _end(bottom - d_row), :]
        weighted = upstream if scale is None else upstream * ops.reshape(scale, (-1, 1, 1, 1))
        taps = [
            ops.sum(band[..., left + d_col : _end(right - d_col)] * weighted, axis=(0, 2, 3)) for d_col in col_offsets
        ]
        rows.append(ops.stack(taps, axis=-1))
    return ops.stack(rows, axis=1)  # (heads, rows, cols)


def row_summed_kernel_gradient(
    x, upstream, row_offsets: list[int], col_offsets: list[int], row_scales: list, chunked: bool = False
):
    """`stencil_kernel_gradient` as a sum along the key axis per tap (each row's products with a
    shifted row of the padded `x`), then over the batch and the queries: a reduction along the
    matrix's contiguous axis (a row scale applied to those row sums). Where `chunked` (under
    XLA) the key axis is summed in chunks (`chunk_sums`), the taps' chunks together: XLA then
    fuses each tap's product into its sum instead of writing it out (one attention matrix per
    tap)."""
    (top, bottom), (left, right) = _padding(row_offsets), _padding(col_offsets)
    padded = ops.pad(x, [[0, 0], [0, 0], [top, bottom], [left, right]])
    rows = []
    for d_row, scale in zip(row_offsets, row_scales):
        band = padded[:, :, top + d_row : _end(bottom - d_row), :]
        taps = [chunk_sums(band[..., left + d_col : _end(right - d_col)] * upstream, chunked) for d_col in col_offsets]
        sums = ops.sum(ops.stack(taps, axis=-2), axis=-1)  # (batch, heads, query, cols)
        sums = sums if scale is None else sums * ops.reshape(scale, (-1, 1, 1, 1))
        rows.append(ops.sum(sums, axis=(0, 2)))
    return ops.stack(rows, axis=1)  # (heads, rows, cols)


def convolved_kernel_gradient(x, upstream, row_offsets: list[int], col_offsets: list[int], row_scales: list):
    """`stencil_kernel_gradient` as one depthwise convolution of the padded `x` (channels:
    batch x heads) with `upstream` as the filter."""
    (top, bottom), (left, right) = _padding(row_offsets), _padding(col_offsets)
    heads = x.shape[1]
    padded = ops.pad(x, [[0, 0], [0, 0], [top, bottom], [left, right]])
    shape = ops.shape(padded)
    images = ops.reshape(ops.transpose(padded, (2, 3, 0, 1)), (1, shape[2], shape[3], -1))
    shape = ops.shape(upstream)
    filters = ops.reshape(ops.transpose(upstream, (2, 3, 0, 1)), (shape[2], shape[3], -1, 1))
    per_sample = ops.depthwise_conv(images, filters, padding="valid")  # (1, rows, cols, batch * heads)
    per_sample = ops.transpose(ops.reshape(per_sample, (len(row_offsets), len(col_offsets), -1, heads)), (2, 3, 0, 1))
    rows = [per_sample[:, :, row : row + 1, :] for row in range(len(row_offsets))]
    rows = [r if scale is None else r * ops.reshape(scale, (-1, 1, 1, 1)) for r, scale in zip(rows, row_scales)]
    return ops.sum(ops.concatenate(rows, axis=2), axis=0)  # (heads, rows, cols)


KERNEL_GRADIENTS = {
    "tapped": tapped_kernel_gradient,
    "row_summed": row_summed_kernel_gradient,
    "convolved": convolved_kernel_gradient,
}
"""`AttentionForms.conv2d_kernel_gradient`'s forms of `stencil_kernel_gradient`."""


def _padding(offsets: list[int]) -> tuple[int, int]:
    """Zeros before and after an axis so that every offset's slice stays inside."""
    return max(-offsets[0], 0), max(offsets[-1], 0)


def _end(after: int) -> int | None:
    """The end of a slice that leaves `after` entries of the padded axis (static, any length)."""
    return -after if after > 0 else None


@keras.saving.register_keras_serializable(package="convatt")
class AttentionConv2D(keras.layers.Layer):
    """Per-head single-filter Conv2D over an attention matrix ("+Conv2d").

    Each head's `(query_len, key_len)` matrix is filtered by its own
    `kernel_size x kernel_size` filter (or `query_taps x key_taps` for a pair,
    e.g. `(2, 9)` as Multi-Token Attention's key-query convolution) plus a scalar bias, with 'same' padding
    and `activation`, exactly as `keras.layers.Conv2D(1, kernel_size,
    padding="same")` on a one-channel image would (a cross-correlation). It
    smooths the attention pattern over neighbouring query and key positions;
    the result is not renormalised. Any query / key length works.

    Args:
        num_heads: int. The number of attention heads.
        kernel_size: int, filter height and width, or a pair `(query_taps,
            key_taps)`. Defaults to 3.
        activation: Defaults to `"relu"`.
        kernel_initializer: initializer of each head's filter, applied as to a
            Keras Conv2D kernel `(kernel_size, kernel_size, 1, 1)` per head.
            Defaults to `"glorot_uniform"`.
        bias_initializer: Defaults to `"zeros"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        attention: tensor of shape `(batch_size, num_heads, query_len, key_len)`.

    Returns:
        The convolved attention, same shape, in the layer's compute dtype.

    Causal models: `convolve_float32(attention, causal=True)` puts the filter's
    rows on query rows `i - query_taps + 1 .. i` (as Multi-Token Attention's
    causal key-query convolution), so row `i` of the output reads no later query;
    the key axis stays centred (masked entries are 0, so later keys add nothing).

    Mixed precision: the convolution runs in float32 with the float32
    weights, and only the result is cast to the compute dtype;
    `convolve_float32` returns it in float32 (used by `SelfAttention`).

    Weights (in this order):
        `kernel` `(num_heads, query_taps, key_taps)` indexed
        `[head, row_tap, col_tap]`; `bias` `(num_heads,)`.

    Example:
    ```python
    attention = keras.ops.softmax(np.random.rand(2, 4, 60, 60), axis=-1)
    layer = convatt.layers.AttentionConv2D(num_heads=4)
    out = layer(attention)  # (2, 4, 60, 60); 40 parameters
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(
        self,
        num_heads: int,
        kernel_size: int = 3,
        activation: Any = "relu",
        kernel_initializer: Any = "glorot_uniform",
        bias_initializer: Any = "zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.kernel_size = check_kernel_size("kernel_size", kernel_size)
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, input_shape=None):
        if input_shape is not None:
            check_scores_shape(self.name, input_shape, self.num_heads)
        rows, cols = kernel_pair(self.kernel_size)
        shape = (self.num_heads, rows, cols)
        self.kernel = self.add_weight(
            name="kernel",
            shape=shape,
            initializer=per_head_initializer(self.kernel_initializer, shape, (rows, cols, 1, 1)),
            autocast=False,  # the convolution runs in float32 (convolve_float32)
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.num_heads,), initializer=self.bias_initializer, autocast=False
        )

    def call(self, attention):
        return ops.cast(self.convolve_float32(attention), self.compute_dtype)

    def convolve_float32(self, attention, causal: bool = False, future_open=None, forms: AttentionForms | None = None):
        """The convolution of `attention`, computed and returned in float32.

        Args:
            attention: `(batch, num_heads, query_len, key_len)`.
            causal: put the filter's rows on query rows `i - rows + 1 .. i` (a causal
                model) instead of centring them on row `i` ('same' padding).
            future_open: optional float `(batch, 1, 1, 1)` multiplying the filter rows
                that read later query rows (0 drops them: a causal mask).
            forms: `AttentionForms` or None (`convatt.layers.forms`): compute it as one
                depthwise convolution (`conv2d="depthwise"`, `depthwise_convolve_heads`: the
                operations of the tagger's results, which `SelfAttention` keeps) or as shifted
                multiply-adds with their own gradient (`"stencil"`, `convolve_heads`: faster
                under XLA). The same values to float rounding. None: `drop_in_forms()`, those
                for the trace (the stencil).
        """
        check_scores_shape(self.name, attention.shape, self.num_heads)
        forms = forms or drop_in_forms()
        kernel, bias = ops.cast(self.kernel, "float32"), ops.cast(self.bias, "float32")
        attention = ops.cast(attention, "float32")
        if forms.conv2d == "depthwise":
            return depthwise_convolve_heads(attention, kernel, bias, self.activation, causal, future_open)
        return convolve_heads(attention, kernel, bias, self.activation, causal, future_open, forms)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "kernel_size": self.kernel_size,
            **serialized(self, "activation", "kernel_initializer", "bias_initializer"),
        }
