"""The facts of one call that the modifications read besides the tensor they transform:
`AttentionContext` (frozen, made once per call: no layer state), and how a whole call makes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from keras import ops

from convatt.layers._utils import lower_triangular_keep
from convatt.layers.core.forms import PUBLISHED, AttentionForms


@dataclass(frozen=True)
class AttentionContext:
    """What one call tells the modifications besides the tensor they transform.

    Attributes:
        query: the projected queries `(b, q, h, d)` (Shaw et al.'s key term reads them).
        keep: boolean `(b, 1, q, k)`, True where a query may attend a key; None: no mask.
        causal: the convolutions' query taps lie on rows `i - k + 1 .. i` (a causal
            call), instead of being centred on row `i` (the paper's).
        future_open: float `(b, 1, 1, 1)`, 0 for the batch entries whose mask is
            lower-triangular (a causal mask, however built) and 1 for the others; the
            centred convolutions multiply their taps on later rows with it. None when
            there is no mask (every tap is open) or `causal` (no tap on a later row).
        weights: the attention `(b, h, q, k)` that multiplied the values (the `values`
            stage reads it); None before that product.
        positions: int `(q,)`, the query rows' positions (the keys': `0 .. k - 1`); None: a
            whole call's, `0 .. q - 1`. A cached call's rows are the table's call at their
            positions (`convatt.layers.core.attention_cache`).
        pads: boolean `(b, 1 or h, q, 1)`, the padded query rows (None: none known). They
            attend as Keras' layer makes them (`masked_softmax` keeps their whole rows:
            a row with no key left is uniform), each modification applied to them; the
            convolutions read them as zero rows, so that no real row reads a pad.
        rematerialized: computed inside `keras.remat` (a block of `blocked_attention`): no
            custom gradient that closes over the context's tensors (`jax.checkpoint` traces
            the block again, and a closure would hold the first trace's values).
        forms: the form of each part (`convatt.layers.core.forms`), resolved when the call is
            traced: the rows of the table pass them to their sublayers.
    """

    query: Any
    keep: Any = None
    causal: bool = False
    future_open: Any = None
    weights: Any = None
    pads: Any = None
    positions: Any = None
    rematerialized: bool = False
    forms: AttentionForms = PUBLISHED


def attention_context(query, keep, causal: bool, pads=None, forms: AttentionForms = PUBLISHED) -> AttentionContext:
    """The context of one call: `keep` `(b, 1, q, k)` or None, `causal` as the caller says,
    the padded rows `pads` or None, the call's `forms`."""
    if keep is None or causal:
        return AttentionContext(query, keep, causal, None, pads=pads, forms=forms)
    shape = ops.shape(keep)
    later = ops.logical_not(lower_triangular_keep(shape[-2], shape[-1]))
    real = keep if pads is None else ops.logical_and(keep, ops.logical_not(pads))  # the real rows' keys
    sees_later = ops.any(ops.logical_and(real, later), axis=(1, 2, 3), keepdims=True)
    return AttentionContext(query, keep, False, ops.cast(sees_later, "float32"), pads=pads, forms=forms)
