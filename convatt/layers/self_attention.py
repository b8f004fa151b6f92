"""Multi-head self-attention with the modifications of Dufter et al. (2020).

`SelfAttention` is driven by `MODIFICATIONS`, one ordered table of the ways to
modify the attention: each row names the constructor options that turn it on, the
sublayer it makes (a layer file of its own) and the stage at which that sublayer
acts on the attention. A new modification is a layer file, one row here and, for
the tagger, one field of `convatt.model.variants.Variant` of the same name as its flag.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import keras
from keras import ops

from convatt.layers._utils import combine_attention_masks, large_negative, per_head_initializer
from convatt.layers.alibi_bias import AlibiBias
from convatt.layers.attention_conv1d import AttentionConv1D
from convatt.layers.attention_conv2d import AttentionConv2D
from convatt.layers.position_interaction import PositionInteraction
from convatt.layers.relative_bias import RelativeBias
from convatt.layers.relative_position_representation import RelativePositionRepresentation
from convatt.layers.talking_heads import TalkingHeadsProjection

_CONVS = (None, "1d", "2d")

STAGES = ("scores", "logits", "weights", "attention")
"""Where a modification acts, in the order of the computation:
    scores     adds a term to the scaled scores `Q K^T / sqrt(d_h)` (float32)
    logits     transforms the scores just before the softmax (masked scores are set to
               a large negative number after this stage)
    weights    transforms the softmax's weights
    attention  transforms the weights into the matrix multiplied with the values
               (masked pairs are set to 0 again after it)
Within a stage, modifications act in table order."""


def _optional_int(value) -> int | None:
    return None if value is None else int(value)


def _same(value):
    return value


@dataclass(frozen=True)
class Modification:
    """One row of `MODIFICATIONS`.

    Attributes:
        name: the sublayer's name: its weights' path and its key in `SelfAttention.modifications`.
        attr: the `SelfAttention` attribute holding the sublayer (its path in `.keras` files:
            never rename it, or saved models stop loading).
        flag: the constructor option that turns it on (truthy, or not None for an int option).
        options: the constructor options it adds, with their defaults and converters
            (`flag` among them); they are attributes of the layer and part of its config.
        make: `(layer, name, dtype_policy) -> sublayer`.
        stage: one of `STAGES`, or `layer -> stage` when an option moves it.
        apply: `(layer, sublayer, tensor, query, keep) -> tensor`, float32 in and out.
        build: `(sublayer, scores_shape, query_shape) -> None`; default `sublayer.build(scores_shape)`.
    """

    name: str
    attr: str
    flag: str
    options: dict[str, tuple[Any, Callable[[Any], Any]]]
    make: Callable[..., keras.layers.Layer]
    stage: str | Callable[[Any], str]
    apply: Callable[..., Any]
    build: Callable[..., None] = field(default=lambda sublayer, scores_shape, query_shape: sublayer.build(scores_shape))

    def is_on(self, layer) -> bool:
        value = getattr(layer, self.flag)
        return value is not None and value is not False

    def stage_of(self, layer) -> str:
        return self.stage(layer) if callable(self.stage) else self.stage


def _add(layer, sublayer, scores, query, keep):
    return sublayer.add_float32(scores)


def _add_with_query(layer, sublayer, scores, query, keep):
    return sublayer.add_float32(scores, query)


def _mix_heads(layer, sublayer, x, query, keep):
    return ops.cast(sublayer(x), "float32")


def _convolve(layer, sublayer, x, query, keep):
    """Before the softmax: the scores, masked ones set to 0 first (no leak into their
    neighbours); after it: the weights, masked pairs set to 0 again after the convolution."""
    if layer.conv_before_softmax:
        if keep is not None:
            x = ops.where(keep, x, ops.zeros_like(x))
        return sublayer.convolve_float32(x)
    convolved = sublayer.convolve_float32(x)
    return convolved if keep is None else convolved * ops.cast(keep, "float32")


def _make_conv(layer, name, policy):
    activation = None if layer.conv_before_softmax else "relu"
    if layer.attention_conv == "1d":
        return AttentionConv1D(
            layer.max_len,
            layer.num_heads,
            kernel_size=layer.conv_kernel_size,
            activation=activation,
            name=name,
            dtype=policy,
        )
    return AttentionConv2D(
        layer.num_heads, kernel_size=layer.conv_kernel_size, activation=activation, name=name, dtype=policy
    )


MODIFICATIONS: tuple[Modification, ...] = (
    Modification(
        "position_interaction",
        "_position_interaction",
        "position_interaction",
        {"position_interaction": (False, bool)},
        lambda layer, name, policy: PositionInteraction(layer.max_len, layer.num_heads, name=name, dtype=policy),
        "scores",
        _add,
    ),
    Modification(
        "relative_bias",
        "_relative_bias",
        "relative_bias",
        {"relative_bias": (False, bool), "relative_bias_parameterization": ("lookup", _same)},
        lambda layer, name, policy: RelativeBias(
            layer.max_len,
            layer.num_heads,
            parameterization=layer.relative_bias_parameterization,
            name=name,
            dtype=policy,
        ),
        "scores",
        _add,
    ),
    Modification(
        "relative_position_representation",
        "_relative_position",
        "relative_position_representation",
        {"relative_position_representation": (None, _optional_int)},
        lambda layer, name, policy: RelativePositionRepresentation(
            layer.relative_position_representation, layer.head_dim, name=name, dtype=policy
        ),
        "scores",  # and its value term (`value_term`) in `call`
        _add_with_query,
        build=lambda sublayer, scores_shape, query_shape: sublayer.build(scores_shape, query_shape),
    ),
    Modification(
        "alibi",
        "_alibi",
        "alibi",
        {"alibi": (False, bool)},
        lambda layer, name, policy: AlibiBias(layer.num_heads, name=name, dtype=policy),
        "scores",
        _add,
    ),
    Modification(
        "attention_conv",
        "_conv",
        "attention_conv",
        {"attention_conv": (None, _same), "conv_kernel_size": (3, int), "conv_before_softmax": (False, bool)},
        _make_conv,
        lambda layer: "logits" if layer.conv_before_softmax else "attention",
        _convolve,
    ),
    Modification(
        "talking_heads_logits",
        "_talking_logits",
        "talking_heads",
        {"talking_heads": (False, bool)},
        lambda layer, name, policy: TalkingHeadsProjection(layer.num_heads, name=name, dtype=policy),
        "logits",
        _mix_heads,
    ),
    Modification(
        "talking_heads_weights",
        "_talking_weights",
        "talking_heads",
        {},
        lambda layer, name, policy: TalkingHeadsProjection(layer.num_heads, name=name, dtype=policy),
        "weights",
        _mix_heads,
    ),
)
"""The modifications, in the order their sublayers are made and their weights listed."""

MODIFICATION_OPTIONS: dict[str, tuple[Any, Callable[[Any], Any]]] = {
    option: spec for row in MODIFICATIONS for option, spec in row.options.items()
}
"""Every modification's constructor options: name -> (default, converter)."""


def _check_options(max_len, position_interaction, relative_bias, attention_conv, conv_before_softmax) -> None:
    """The option combinations `SelfAttention` cannot build, as ValueErrors that say why."""
    if attention_conv not in _CONVS:
        raise ValueError(f"attention_conv must be one of {_CONVS}; received {attention_conv!r}.")
    if conv_before_softmax and attention_conv is None:
        raise ValueError("conv_before_softmax=True needs an attention_conv ('1d' or '2d').")
    uses = (
        ("position_interaction", position_interaction),
        ("relative_bias", relative_bias),
        ('attention_conv="1d"', attention_conv == "1d"),
    )
    needs_len = [name for name, used in uses if used]
    if needs_len and max_len is None:
        raise ValueError(f"SelfAttention needs `max_len` for {', '.join(needs_len)}.")


@keras.saving.register_keras_serializable(package="convatt")
class SelfAttention(keras.layers.Layer):
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

    Masking is off unless a mask is given (the paper has none). A Keras mask
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
        max_len: int or None. Longest sequence; required by
            `position_interaction`, `relative_bias` and `attention_conv="1d"`.
            Shorter sequences are fine.
        position_interaction: bool. Add learnable `A^p` (SAN+P).
        relative_bias: bool. Add learnable relative biases `A^r` (SAN+R).
        relative_bias_parameterization: `"lookup"` (the paper's text, the
            default) or `"circulant"` (the paper's code); see `RelativeBias`.
        temperature: bool. Learnable scalar per projection matrix (+Temp).
        attention_conv: `None`, `"1d"` (+Conv) or `"2d"` (+Conv2d).
        conv_kernel_size: int. Filter width of `attention_conv`. Defaults to 3.
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
        options = {name: kwargs.pop(name, default) for name, (default, _) in MODIFICATION_OPTIONS.items()}
        super().__init__(**kwargs)
        _check_options(
            max_len,
            options["position_interaction"],
            options["relative_bias"],
            options["attention_conv"],
            options["conv_before_softmax"],
        )
        self.num_heads = int(num_heads)
        self.head_dim = int(head_dim)
        self.max_len = None if max_len is None else int(max_len)
        self.temperature = bool(temperature)
        for name, value in options.items():
            setattr(self, name, MODIFICATION_OPTIONS[name][1](value))
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True
        self._make_sublayers()

    def _make_sublayers(self) -> None:
        """The modifications' layers, in table order (the order their weights are listed),
        with this layer's dtype policy; None for those that are off."""
        for row in MODIFICATIONS:
            sublayer = row.make(self, row.name, self.dtype_policy) if row.is_on(self) else None
            setattr(self, row.attr, sublayer)

    def _active(self, stage: str | None = None):
        """(row, sublayer) of the modifications that are on, in table order; of one stage if given."""
        for row in MODIFICATIONS:
            sublayer = getattr(self, row.attr)
            if sublayer is not None and (stage is None or row.stage_of(self) == stage):
                yield row, sublayer

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ValueError(
                f"{self.name} expects inputs of shape (batch, t, input_dim) with a known input_dim; "
                f"received {input_shape}."
            )
        t = input_shape[1]
        if self.max_len is not None and t is not None and t > self.max_len:
            raise ValueError(f"{self.name} was built for max_len={self.max_len}; received t={t}.")
        input_dim = int(input_shape[-1])
        shape = (input_dim, self.num_heads, self.head_dim)
        for offset, name in enumerate(("query_kernel", "key_kernel", "value_kernel")):
            init = per_head_initializer(self.kernel_initializer, shape, (input_dim, self.head_dim), seed_offset=offset)
            setattr(self, name, self.add_weight(name=name, shape=shape, initializer=init))
        if self.temperature:
            self.temperature_weight = self.add_weight(name="temperature", shape=(3, self.num_heads), initializer="ones")
        scores_shape = (input_shape[0], self.num_heads, t, t)
        query_shape = (input_shape[0], t, self.num_heads, self.head_dim)
        for row, sublayer in self._active():
            row.build(sublayer, scores_shape, query_shape)

    def _project(self, inputs, kernel, row: int):
        projected = ops.einsum("btd,dhk->bthk", inputs, kernel)
        if self.temperature:
            projected = projected * ops.expand_dims(self.temperature_weight[row], -1)
        return projected

    def _attention_maps(self, query, key, keep):
        """(softmax attention, attention after the convolution), each `(b, h, q, k)`, float32.

        Float32 whatever the compute dtype: position terms can be large next to
        the scores (ALiBi, the masks' large negative scores), and the softmax
        and the convolution's sums would lose digits in 8 (bfloat16) or 11
        (float16) bits."""
        scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32") * (1.0 / math.sqrt(self.head_dim))
        scores = self._apply("scores", scores, query, keep)
        scores = self._apply("logits", scores, query, keep)
        if keep is not None:
            scores = ops.where(keep, scores, large_negative("float32"))
        attention = ops.softmax(scores, axis=-1)
        if keep is not None:  # also zeroes fully masked rows (uniform after the softmax)
            attention = attention * ops.cast(keep, "float32")
        convolved = self._apply("weights", attention, query, keep)
        return attention, self._apply("attention", convolved, query, keep)

    def _apply(self, stage: str, x, query, keep):
        """`x` through the modifications of `stage`, in table order."""
        for row, sublayer in self._active(stage):
            x = row.apply(self, sublayer, x, query, keep)
        return x

    def attention_probabilities(self, inputs, mask=None, attention_mask=None):
        """The attention of this layer for `inputs`, before and after the convolution.

        For looking inside a trained layer: the same computation as `call`, stopped
        at the attention matrix.

        Args:
            inputs: tensor `(batch_size, t, input_dim)`, what `call` receives.
            mask, attention_mask: as in `call`.

        Returns:
            `(softmax, convolved)`, each `(batch_size, num_heads, t, t)`: the
            softmax over the keys, and the matrix `call` multiplies with the values
            (after the talking heads' weight mixing and `attention_conv`, not
            renormalised; the softmax itself when the layer has neither, or
            convolves before the softmax). Masked pairs are 0 in both.
        """
        query = self._project(inputs, self.query_kernel, 0)
        key = self._project(inputs, self.key_kernel, 1)
        return self._attention_maps(query, key, combine_attention_masks(mask, attention_mask))

    @property
    def modifications(self) -> dict:
        """The modification sublayers this layer has, by name (`MODIFICATIONS`' names):
        `position_interaction`, `relative_bias`, `relative_position_representation`,
        `alibi`, `attention_conv`, `talking_heads_logits`, `talking_heads_weights`."""
        return {row.name: sublayer for row, sublayer in self._active()}

    def call(self, inputs, mask=None, attention_mask=None, return_attention_scores: bool = False):
        query = self._project(inputs, self.query_kernel, 0)  # (b, t, h, d)
        key = self._project(inputs, self.key_kernel, 1)
        value = self._project(inputs, self.value_kernel, 2)
        _, attention = self._attention_maps(query, key, combine_attention_masks(mask, attention_mask))
        outputs = ops.einsum("bhqk,bkhd->bqhd", ops.cast(attention, self.compute_dtype), value)
        if self._relative_position is not None:
            value_term = self._relative_position.value_term(attention)
            outputs = ops.cast(ops.cast(outputs, "float32") + value_term, self.compute_dtype)
        shape = ops.shape(outputs)
        outputs = ops.reshape(outputs, (shape[0], shape[1], self.num_heads * self.head_dim))
        if return_attention_scores:
            return outputs, ops.cast(attention, self.compute_dtype)
        return outputs

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[1], self.num_heads * self.head_dim)

    def compute_output_spec(self, inputs, mask=None, attention_mask=None, return_attention_scores: bool = False):
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
                "max_len": self.max_len,
                "temperature": self.temperature,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                **{name: getattr(self, name) for name in MODIFICATION_OPTIONS},
            }
        )
        return config
