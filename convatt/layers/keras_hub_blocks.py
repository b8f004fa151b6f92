"""KerasHub's transformer blocks with convatt's attention (needs the `hub` extra: keras-hub).

`TransformerEncoder` and `TransformerDecoder` are KerasHub's layers of the same names
whose attention layers are `convatt.layers.MultiHeadAttention` with the modifications
given in `attention_options`; everything else (residuals, layer norms, feed-forward,
masks, configs) is KerasHub's. Import this module explicitly; `convatt.layers` itself
does not need keras-hub.
"""

from __future__ import annotations

import contextlib
from typing import Any

import keras
from keras import ops

try:
    import keras_hub
except ImportError as error:  # the optional extra
    raise ImportError(
        "convatt.layers.keras_hub_blocks needs keras-hub: pip install 'convatt[hub]' (or pip install keras-hub)."
    ) from error

from convatt.layers import attention_cache
from convatt.layers.multi_head_attention import MultiHeadAttention

OLD_WEIGHT_ORDER = {"attention_weight_order": "modifications_first"}
"""What a block saved before its attention listed Keras' weights first gets (its file's
optimizer state is in that order); see `MultiHeadAttention`'s `weight_order`."""


@keras.saving.register_keras_serializable(package="convatt")
class CacheFreeMultiHeadAttention(MultiHeadAttention):
    """`MultiHeadAttention` inside KerasHub's blocks (the name saved models know it by).

    KerasHub's blocks pass `cache=None, cache_update_index=None` on whole sequences
    (training, scoring) and a cache when decoding a token at a time; convatt's
    `MultiHeadAttention` takes both (`convatt.layers.attention_cache`: keys, values and,
    with a convolution, queries). KerasHub's decoder gives its cross-attention only the
    encoder's mask and cache; what else it needs for a call, `TransformerDecoder` sets
    here (`_cross_attention_inputs`) and resets after.
    """

    query_padding_mask = None
    """The queries' padding `(batch, query_len)` the decoder gives its cross-attention for a
    call (KerasHub passes it the encoder's mask only); None: none."""

    query_position = None
    """For a cached cross-attention call: the decoder position of the first query; None: none."""

    query_cache = None
    """For a cached cross-attention call with a convolution: the decoder queries
    `(batch, max_length, num_heads, key_dim)`, returned updated here after the call."""

    def call(self, query, value, key=None, cache=None, cache_update_index=None, self_attention=None, **kwargs):
        kwargs["self_attention"] = self_attention  # named: Keras takes no bool among tensors in `**kwargs`
        if kwargs.get("query_mask") is None and self.query_padding_mask is not None and cache is None:
            kwargs["query_mask"] = self.query_padding_mask
        if cache is not None and self.query_position is not None:
            kwargs.update(query_position=self.query_position, query_cache=self.query_cache)
        outputs = super().call(query, value, key=key, cache=cache, cache_update_index=cache_update_index, **kwargs)
        if kwargs.get("query_cache") is not None:
            *outputs, self.query_cache = outputs
            outputs = tuple(outputs)
        return outputs


@contextlib.contextmanager
def _cross_attention_inputs(cross: CacheFreeMultiHeadAttention | None, padding=None, position=None, queries=None):
    """Within the block: `cross`'s query padding, decoder position and decoder queries of one
    decoder call (KerasHub passes none of them); reset after (None: no cross-attention)."""
    if cross is None:
        yield
        return
    cross.query_padding_mask, cross.query_position, cross.query_cache = padding, position, queries
    try:
        yield
    finally:
        cross.query_padding_mask = cross.query_position = cross.query_cache = None


def _replace_attention(block, attribute: str, shape, value_shape, options: dict[str, Any]) -> None:
    """Put convatt's attention, with KerasHub's own sizes and initialisers, in place of `attribute`."""
    theirs = getattr(block, attribute)
    # Keras' tracker keeps a replaced sublayer (and its weights) in `_layers`: take it out.
    block._layers[:] = [layer for layer in block._layers if layer is not theirs]
    ours = CacheFreeMultiHeadAttention(
        num_heads=theirs.num_heads,
        key_dim=theirs.key_dim,
        dropout=theirs.dropout,
        kernel_initializer=theirs._kernel_initializer,
        bias_initializer=theirs._bias_initializer,
        dtype=block.dtype_policy,
        name=theirs.name,
        weight_order=getattr(block, "attention_weight_order", "keras"),
        **options,
    )
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
    decoder position (`convatt.layers.attention_cache`).

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
        # KerasHub's cross-attention gets no mask of its queries (the decoder's tokens; with a
        # convolution their padding would reach real rows), nor, cached, their decoder position.
        arguments = {name: value for name, value in locals().items() if name not in ("self", "__class__")}
        cross = self._cross_attention_layer if encoder_sequence is not None else None
        padding = decoder_padding_mask
        if padding is None:
            padding = getattr(decoder_sequence, "_keras_mask", None)
        position = queries = None
        if cross is not None and cross_attention_cache is not None and self_attention_cache is not None:
            position = self._cross_query_position(self_attention_cache, self_attention_cache_update_index)
            arguments["self_attention_cache"], queries = self._split_cache(self_attention_cache)
        with _cross_attention_inputs(cross, padding, position, queries):
            outputs = super().call(**arguments)
            if queries is None:
                return outputs
            x, own, cross_cache = outputs  # the cross-attention's queries back into the self-attention cache
            return x, ops.concatenate([own, ops.expand_dims(cross.query_cache, 1)], axis=1), cross_cache

    def _cross_query_position(self, self_attention_cache, index):
        """The decoder position a cached cross-attention call needs (None where it needs none)."""
        cross = self._cross_attention_layer
        needs = attention_cache.needs_query_position(cross)
        if needs and index is None:
            raise ValueError(
                f"{self.name}: a cross-attention cache with {', '.join(needs)} needs the decoder position; "
                "pass self_attention_cache_update_index (the position of the first new token)."
            )
        cross._check_length(self_attention_cache.shape[2], None)  # the decoder positions, up to max_len
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
