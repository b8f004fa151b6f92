"""The softmax forms of the attention core: all compute `masked_softmax`'s values
(`convatt.layers._utils`, autodiff's gradient, the published form); these keep less for the
backward pass. `attention_softmax` picks one for a call's forms and path."""

from __future__ import annotations

import keras

from convatt.layers._utils import keep_rows, large_negative, masked_softmax, softmax_float32, upstream_gradient


def attention_softmax(form: str, rematerialized: bool):
    """The softmax `(scores, keep, pads) -> weights` of `AttentionForms.softmax` `form`; inside a
    block recomputed in the backward pass (`rematerialized`) `lean_block_softmax` whatever the
    form (a gradient that closes over the masks would hold the first trace's tensors)."""
    if rematerialized:
        return lean_block_softmax
    return lean_masked_softmax if form == "from_output" else masked_softmax


def row_masked_softmax(scores, keep=None, pads=None):
    """`masked_softmax`'s values, with the masked weights left at the softmax's exact 0 (the
    exponential of a large negative score underflows) and only the rows with no key left set
    to 0, by a factor per row: XLA then makes the weights in the softmax's own pass, where
    multiplying by the whole mask kept a second attention matrix (an extra pass each way)."""
    if keep is None:
        return softmax_float32(scores)
    scores = keras.ops.where(keep, scores, keras.ops.cast(large_negative(scores.dtype), scores.dtype))
    any_key = keras.ops.any(keep_rows(keep, pads), axis=-1, keepdims=True)
    return softmax_float32(scores) * keras.ops.cast(any_key, scores.dtype)


def lean_masked_softmax(scores, keep=None, pads=None):
    """`masked_softmax` (the same values) with a gradient that reads its output alone:
    `y * (g - sum(y * g))` (0 for a masked score, as autodiff's). Autodiff's let XLA keep the
    exponentials and the row sums instead of the weights, and on a CPU its fused backward pass
    took the causal mask and the sums as whole matrices: one or two attention matrices more at
    the peak."""

    @keras.ops.custom_gradient
    def softmax(scores):
        weights = row_masked_softmax(scores, keep, pads)

        def gradient(*args, upstream=None):
            # a masked score's weight is 0, so is its gradient; but a padded row with no key left
            # is uniform over scores the mask replaced: no gradient there
            return _softmax_gradient(weights, upstream_gradient(args, upstream), None if pads is None else keep)

        return weights, gradient

    return softmax(scores)


def _softmax_gradient(weights, upstream, keep=None):
    """The softmax's gradient from its output alone, `y * (g - sum(y * g))`, and 0 where `keep`
    (when given) is False."""
    weighted = weights * upstream
    grad = weighted - weights * keras.ops.sum(weighted, axis=-1, keepdims=True)
    return grad if keep is None else keras.ops.where(keep, grad, keras.ops.zeros_like(grad))


def lean_block_softmax(scores, keep=None, pads=None):
    """`lean_masked_softmax` for a recomputed block (`keras.remat`): the masks are arguments of
    the custom gradient, as floats, not closed over (a recomputation traces the block again, and
    a closure would hold the first trace's tensors)."""
    if keep is None:
        return lean_masked_softmax(scores)
    open_rows = keras.ops.zeros((1, 1, 1, 1), "float32") if pads is None else keras.ops.cast(pads, "float32")

    @keras.ops.custom_gradient
    def softmax(scores, kept, padded):
        keep, pads = keras.ops.greater(kept, 0.5), keras.ops.greater(padded, 0.5)
        weights = row_masked_softmax(scores, keep, pads)

        def gradient(*args, upstream=None):
            grad = _softmax_gradient(weights, upstream_gradient(args, upstream), keep)
            return grad, keras.ops.zeros_like(kept), keras.ops.zeros_like(padded)

        return weights, gradient

    return softmax(scores, keras.ops.cast(keep, "float32"), open_rows)
