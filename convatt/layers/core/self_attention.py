"""Multi-head self-attention with the modifications of Dufter et al. (2020).

The tagger's attention layer: no output projection, one input. The modifications
themselves (`MODIFICATIONS`, the table of the ways to modify the attention, and the
one implementation of it) live in `convatt.layers.core.modifications`, shared with
`convatt.layers.MultiHeadAttention`; they are imported here under their old names.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

from convatt.layers._utils import combine_attention_masks, per_head_initializer
from convatt.layers.core.modifications import MODIFICATION_OPTIONS, MODIFICATIONS, STAGES, Modification
from convatt.layers.core.modified_attention import ModifiedAttention
from convatt.layers.core.rows import call_rows

__all__ = ["MODIFICATIONS", "MODIFICATION_OPTIONS", "STAGES", "Modification", "SelfAttention"]


@keras.saving.register_keras_serializable(package="convatt")
class SelfAttention(ModifiedAttention, keras.layers.Layer):
    """Multi-head scaled dot-product self-attention, optionally modified.

    Per head `h`: `A = (X W_q)(X W_k)^T / sqrt(head_dim)`, then optionally
    `+ A^p` (`position_interaction`), `+ A^r` (`relative_bias`), Shaw et al.'s
    relative key term (`relative_position_representation`) and ALiBi biases
    (`alibi`); softmax over the keys; optionally a 1-d / 2-d convolution of the
    attention matrix (`attention_conv`, not renormalised; with
    `conv_before_softmax` it convolves the scores instead, before the softmax);
    optionally talking heads (`talking_heads`: a learned mixing of the heads'
    scores before the softmax and of their weights after it);
    `Z = attention (X W_v)` (plus Shaw et al.'s relative value term). The heads'
    `Z` are concatenated. There is no output projection and no residual
    connection (the caller adds them), as in the paper's tagger.

    With `temperature=True` each of `W_q, W_k, W_v` of each head is multiplied
    by its own learnable scalar, initialised to 1 (§2.4).

    Its operations are the published forms (`convatt.layers.forms.PUBLISHED`:
    +Conv2d as one depthwise convolution, the talking heads' mixing by an einsum,
    Shaw's gathered tables, autodiff's softmax), those the tagger's published results
    came from, so that every variant trains the same bits as then;
    `MultiHeadAttention` computes the same values in the forms for its backend,
    device and compilation (`drop_in_forms`).

    Masking is off unless a mask is given (the paper has none). Causal models:
    `use_causal_mask=True` masks every later key and puts the convolutions' query
    taps on past rows (`i - k + 1 .. i`), so no output depends on a later token;
    under any lower-triangular `attention_mask` (a causal mask built by hand) the
    centred convolutions drop their taps on later rows. Without a causal mask the
    computation is exactly the paper's. A Keras mask
    `(batch, t)` (e.g. from `Embedding(mask_zero=True)`) masks both keys and
    queries; an explicit `attention_mask` masks keys (`(batch, t)`) or
    query-key pairs (`(batch, t, t)`). Masked pairs get a large negative score
    before the softmax and are set to 0 in the attention (after the
    convolution too), so padded keys never contribute and padded queries give
    zero outputs. The Keras mask is passed on to the output.

    Padding: without a mask every position attends to every other, padding
    included, as in the paper. The outputs at the real positions then depend
    on how much padding (and which padding vectors) a sequence carries: the
    same sentence gives different outputs padded to 20 or to 60. For outputs
    that depend on the real tokens only, pass a Keras mask (e.g.
    `Embedding(mask_zero=True)`) or `attention_mask=(token_ids != 0)`; then
    appending padding leaves the real positions' outputs unchanged (up to
    float rounding).

    Dtype policies: sublayers get this layer's policy, the weights stay in the
    variable dtype (float32 under `"mixed_float16"` / `"mixed_bfloat16"`) and
    the outputs (and the returned attention) have the compute dtype. The
    projections `X W` and the product of the attention with the values run in
    the compute dtype (the bulk of the work); the scores, from `Q K^T` on, are
    float32 up to and including the softmax and the convolution: position
    terms (`A^p`, `A^r`, Shaw, ALiBi, the masks' large negative scores) are
    added in float32, and the attention is cast to the compute dtype only when
    it meets the values.

    Args:
        num_heads: int. Number of heads.
        head_dim: int. Width `d_h` of each head's queries, keys and values; the
            output width is `num_heads * head_dim`.
        max_len: int or None. Longest sequence; required by the modifications
            with weights per position (`position_interaction`, `relative_bias`,
            `attention_conv="1d"`), which take no longer input. Shorter
            sequences are fine; the other modifications take any length.
        position_interaction: bool. Add learnable `A^p` (SAN+P).
        relative_bias: bool. Add learnable relative biases `A^r` (SAN+R).
        relative_bias_parameterization: `"lookup"` (the paper's text, the
            default) or `"circulant"` (the paper's code); see `RelativeBias`.
        temperature: bool. Learnable scalar per projection matrix (+Temp).
        attention_conv: `None`, `"1d"` (+Conv) or `"2d"` (+Conv2d).
        conv_kernel_size: int. Filter width of `attention_conv`, or for "2d" a
            pair `(query_taps, key_taps)`. Defaults to 3.
        conv_causal: bool. Always put the convolutions' query taps on past rows,
            as under `use_causal_mask` (for a causal model whose masks you build
            yourself). Defaults to False.
        conv_before_softmax: bool. Apply `attention_conv` to the scores, before
            the softmax, with no activation (a ReLU would set every negative
            score to 0, so all of them would weigh alike), instead of to the
            softmax's output as in the paper; the result is then normalised.
            Masked scores are set to 0 before the convolution, so padded keys
            do not leak into their neighbours (as in Multi-Token Attention).
            The filters start as the paper's (glorot-uniform, zero bias).
        talking_heads: bool. Talking-heads attention (Shazeer et al. 2020): a
            `TalkingHeadsProjection` mixes the heads' scores just before the
            softmax and a second one their weights just after it (before any
            `attention_conv`); both start as the identity.
        relative_position_representation: int or None. If set, Shaw et al.'s
            relative position representations with this clipping distance `k`.
        alibi: bool. Add symmetric ALiBi biases (Press et al.).
        kernel_initializer: initializer of `W_q, W_k, W_v`, applied as to each
            head's own `(input_dim, head_dim)` matrix. Defaults to
            `"glorot_uniform"`.
        **kwargs: other keyword arguments passed to `keras.layers.Layer`.

    Call arguments:
        inputs: tensor `(batch_size, t, input_dim)`.
        mask: optional boolean Keras mask `(batch_size, t)`, passed
            automatically by Keras.
        attention_mask: optional boolean / 0-1 tensor, `(batch_size, t)` key
            mask or `(batch_size, t, t)` query-key mask; 1 = attend.
        return_attention_scores: bool. Also return the attention matrix.
        use_causal_mask: bool. Mask every later key (a causal model), and align
            the convolutions on past queries. Defaults to False.

    Returns (in the compute dtype):
        `(batch_size, t, num_heads * head_dim)`, or with
        `return_attention_scores=True` the tuple `(output, attention)` where
        `attention` `(batch_size, num_heads, t, t)` is the post-softmax
        (post-convolution, if any) matrix.

    Weights (in this order):
        `query_kernel`, `key_kernel`, `value_kernel` each
        `(input_dim, num_heads, head_dim)`; `temperature` `(3, num_heads)`
        (rows q, k, v) if `temperature`; then the sublayers' weights:
        `position_interaction/interactions`, `relative_bias/biases`,
        `relative_position_representation/key_embeddings` and
        `/value_embeddings`, `attention_conv/kernel` and `/bias`,
        `talking_heads_logits/kernel`, `talking_heads_weights/kernel`.

    Example:
    ```python
    x = keras.Input((60, 364))
    z = convatt.layers.SelfAttention(
        num_heads=4, head_dim=91, max_len=60,
        position_interaction=True, relative_bias=True, attention_conv="1d",
    )(x)
    y = keras.layers.Add()([x, z])  # the paper's residual
    ```

    References:
     - [Dufter, Schmitt & Schütze, 2020](https://aclanthology.org/2020.coling-main.324/)
     - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        max_len: int | None = None,
        temperature: bool = False,
        kernel_initializer: Any = "glorot_uniform",
        **kwargs,
    ):
        options = {name: kwargs.pop(name) for name in MODIFICATION_OPTIONS if name in kwargs}
        super().__init__(**kwargs)
        self.num_heads = int(num_heads)
        self.head_dim = int(head_dim)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True
        self._init_modifications({**options, "temperature": temperature}, max_len)

    @property
    def modification_dims(self) -> tuple[int, int]:
        """`(key_dim, value_dim)` of a head: both `head_dim` here."""
        return self.head_dim, self.head_dim

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"{self.name} expects inputs of shape (batch, t, input_dim) with a known input_dim; "
                f"received {input_shape}."
            )
        t = input_shape[1]
        input_dim = int(input_shape[-1])
        shape = (input_dim, self.num_heads, self.head_dim)
        for offset, name in enumerate(("query_kernel", "key_kernel", "value_kernel")):
            init = per_head_initializer(self.kernel_initializer, shape, (input_dim, self.head_dim), seed_offset=offset)
            setattr(self, name, self.add_weight(name=name, shape=shape, initializer=init))
        scores_shape = (input_shape[0], self.num_heads, t, t)
        query_shape = (input_shape[0], t, self.num_heads, self.head_dim)
        self._build_modifications(scores_shape, query_shape)

    def _projections(self, inputs, with_values: bool = True):
        """`(query, key, value)` `(b, t, h, d)` of `inputs`, after the `projections` stage (value None
        unless `with_values`)."""
        kernels = (self.query_kernel, self.key_kernel, self.value_kernel if with_values else None)
        projected = [None if k is None else ops.einsum("btd,dhk->bthk", inputs, k) for k in kernels]
        return self.projected(*projected)

    def attention_probabilities(self, inputs, mask=None, attention_mask=None, use_causal_mask: bool = False):
        """The attention of this layer for `inputs`, before and after the convolution.

        For looking inside a trained layer: the same computation as `call`, stopped
        at the attention matrix.

        Args:
            inputs: tensor `(batch_size, t, input_dim)`, what `call` receives.
            mask, attention_mask, use_causal_mask: as in `call`.

        Returns:
            `(softmax, convolved)`, each `(batch_size, num_heads, t, t)`: the
            softmax over the keys, and the matrix `call` multiplies with the values
            (after the talking heads' weight mixing and `attention_conv`, not
            renormalised; the softmax itself when the layer has neither, or
            convolves before the softmax). Masked pairs are 0 in both.
        """
        query, key, _ = self._projections(inputs, with_values=False)
        rows = call_rows(query, key, combine_attention_masks(mask, attention_mask), use_causal_mask)
        return self.attention_maps(query, key, self._modification_context(query, rows, False))

    def call(self, inputs, mask=None, attention_mask=None, return_attention_scores=False, use_causal_mask=False):
        query, key, value = self._projections(inputs)  # (b, t, h, d)
        rows = call_rows(query, key, combine_attention_masks(mask, attention_mask), use_causal_mask)
        context = self._modification_context(query, rows, False)
        _, attention = self.attention_maps(query, key, context)
        outputs = ops.einsum("bhqk,bkhd->bqhd", ops.cast(attention, self.compute_dtype), value)
        outputs = self.value_terms(outputs, attention, context)  # no dropout: the float32 attention
        shape = ops.shape(outputs)
        outputs = ops.reshape(outputs, (shape[0], shape[1], self.num_heads * self.head_dim))
        if return_attention_scores:
            return outputs, ops.cast(attention, self.compute_dtype)
        return outputs

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self.num_heads * self.head_dim)

    def compute_output_spec(self, inputs, mask=None, attention_mask=None, return_attention_scores=False, **kwargs):
        output = keras.KerasTensor(self.compute_output_shape(inputs.shape), dtype=self.compute_dtype)
        if not return_attention_scores:
            return output
        t = inputs.shape[1]
        attention = keras.KerasTensor((inputs.shape[0], self.num_heads, t, t), dtype=self.compute_dtype)
        return output, attention

    def get_config(self) -> dict:
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "head_dim": self.head_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                **self._modification_config(),
            }
        )
        return config
