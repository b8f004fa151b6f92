"""KerasHub's transformer blocks with convatt's attention (needs the `hub` extra: keras-hub).

`TransformerEncoder` and `TransformerDecoder` are KerasHub's layers of the same names
whose attention layers are `convatt.layers.MultiHeadAttention` with the modifications
given in `attention_options`; everything else (residuals, layer norms, feed-forward,
masks, configs) is KerasHub's. Import this module explicitly; `convatt.layers` itself
does not need keras-hub.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

try:
    import keras_hub
except ImportError as error:  # the optional extra
    raise ImportError(
        "convatt.layers.keras_hub_blocks needs keras-hub: pip install 'convatt[hub]' (or pip install keras-hub)."
    ) from error

from keras_hub.src.layers.modeling.transformer_layer_utils import merge_padding_and_attention_mask

from convatt.layers import _keras_compat as keras_compat
from convatt.layers._keras_compat import keras_mask
from convatt.layers.core import attention_cache
from convatt.layers.core.multi_head_attention import MultiHeadAttention

OLD_WEIGHT_ORDER = {"attention_weight_order": "modifications_first"}
"""What a block saved before its attention listed Keras' weights first gets (its file's
optimizer state is in that order); see `MultiHeadAttention`'s `weight_order`."""


@keras.saving.register_keras_serializable(package="convatt")
class CacheFreeMultiHeadAttention(MultiHeadAttention):
    """`MultiHeadAttention` inside KerasHub's blocks (the name saved models know it by).

    KerasHub's blocks pass `cache=None, cache_update_index=None` on whole sequences
    (training, scoring) and a cache when decoding a token at a time; convatt's
    `MultiHeadAttention` takes both (`convatt.layers.core.attention_cache`: keys, values and,
    with a convolution, queries). What else a cross-attention needs (the decoder's padding
    and position, the earlier decoder queries), `TransformerDecoder` passes as arguments.
    """


def _replace_attention(block, attribute: str, shape, value_shape, options: dict[str, Any]) -> None:
    """Put convatt's attention, with KerasHub's own sizes and initialisers, in place of `attribute`."""
    theirs = getattr(block, attribute)
    keras_compat.untrack(block, theirs)
    ours = CacheFreeMultiHeadAttention(
        num_heads=theirs.num_heads,
        key_dim=theirs.key_dim,
        dropout=theirs.dropout,
        **keras_compat.attention_initializers(theirs),
        dtype=block.dtype_policy,
        name=theirs.name,
        weight_order=getattr(block, "attention_weight_order", "keras"),
        **options,
    )
    # Keras' attention (KerasHub's encoder) takes its inputs' Keras masks off, KerasHub's cached one keeps them.
    ours._drops_caller_masks = type(theirs) is keras.layers.MultiHeadAttention
    ours.build(shape, value_shape)
    setattr(block, attribute, ours)


@keras.saving.register_keras_serializable(package="convatt")
class TransformerEncoder(keras_hub.layers.TransformerEncoder):
    """`keras_hub.layers.TransformerEncoder` with convatt's self-attention.

    Args:
        attention_options: dict. The modification options of
            `convatt.layers.MultiHeadAttention` (e.g. `{"attention_conv": "2d"}`).
        attention_weight_order: the attention's `weight_order`: `"keras"` (Keras' weights
            first); blocks saved by convatt 0.1.0 load with `"modifications_first"`.
        *args, **kwargs: as `keras_hub.layers.TransformerEncoder`.

    Example:
    ```python
    from convatt.layers.keras_hub_blocks import TransformerEncoder

    x = keras.Input((None, 64))
    y = TransformerEncoder(intermediate_dim=128, num_heads=4,
                           attention_options={"attention_conv": "2d", "alibi": True})(x)
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
    """

    def __init__(
        self,
        *args,
        attention_options: dict[str, Any] | None = None,
        attention_weight_order: str = "keras",
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.attention_options = dict(attention_options or {})
        self.attention_weight_order = attention_weight_order

    @classmethod
    def from_config(cls, config: dict[str, Any]):
        return super().from_config({**OLD_WEIGHT_ORDER, **config})

    def build(self, inputs_shape):
        super().build(inputs_shape)
        _replace_attention(self, "_self_attention_layer", inputs_shape, inputs_shape, self.attention_options)

    def get_config(self) -> dict[str, Any]:
        config = {**super().get_config(), "attention_options": self.attention_options}
        return {**config, "attention_weight_order": self.attention_weight_order}


@keras.saving.register_keras_serializable(package="convatt")
class TransformerDecoder(keras_hub.layers.TransformerDecoder):
    """`keras_hub.layers.TransformerDecoder` with convatt's self- and cross-attention.

    The decoder is causal: its self-attention gets KerasHub's causal mask, and with a
    convolution (`attention_conv`) both attentions align their query taps on past
    queries (`conv_causal=True`, so the cross-attention, whose mask is not causal,
    reads no later decoder position either).

    Every row as KerasHub's decoder computes it: KerasHub's attention takes no query mask,
    so a padded decoder row (the decoder sequence's Keras mask or `decoder_padding_mask`)
    attends as any row does, here too, each modification applied to it; only the convolutions
    keep pads from real rows (in the cross-attention, where the decoder's padding is known,
    by a second call that gives the real rows: twice the cross-attention's cost).

    Decoding a token at a time: KerasHub's `self_attention_cache` and
    `self_attention_cache_update_index` (and the cross-attention's), as KerasHub's
    decoder, whatever the modifications of either attention; make each cache with
    `self_attention_cache_shape` / `cross_attention_cache_shape`. The self-attention
    cache is `(batch, slots, max_length, num_heads, key_dim)`: keys, values, with a
    convolution in the self-attention its queries, and with one in the cross-attention
    the cross-attention's queries last (the earlier decoder queries its convolution
    reads; kept here because every step threads this cache through, while KerasHub's
    seq2seq models drop the cross-attention cache a step returns). The cross-attention
    cache is KerasHub's `(batch, 2, encoder_length, num_heads, key_dim)`: the encoder's
    keys and values, written at `cross_attention_cache_update_index=0` and reused at
    None. The cross-attention's rows are at the decoder positions
    `self_attention_cache_update_index + t` (a ValueError where a modification needs
    them and the index is None), its keys at `0 .. encoder_length - 1`, as on whole
    sequences; its mask (the encoder's padding) is taken to be the same for every
    decoder position (`convatt.layers.core.attention_cache`).

    Args:
        attention_options: dict. Modification options of `convatt.layers.MultiHeadAttention`
            for the self-attention.
        cross_attention_options: dict or None. Those of the cross-attention; None: none.
        attention_weight_order: as `TransformerEncoder`'s.
        *args, **kwargs: as `keras_hub.layers.TransformerDecoder`.

    Example:
    ```python
    from convatt.layers.keras_hub_blocks import TransformerDecoder

    decoder_in, encoder_out = keras.Input((None, 64)), keras.Input((None, 64))
    y = TransformerDecoder(intermediate_dim=128, num_heads=4,
                           attention_options={"attention_conv": "2d"})(decoder_in, encoder_out)
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
     - [Golovneva et al., 2025, Multi-Token Attention](https://arxiv.org/abs/2504.00927)
    """

    def __init__(
        self,
        *args,
        attention_options: dict[str, Any] | None = None,
        cross_attention_options: dict[str, Any] | None = None,
        attention_weight_order: str = "keras",
        **kwargs,
    ):
        shapes = [kwargs.pop(name, None) for name in ("decoder_sequence_shape", "encoder_sequence_shape")]
        super().__init__(*args, **kwargs)  # (unbuilt: KerasHub builds here when given the shapes)
        self.attention_weight_order = attention_weight_order
        self.attention_options = dict(attention_options or {})
        self.cross_attention_options = None if cross_attention_options is None else dict(cross_attention_options)
        if shapes[0]:  # a saved decoder: built now, as KerasHub's, before its weights load
            self.build(*shapes)

    @staticmethod
    def _causal(options: dict[str, Any]) -> dict[str, Any]:
        return {**options, "conv_causal": True} if options.get("attention_conv") else dict(options)

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        super().build(decoder_sequence_shape, encoder_sequence_shape)
        self_options = self._causal(self.attention_options)
        _replace_attention(self, "_self_attention_layer", decoder_sequence_shape, decoder_sequence_shape, self_options)
        if self._cross_attention_layer is not None:
            cross = self._causal(self.cross_attention_options or {})
            _replace_attention(self, "_cross_attention_layer", decoder_sequence_shape, encoder_sequence_shape, cross)

    def _cross_query_slots(self) -> int:
        """1 where the cross-attention has a convolution (its decoder queries: one more slot of
        the self-attention cache, the cache every step threads through), else 0."""
        cross = self._cross_attention_layer
        return int(cross is not None and bool(cross.attention_conv))

    def self_attention_cache_shape(self, batch_size: int, max_length: int) -> tuple[int, ...]:
        """The shape of the self-attention's cache (the decoder must be built): the self-attention's
        slots (keys, values, and with a convolution queries), then, where the cross-attention has a
        convolution, the cross-attention's queries (its heads and key_dim are the self-attention's)."""
        shape = attention_cache.cache_shape(self._self_attention_layer, batch_size, max_length)
        return (shape[0], shape[1] + self._cross_query_slots(), *shape[2:])

    def cross_attention_cache_shape(self, batch_size: int, encoder_length: int) -> tuple[int, ...]:
        """The shape of the cross-attention's cache, KerasHub's `(batch, 2, encoder_length, num_heads,
        key_dim)` (the decoder must be built)."""
        return attention_cache.cache_shape(self._cross_attention_layer, batch_size, encoder_length, cross=True)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        use_causal_mask=True,
        training=None,
    ):
        """KerasHub's decoder call, every row as KerasHub computes it (padded rows attend as any row),
        with its cross-attention told what KerasHub's is not: the decoder's padding (with a convolution
        it would reach real rows; `_attend`), and, cached, the decoder position and the earlier decoder
        queries (kept as the self-attention cache's last slot)."""
        self._check_call(encoder_sequence, self_attention_cache, cross_attention_cache)
        mask = self._compute_self_attention_mask(
            decoder_sequence, decoder_padding_mask, decoder_attention_mask, use_causal_mask,
            self_attention_cache, self_attention_cache_update_index,
        )  # fmt: skip
        padding = decoder_padding_mask if decoder_padding_mask is not None else keras_mask(decoder_sequence)
        cache, queries, position = self_attention_cache, None, None
        if encoder_sequence is not None and cross_attention_cache is not None:
            position = self._cross_query_position(self_attention_cache, self_attention_cache_update_index)
            cache, queries = self._split_cache(self_attention_cache)
        own = {"attention_mask": mask, "cache": cache, "cache_update_index": self_attention_cache_update_index}
        x, cache = self._attention_block("self", decoder_sequence, own, training)
        if encoder_sequence is not None:
            cross = self._cross_arguments(encoder_sequence, encoder_padding_mask, encoder_attention_mask)
            if cross_attention_cache is not None:
                cross = self._cached_cross_arguments(
                    cross, cross_attention_cache, cross_attention_cache_update_index, queries, position
                )  # fmt: skip
            x, cross_attention_cache, queries = self._cross_block(x, encoder_sequence, cross, padding, training)
        x = self._feedforward_block(x, training)
        return self._outputs(x, cache, queries, cross_attention_cache, encoder_sequence is not None)

    def _check_call(self, encoder_sequence, self_attention_cache, cross_attention_cache) -> None:
        """KerasHub's checks of a call: the encoder given as the decoder was built, both caches or none."""
        built_with = self._cross_attention_layer is not None
        if built_with != (encoder_sequence is not None):
            raise ValueError(
                f"{self.name}: built {'with' if built_with else 'without'} cross-attention, called "
                f"{'without' if built_with else 'with'} encoder_sequence: the call's arguments must not change "
                "(layer(decoder_sequence, encoder_sequence) or layer(decoder_sequence))."
            )
        if built_with and (self_attention_cache is None) != (cross_attention_cache is None):
            raise ValueError(
                f"{self.name}: with cross-attention, self_attention_cache and cross_attention_cache are both "
                "given or both None."
            )

    def _attention_block(self, which: str, x, arguments: dict, training, value=None, padding=None):
        """A residual attention block as KerasHub's (`which`: "self" or "cross"): `(x, the call's
        further outputs: None, the cache, or (cache, query cache))`."""
        layer, norm = getattr(self, f"_{which}_attention_layer"), getattr(self, f"_{which}_attention_layer_norm")
        residual = x
        x = norm(x) if self.normalize_first else x
        output = self._attend(layer, x, x if value is None else value, arguments, training, padding)
        rest = None
        if arguments.get("cache") is not None:
            output, *rest = output
            rest = rest[0] if len(rest) == 1 else tuple(rest)
        x = getattr(self, f"_{which}_attention_dropout")(output, training=training) + residual
        return (x if self.normalize_first else norm(x)), rest

    @staticmethod
    def _attend(layer, query, value, arguments: dict, training, padding=None):
        """The attention called as KerasHub calls its own, which takes no query mask: padded decoder rows
        attend as every row (the query's Keras mask would mask them: an all-True `query_mask` keeps it
        out). Where `padding` (the decoder's) is known and a convolution mixes rows, the real rows come
        from a second call with it as the query mask, so that they read no pad row."""
        if arguments.get("cache") is not None:  # a cached step: its tokens are real
            return layer(query=query, value=value, training=training, **arguments)
        every = layer(query=query, value=value, training=training, query_mask=ops.ones(ops.shape(query)[:2], "bool"),
                      **arguments)  # fmt: skip
        if padding is None or not layer.attention_conv:
            return every
        real = layer(query=query, value=value, training=training, query_mask=padding, **arguments)
        return ops.where(ops.expand_dims(ops.cast(padding, "bool"), -1), real, every)

    @staticmethod
    def _cross_arguments(encoder_sequence, encoder_padding_mask, encoder_attention_mask) -> dict:
        """The cross-attention's arguments on whole sequences: KerasHub's mask."""
        mask = merge_padding_and_attention_mask(encoder_sequence, encoder_padding_mask, encoder_attention_mask)
        return {"attention_mask": mask}

    @staticmethod
    def _cached_cross_arguments(arguments: dict, cache, index, queries, position) -> dict:
        """A cached step's: the cache, and where a modification needs them the decoder position and
        the earlier decoder queries (a step's queries are real tokens: no query mask)."""
        arguments = {"attention_mask": arguments["attention_mask"], "cache": cache, "cache_update_index": index}
        if position is not None:
            arguments["query_position"] = position
        if queries is not None:
            arguments["query_cache"] = queries
        return arguments

    def _cross_block(self, x, encoder_sequence, arguments: dict, padding, training):
        """The cross-attention block: `(x, cross cache or None, decoder queries or None)`."""
        x, rest = self._attention_block("cross", x, arguments, training, value=encoder_sequence, padding=padding)
        return (x, *rest) if isinstance(rest, tuple) else (x, rest, None)

    def _feedforward_block(self, x, training):
        residual = x
        x = self._feedforward_layer_norm(x) if self.normalize_first else x
        x = self._feedforward_output_dense(self._feedforward_intermediate_dense(x))
        x = self._feedforward_dropout(x, training=training) + residual
        return x if self.normalize_first else self._feedforward_layer_norm(x)

    @staticmethod
    def _outputs(x, cache, queries, cross_cache, crossed: bool):
        """KerasHub's outputs; the cross-attention's decoder queries back into the self-attention cache."""
        if cache is None:
            return x
        if queries is not None:
            cache = ops.concatenate([cache, ops.expand_dims(queries, 1)], axis=1)
        return (x, cache, cross_cache) if crossed else (x, cache)

    def _cross_query_position(self, self_attention_cache, index):
        """The decoder position a cached cross-attention call needs (None where it needs none)."""
        cross = self._cross_attention_layer
        needs = attention_cache.needs_query_position(cross)
        if needs and index is None:
            raise ValueError(
                f"{self.name}: a cross-attention cache with {', '.join(needs)} needs the decoder position; "
                "pass self_attention_cache_update_index (the position of the first new token)."
            )
        cross.check_lengths(self_attention_cache.shape[2], None)  # the decoder positions, up to max_len
        return index

    def _split_cache(self, self_attention_cache):
        """(the self-attention's own cache, the cross-attention's queries or None)."""
        if not self._cross_query_slots():
            return self_attention_cache, None
        slots = self_attention_cache.shape[1]
        expected = self.self_attention_cache_shape(None, None)[1]
        if len(self_attention_cache.shape) != 5 or slots != expected:
            raise ValueError(
                f"{self.name}: with a convolution in the cross-attention the self_attention_cache has {expected} "
                f"slots (the last: the cross-attention's queries); received shape {tuple(self_attention_cache.shape)}. "
                "Make it with self_attention_cache_shape(batch_size, max_length)."
            )
        return self_attention_cache[:, : slots - 1], self_attention_cache[:, slots - 1]

    def get_config(self) -> dict[str, Any]:
        return {
            **super().get_config(),
            "attention_options": self.attention_options,
            "cross_attention_options": self.cross_attention_options,
            "attention_weight_order": self.attention_weight_order,
        }

    @classmethod
    def from_config(cls, config: dict[str, Any]):
        return super().from_config({**OLD_WEIGHT_ORDER, **config})
