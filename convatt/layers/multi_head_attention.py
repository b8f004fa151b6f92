"""Keras' `MultiHeadAttention` with the modifications of Dufter et al. (2020), causal-safe."""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers import attention_cache
from convatt.layers.modifications import MODIFICATION_OPTIONS, ModifiedAttention, attention_context


@keras.saving.register_keras_serializable(package="convatt")
class MultiHeadAttention(ModifiedAttention, keras.layers.MultiHeadAttention):
    """`keras.layers.MultiHeadAttention` with convatt's attention modifications.

    A drop-in replacement for Keras' layer: the same constructor arguments, the
    same call (self- and cross-attention, `attention_mask`, the inputs' Keras
    masks, `use_causal_mask`, `return_attention_scores`, `training`), the same
    projections and output projection; plus the modifications of Dufter,
    Schmitt & Schütze (2020) and their neighbours, with the names and meanings
    of `SelfAttention`'s options (one implementation, `convatt.layers.modifications`).
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

    Causality: with `use_causal_mask=True` no output depends on a later token,
    whatever the modifications: later keys are masked before and after the
    softmax, the convolutions never read a masked entry (masked scores are 0
    before a convolution of the scores, masked weights 0 in the attention it
    convolves) and their query taps lie on past rows only (`i - k + 1 .. i`, a
    causal kernel along the queries, as Multi-Token Attention's). Under any
    lower-triangular `attention_mask` (a causal mask built by hand, e.g.
    KerasHub's decoders) the convolutions keep their centred taps but drop those
    on later rows; `conv_causal=True` aligns them on the past for every call.
    In a decoder's cross-attention, where the queries are causal but the mask
    is not, set `conv_causal=True`. Without a causal mask (the paper's
    bidirectional setting) the computation is exactly the paper's.

    Lengths: only `position_interaction`, `relative_bias` and
    `attention_conv="1d"` have weights per position; they need `max_len` and
    take no longer query or key. Every other modification takes any length,
    and the layer can be built with unknown lengths.

    Dtype policies: sublayers get this layer's policy; the scores, from
    `Q K^T` on, are float32 up to and including the softmax and the
    convolution when a modification is on (the attention is cast to the compute
    dtype when it meets the values), as in `SelfAttention`.

    Args:
        num_heads, key_dim, value_dim, dropout, use_bias, output_shape,
            attention_axes, kernel_initializer, bias_initializer, ...: as
            `keras.layers.MultiHeadAttention`. With a modification on, the
            inputs must be `(batch, length, features)` (one attention axis)
            and `flash_attention` must be off.
        max_len: int or None. Longest query / key length, for the
            modifications with weights per position only.
        position_interaction: bool. Add learnable `A^p` (SAN+P). Needs `max_len`.
        relative_bias: bool. Add learnable relative biases `A^r` (SAN+R). Needs
            `max_len`.
        relative_bias_parameterization: `"lookup"` (the paper's text) or
            `"circulant"` (the paper's code); see `RelativeBias`.
        temperature: bool. Learnable scalar per head for its queries, keys and
            values (+Temp).
        relative_position_representation: int or None. Shaw et al.'s relative
            position representations with this clipping distance.
        alibi: bool. Add symmetric ALiBi biases (Press et al.).
        attention_conv: None, `"1d"` (+Conv; needs `max_len`) or `"2d"` (+Conv2d).
        conv_kernel_size: int, or for `"2d"` a pair `(query_taps, key_taps)`,
            e.g. `(2, 9)`: Multi-Token Attention's key-query kernel. Defaults to 3.
        conv_before_softmax: bool. Convolve the scores before the softmax (no
            activation), instead of the weights after it (the paper).
        conv_causal: bool. Put the convolutions' query taps on past rows in
            every call, not only under `use_causal_mask`.
        talking_heads: bool. Talking-heads attention (Shazeer et al. 2020).
        **kwargs: the other arguments of `keras.layers.MultiHeadAttention`.

    Call arguments:
        query: `(batch_size, query_len, query_dim)`.
        value: `(batch_size, key_len, value_dim_in)`.
        key: optional `(batch_size, key_len, key_dim_in)`; `value` if None.
        attention_mask: optional boolean `(batch_size, query_len, key_len)`;
            True = attend.
        return_attention_scores: bool. Also return the attention matrix
            (after the convolution, before dropout).
        training: bool. Dropout on the attention in training.
        use_causal_mask: bool. A causal mask (query `i` attends keys `<= i`),
            and the convolutions aligned on past queries.
        cache: optional float `(batch_size, slots, max_length, num_heads, key_dim)`
            (`empty_cache`): decode a few tokens at a time, KerasHub's way; the
            call then returns `(output, cache)` (or `(output, attention, cache)`).
            Slots: keys, values, and with a convolution the queries
            (`convatt.layers.attention_cache`); every modification decodes exactly.
        cache_update_index: int or int tensor: the position of `query`'s first
            token, where the cache is updated.

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
        num_heads: int,
        key_dim: int,
        value_dim: int | None = None,
        max_len: int | None = None,
        temperature: bool = False,
        **kwargs,
    ):
        options = {name: kwargs.pop(name) for name in MODIFICATION_OPTIONS if name in kwargs}
        super().__init__(num_heads, key_dim, value_dim=value_dim, **kwargs)
        self.max_len = None if max_len is None else int(max_len)
        self.temperature = bool(temperature)
        self._causal_call = False
        self._init_modifications(options)
        self._modified = self.temperature or any(True for _ in self._active())
        if self._modified and self._flash_attention:
            raise ValueError(
                "flash_attention computes no attention matrix for the modifications to change; "
                "turn it off, or the modifications."
            )

    @property
    def modification_dims(self) -> tuple[int, int]:
        """`(key_dim, value_dim)` of a head."""
        return self._key_dim, self._value_dim

    def build(self, query_shape, value_shape, key_shape=None):
        super().build(query_shape, value_shape, key_shape)
        if not self._modified:
            return
        if len(query_shape) != 3 or len(value_shape) != 3 or self._attention_axes != (1,):
            raise ValueError(
                f"{self.name}: the modifications take inputs (batch, length, features) with one "
                f"attention axis; received query {query_shape}, value {value_shape}, "
                f"attention_axes {self._attention_axes}."
            )
        if self.temperature:
            self.temperature_weight = self.add_weight(name="temperature", shape=(3, self.num_heads), initializer="ones")
        scores_shape = (query_shape[0], self.num_heads, query_shape[1], value_shape[1])
        self._build_modifications(scores_shape, (query_shape[0], query_shape[1], self.num_heads, self._key_dim))

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
    ):
        if cache is not None or cache_update_index is not None:  # one token at a time: attention_cache
            return attention_cache.cached_call(
                self, query, value, key, cache, cache_update_index, attention_mask, use_causal_mask,
                return_attention_scores, training,
            )  # fmt: skip
        # Keras' call passes its (causal) mask to `_compute_attention` but not the flag:
        # the convolutions need it to align their query taps on the past.
        self._causal_call = bool(use_causal_mask)
        return super().call(
            query,
            value,
            key=key,
            query_mask=query_mask,
            value_mask=value_mask,
            key_mask=key_mask,
            attention_mask=attention_mask,
            return_attention_scores=return_attention_scores,
            training=training,
            use_causal_mask=use_causal_mask,
        )

    def empty_cache(self, batch_size: int, max_length: int):
        """A zero cache for decoding up to `max_length` tokens (`convatt.layers.attention_cache`)."""
        return attention_cache.empty_cache(self, batch_size, max_length)

    def _with_temperature(self, query, key, value):
        if not self.temperature:
            return query, key, value
        gamma = ops.cast(self.temperature_weight, query.dtype)  # (3, heads)
        return query * gamma[0][:, None], key * gamma[1][:, None], value * gamma[2][:, None]

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        if not self._modified:
            extra = {"use_causal_mask": True} if use_causal_mask else {}
            return super()._compute_attention(
                query, key, value, attention_mask, training, return_attention_scores, **extra
            )
        query, key, value = self._with_temperature(query, key, value)
        if use_causal_mask:  # (Keras passes the flag only when no mask was built)
            causal = self._compute_causal_mask(query, value)
            attention_mask = causal if attention_mask is None else ops.logical_and(attention_mask, causal)
        keep = None if attention_mask is None else ops.expand_dims(ops.cast(attention_mask, "bool"), 1)
        causal = self._causal_call or use_causal_mask or self.conv_causal
        _, attention = self._attention_maps(query, key, attention_context(query, keep, causal))
        dropped = self._dropout_layer(ops.cast(attention, self.compute_dtype), training=training)
        output = ops.einsum(self._combine_equation, dropped, value)
        if self._relative_position is not None:
            value_term = self._relative_position.value_term(dropped)
            output = ops.cast(ops.cast(output, "float32") + value_term, self.compute_dtype)
        return output, ops.cast(attention, self.compute_dtype)

    def get_config(self) -> dict[str, Any]:
        config = super().get_config()
        config.update({"max_len": self.max_len, "temperature": self.temperature, **self._modification_config()})
        return config
