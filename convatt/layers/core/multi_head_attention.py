"""Keras' `MultiHeadAttention` with the modifications of Dufter et al. (2020), causal-safe."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import keras
from keras import ops

from convatt.layers import _keras_compat as keras_compat
from convatt.layers._utils import batched_attention_mask, causal_keep, keep_mask
from convatt.layers.core import attention_cache, xla_island
from convatt.layers.core.blocked_attention import block_size, blocked_attention, check_query_block
from convatt.layers.core.modifications import MODIFICATION_OPTIONS, MODIFICATIONS
from convatt.layers.core.modified_attention import ModifiedAttention
from convatt.layers.core.rows import AttentionCall, CallMasks, call_facts, call_rows, padded_rows
from convatt.layers.forms import compile_core, drop_in_forms

WEIGHT_ORDERS = ("keras", "modifications_first")
"""`weight_order`: Keras' weights first (the default), or the modifications' first (how
convatt 0.1.0 listed them; the layers of .keras files saved then load so, with their
optimizer state)."""


@keras.saving.register_keras_serializable(package="convatt")
class MultiHeadAttention(ModifiedAttention, keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with convatt's attention modifications.

    A drop-in replacement for Keras' layer: the same constructor arguments, the
    same call (self- and cross-attention, `attention_mask`, the inputs' Keras
    masks, `use_causal_mask`, `return_attention_scores`, `training`), the same
    projections and output projection; plus the modifications of Dufter,
    Schmitt & Schütze (2020) and their neighbours, with the names and meanings
    of `SelfAttention`'s options (one implementation, `convatt.layers.core.modifications`).
    With no modification on it computes exactly what Keras' layer computes.

    Per head: scores `Q K^T / sqrt(key_dim)`, then optionally `+ A^p`
    (`position_interaction`), `+ A^r` (`relative_bias`), Shaw et al.'s relative
    key term (`relative_position_representation`) and ALiBi biases (`alibi`);
    optionally talking heads and a convolution of the scores
    (`conv_before_softmax`, Multi-Token Attention's key-query convolution);
    the softmax over the keys; optionally a 1-d / 2-d convolution of the
    attention matrix (`attention_conv`, the paper's +Conv / +Conv2d); dropout;
    the product with the values (plus Shaw et al.'s value term); the output
    projection. With `temperature=True` a learnable scalar per head multiplies
    its queries, keys and values (the paper's §2.4, on the projections).

    Causality: with `use_causal_mask=True` no output depends on a later token, whatever the
    modifications: later keys are masked before and after the softmax, the convolutions read
    no masked entry and their query taps lie on past rows (`i - k + 1 .. i`). Under a
    lower-triangular `attention_mask` built by hand the centred taps on later rows are
    dropped; `conv_causal=True` aligns them on the past for every call (a decoder's
    cross-attention). Without a causal mask the computation is exactly the paper's.

    Masks and padding: every mask Keras' layer takes, as Keras takes it, plus an explicit
    `query_mask`. With a modification on, padding never reaches a real position's output
    (pads are zero rows and columns of what the convolutions read); a padded query row gets
    no attention. See docs/layers.md, "Masks and padding".

    Lengths: only `position_interaction`, `relative_bias` and `attention_conv="1d"` have
    weights per position; they need `max_len` and refuse a longer query or key with an error
    naming it. Every other modification takes any length.

    Compilation: in a TensorFlow graph without XLA (`fit` under Keras' default on a CPU) the
    modified attention runs as an XLA program of its own (`convatt.layers.core.xla_island`); under
    XLA or JAX the step is compiled whole already.

    Dtype policies: sublayers get this layer's policy; the scores, from
    `Q K^T` on, are float32 up to and including the softmax and the
    convolution when a modification is on (the attention is cast to the compute
    dtype when it meets the values), as in `SelfAttention`. The temperature
    alone scales the projections only: a call with no mask but the causal one,
    not returning the attention, is then Keras' attention (its fused kernel
    where the backend has one).

    Weights: Keras' own, in Keras' order (query, key, value, output), then the
    modifications' (temperature, then `MODIFICATIONS`' order), so the weights of a
    `keras.layers.MultiHeadAttention` set those of this layer
    (`convatt.layers.conversion` turns a trained Keras model into one with convoluted
    attention that computes the same outputs).

    Args:
        num_heads, key_dim, value_dim, dropout, use_bias, output_shape,
            attention_axes, kernel_initializer, bias_initializer, ...: as
            `keras.layers.MultiHeadAttention`, in Keras' positions. With a
            modification on, the inputs must be `(batch, length, features)` (one
            attention axis) and `flash_attention` must be off.
        The modification options are keyword-only; a value an option does not
        take is a ValueError naming it:
        max_len: int >= 1 or None. Longest query / key length, for the
            modifications with weights per position only.
        query_block: int >= 1, "auto" (the default) or None. With a modification on,
            compute the attention in blocks of this many queries (each with the rows its
            convolution reads), each block's matrices made, used and discarded, and
            recomputed in the backward pass: memory `O(query_block * key_len)` instead
            of `O(query_len * key_len)`, the same outputs and gradients to float
            rounding (`convatt.layers.core.blocked_attention`). Taken where the lengths are
            known, the query length is longer than a block and the attention matrix
            is not asked for. "auto": blocks only where one example's attention matrix
            (`num_heads * query_len * key_len` floats) passes 256 MiB, e.g. past 4,096
            tokens with 4 heads, of a size that keeps a block's matrix near 64 MiB
            (`blocked_attention.block_size`); None: always the whole matrix.
    Call arguments:
        query: `(batch_size, query_len, query_dim)`.
        value: `(batch_size, key_len, value_dim_in)`.
        key: optional `(batch_size, key_len, key_dim_in)`; `value` if None.
        query_mask, value_mask, key_mask: optional boolean `(batch_size, len)`;
            True = a real token (the inputs' Keras masks fill them in).
        attention_mask: optional boolean `(batch_size, query_len, key_len)` or
            `(batch_size, num_heads, query_len, key_len)`; True = attend.
        return_attention_scores: bool. Also return the attention matrix
            (after the convolution, before dropout).
        training: bool. Dropout on the attention in training.
        use_causal_mask: bool. A causal mask (query `i` attends keys `<= i`),
            and the convolutions aligned on past queries.
        cache: optional float `(batch_size, slots, max_length, num_heads, key_dim)`
            (`empty_cache`): decode a few tokens at a time, KerasHub's way; the
            call then returns `(output, cache)` (or `(output, attention, cache)`).
            Slots: keys, values, and with a convolution the queries
            (`convatt.layers.core.attention_cache`); a cross-attention's: keys and
            values (`empty_cache(..., cross=True)`). Every modification decodes exactly.
        cache_update_index: int or int tensor: the position of `query`'s first
            token, where the cache is updated; in cross-attention (with
            `query_position`) where the keys and values are written (0), or None
            to reuse the cache as it is.
        query_position: int or int tensor: for a cross-attention cache
            (`empty_cache(batch, encoder_length, cross=True)`, KerasHub's
            `(batch, 2, encoder_length, num_heads, key_dim)`), the decoder
            position of `query`'s first token; the modifications that read
            positions and the convolutions need it.
        query_cache: float `(batch_size, max_length, num_heads, key_dim)`
            (`attention_cache.empty_query_cache`): a cross-attention cache's
            decoder queries, for a convolution; the call then returns it updated
            last (`(output, cache, query_cache)`).

    Returns:
        `(batch_size, query_len, output_dim)`, or the tuple `(output, attention)`
        with `attention` `(batch_size, num_heads, query_len, key_len)`.

    Example:
    ```python
    # One line in existing code: the import.
    from convatt.layers import MultiHeadAttention  # was: from keras.layers import ...

    x = keras.Input((None, 64))  # any length
    y = MultiHeadAttention(num_heads=4, key_dim=16, attention_conv="2d")(x, x, use_causal_mask=True)
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
     - [Golovneva et al., 2025, Multi-Token Attention](https://arxiv.org/abs/2504.00927)
     - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(
        self,
        *args,
        max_len: int | None = None,
        temperature: bool = False,
        weight_order: str = "keras",
        query_block: int | str | None = "auto",
        **kwargs,
    ):
        options = {name: kwargs.pop(name) for name in MODIFICATION_OPTIONS if name in kwargs}
        super().__init__(*args, **kwargs)  # Keras' arguments, in Keras' places
        if weight_order not in WEIGHT_ORDERS:
            raise ValueError(f"weight_order takes one of {WEIGHT_ORDERS}; received {weight_order!r}.")
        self.weight_order = weight_order
        self.query_block = check_query_block(query_block)
        self._init_modifications({**options, "temperature": temperature}, max_len)
        if self.modified and keras_compat.flash_attention(self):
            raise ValueError(
                "flash_attention computes no attention matrix for the modifications to change; "
                "turn it off, or the modifications."
            )

    choose_forms = staticmethod(drop_in_forms)  # for the backend, device and compilation (convatt.layers.forms)
    _drops_caller_masks = True  # as Keras' layer (KerasHub's cached attention keeps them: keras_hub_blocks)

    @property
    def _attention_is_keras(self) -> bool:
        """Whether the attention itself is Keras' computation: no modification, or only the
        temperature (a scale of the projections). Without a mask other than the causal one and
        without the attention matrix asked for, it then takes Keras' path (the backend's fused
        attention where there is one)."""
        return not any(row.is_on(self) for row in MODIFICATIONS if row.name != "temperature")

    @property
    def modification_dims(self) -> tuple[int, int]:
        """`(key_dim, value_dim)` of a head."""
        return self.key_dim, self.value_dim

    @classmethod
    def from_config(cls, config: dict[str, Any]):
        # Saved before the order was Keras': the optimizer's state in the file is in the old order.
        return super().from_config({"weight_order": "modifications_first", **config})

    @property
    def weights(self) -> list:
        """Keras' weights first, in Keras' order (query, key, value, output), then the modifications'."""
        return self._ordered(super().weights)

    @property
    def variables(self) -> list:
        return self._ordered(super().variables)

    def _ordered(self, variables: list) -> list:
        """`variables` in `weight_order` (`weights` and `variables` must agree: an optimizer is
        built on one and saved in the order of the other)."""
        if self.weight_order != "keras":
            return variables
        ours = {id(w) for w in self._modification_variables()}
        return [w for w in variables if id(w) not in ours] + [w for w in variables if id(w) in ours]

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if not self.modified:
            return
        if len(query_shape) != 3 or len(value_shape) != 3 or self.attention_axes != (1,):
            raise ValueError(
                f"{self.name}: the modifications take inputs (batch, length, features) with one "
                f"attention axis; received query {query_shape}, value {value_shape}, "
                f"attention_axes {self.attention_axes}."
            )
        scores_shape = (query_shape[0], self.num_heads, query_shape[1], value_shape[1])
        self._build_modifications(scores_shape, (query_shape[0], query_shape[1], self.num_heads, self.key_dim))

    def __call__(self, query, value, *args, **kwargs):
        # Self-attention: `self_attention=True`, or the query and the value one tensor, seen
        # here, before Keras converts each argument (NumPy arrays) to a tensor of its own.
        if kwargs.get("self_attention") is None:
            kwargs["self_attention"] = query is value
        return super().__call__(query, value, *args, **kwargs)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        query_position=None,
        query_cache=None,
        self_attention=None,
    ):
        if self._drops_caller_masks:  # Keras' layer takes its inputs' Keras masks off: layers after it see that
            keras_compat.drop_keras_masks(query, value, key)
        key_len = None if cache is not None else value.shape[1]  # a cached call's keys: the cache's
        attention_mask = batched_attention_mask(self.name, attention_mask, query.shape[1], key_len)
        if any(x is not None for x in (cache, cache_update_index, query_position, query_cache)):  # attention_cache
            return attention_cache.cached_call(
                self, query, value, key, cache, cache_update_index, attention_mask, use_causal_mask,
                return_attention_scores, training, query_position, query_cache,
            )  # fmt: skip
        masks = (query_mask, value_mask, key_mask, attention_mask)
        call = call_facts(self.name, masks, use_causal_mask, self_attention, bool(self.attention_conv))
        if block := self._query_blocks(query, value, return_attention_scores, masks):
            call = replace(call, blocks=CallMasks.of_call(*masks), block_size=block)
            mask = None  # made block by block
        else:
            mask = self._call_mask(query, value, masks, call)
        key = value if key is None else key
        output, attention = self._attend(query, value, key, mask, training, return_attention_scores, call)
        return (output, attention) if return_attention_scores else output

    def _query_blocks(self, query, value, return_attention_scores: bool, masks: tuple) -> int | None:
        """The queries per block of this call's modified attention (`query_block`, `block_size`),
        or None for the whole matrix: blocks need known lengths, no attention matrix asked for,
        Keras' own masks (no sliding window; not a per-head `attention_mask` beside padding
        masks, which Keras' layer broadcasts over the heads) and `_compute_attention`."""
        lengths, attention_mask = (query.shape[1], value.shape[1]), masks[3]
        per_head = attention_mask is not None and len(attention_mask.shape) == 4
        takes_blocks = (
            not (per_head and any(m is not None for m in masks[:3]))
            and self.query_block is not None
            and not self._attention_is_keras
            and not return_attention_scores
            and all(isinstance(length, int) for length in lengths)
            and keras_compat.sliding_window(self) is None
            and not self._overrides_compute_attention
        )
        return block_size(self.query_block, self.num_heads, *lengths) if takes_blocks else None

    def compute_output_spec(self, query, value, *args, self_attention=None, **kwargs):
        return super().compute_output_spec(query, value, *args, **kwargs)  # Keras' (no `self_attention`)

    def _call_mask(self, query, value, masks: tuple, call: AttentionCall):
        """Keras' mask for the call (`_compute_attention_mask`), or None for a causal-only call
        (no subclass override of `_compute_attention`) that the modifications mask themselves or
        Keras' fused causal kernel takes (Keras 3.15+; before, Keras' layer builds the mask)."""
        causal_only = call.causal and not call.masked and keras_compat.sliding_window(self) is None
        fused = keras_compat.FUSED_CAUSAL or not self._attention_is_keras
        if causal_only and fused and not self._overrides_compute_attention:
            return None
        return keras_compat.attention_mask_of_call(self, query, value, masks, call.causal)

    def _attend(self, query, value, key, mask, training, return_attention_scores: bool, call: AttentionCall):
        """Keras' `call` from its mask on: the projections (and gate), `_compute_attention` (told the
        call's facts unless a subclass overrides it: Keras' signature then), the output projection."""
        # Copies without the inputs' Keras masks (the mask is the call's now): the projections
        # support none and would warn. Keras' own call deletes the masks of the caller's tensors.
        query, key, value = (ops.copy(x) for x in (query, key, value))
        gate_dense = keras_compat.gate_dense(self)
        gate = None if gate_dense is None else gate_dense(query)
        query, key, value = self.query_dense(query), self.key_dense(key), self.value_dense(value)
        extra = {"use_causal_mask": True} if call.causal and mask is None else {}
        if not self._overrides_compute_attention:
            extra["call"] = call
        output, attention = self._compute_attention(
            query, key, value, mask, training, return_attention_scores, **extra
        )  # fmt: skip
        return self.output_dense(output if gate is None else ops.multiply(output, gate)), attention

    def empty_cache(self, batch_size: int, max_length: int, cross: bool = False):
        """A zero cache for decoding up to `max_length` tokens (with `cross`: a cross-attention's,
        for encoder sequences of `max_length`; `convatt.layers.core.attention_cache`)."""
        return attention_cache.empty_cache(self, batch_size, max_length, cross=cross)

    @property
    def _overrides_compute_attention(self) -> bool:
        """A subclass's own `_compute_attention` (perhaps Keras' older signature, without
        `use_causal_mask`) always gets the causal mask as a mask, as Keras' layer guards it."""
        return type(self)._compute_attention is not MultiHeadAttention._compute_attention

    def _compute_causal_mask(self, query, value=None):
        """Keras' causal mask `(1, query_len, key_len)`, from convatt's one helper (`causal_keep`)."""
        query_len = ops.shape(query)[1]
        key_len = query_len if value is None else ops.shape(value)[1]
        return causal_keep(ops.arange(query_len), key_len)[None]

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
        call: AttentionCall | None = None,
    ):
        """Keras' `_compute_attention` (its override point), with the modifications; `call`: what
        `call` knows of it (the causal flag, self-attention, whether masks were given). Where
        TensorFlow runs without XLA the modified attention is one XLA program (`xla_island`)."""
        call = call or AttentionCall(bool(use_causal_mask))
        flags = (training, return_attention_scores, use_causal_mask, call)
        island = call.blocks is None and not self._keras_computes(call, attention_mask, return_attention_scores)
        if island and compile_core(training, keras_compat.in_symbolic_or_stateless_scope()):
            query, key = self.checked_lengths(query, key)  # TensorFlow's check of an unknown length, outside XLA
            dropout = keras_compat.dropout_layer(self)
            seed = dropout.seed_generator.state if training and dropout.rate > 0 else None
            tensors = (query, key, value, attention_mask)
            return xla_island.run_as_island(self._attention_core, flags, tensors, seed, self.island_recomputes())
        return self._attention_core(query, key, value, attention_mask, *flags)

    def _keras_computes(self, call: AttentionCall, attention_mask, return_attention_scores: bool) -> bool:
        """Whether the call is Keras' own attention: no modification but the temperature, and a
        mask Keras' path takes (none, or on Keras < 3.15, which has no fused causal kernel, the
        causal mask alone), the attention not asked for where a modification is on."""
        causal_mask_only = call.causal and not call.masked and not keras_compat.FUSED_CAUSAL
        causal_mask_only = causal_mask_only and keras_compat.sliding_window(self) is None
        mask_is_keras = attention_mask is None or causal_mask_only
        keras_path = not self.modified or (mask_is_keras and not return_attention_scores)
        return self._attention_is_keras and keras_path

    def _attention_core(
        self, query, key, value, attention_mask, training, return_attention_scores: bool, use_causal_mask, call
    ):
        """`_compute_attention` from the projections on: the temperature, then Keras' attention,
        the blocks of queries or the modified attention matrix, dropout and the product with the values."""
        query, key, value = self.projected(query, key, value)  # the temperature, if on
        if call.blocks is not None:
            return blocked_attention(self, query, key, value, call, training), None
        if self._keras_computes(call, attention_mask, return_attention_scores):
            return keras_compat.keras_attention(
                self, query, key, value, attention_mask, training, return_attention_scores, use_causal_mask
            )  # fmt: skip
        rows = call_rows(query, key, None if attention_mask is None else keep_mask(attention_mask), use_causal_mask)
        pads = padded_rows(rows, call, keras_fused=self.dropout == 0 and not return_attention_scores)
        context = self._modification_context(query, rows, call.causal, pads)
        _, attention = self.attention_maps(query, key, context)
        dropped = keras_compat.dropout_layer(self)(ops.cast(attention, self.compute_dtype), training=training)
        output = self.value_terms(ops.einsum(keras_compat.combine_equation(self), dropped, value), dropped, context)
        return output, ops.cast(attention, self.compute_dtype)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update(
            {"weight_order": self.weight_order, "query_block": self.query_block, **self._modification_config()}
        )
        return config
