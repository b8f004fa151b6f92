"""Keras 3 layers of Dufter, Schmitt & Schütze (2020) and related position methods.

Attention tensors use the layout `(batch, num_heads, query_len, key_len)`.
`MultiHeadAttention` is the drop-in for `keras.layers.MultiHeadAttention` (causal,
cross-attention, any length); `SelfAttention` is the paper's tagger's layer. Both
compute the modifications of `convatt.layers.core.modifications`.
"""

from convatt.layers.attention_conv1d import AttentionConv1D
from convatt.layers.attention_conv2d import AttentionConv2D
from convatt.layers.core.multi_head_attention import MultiHeadAttention
from convatt.layers.core.self_attention import SelfAttention
from convatt.layers.denser_self_attention import DenserSelfAttention
from convatt.layers.narrowing_self_attention import NarrowingSelfAttention
from convatt.layers.position_embedding import PositionEmbedding
from convatt.layers.position_interaction import PositionInteraction
from convatt.layers.relative_bias import RelativeBias
from convatt.layers.relative_position_representation import RelativePositionRepresentation
from convatt.layers.sinusoidal_position_encoding import SinusoidalPositionEncoding
from convatt.layers.symmetric_alibi_bias import SymmetricAlibiBias
from convatt.layers.talking_heads import TalkingHeadsProjection
from convatt.layers.temperature_dense import TemperatureDense

__all__ = [
    "SymmetricAlibiBias",
    "AttentionConv1D",
    "AttentionConv2D",
    "DenserSelfAttention",
    "MultiHeadAttention",
    "NarrowingSelfAttention",
    "PositionEmbedding",
    "PositionInteraction",
    "RelativeBias",
    "RelativePositionRepresentation",
    "SelfAttention",
    "SinusoidalPositionEncoding",
    "TalkingHeadsProjection",
    "TemperatureDense",
]


def __getattr__(name: str):
    # 0.1.0's names, kept working with a warning: `AlibiBias` is symmetric, unlike KerasHub's
    # causal layer of that name.
    if name == "AlibiBias":
        import warnings

        warnings.warn(
            "convatt.layers.AlibiBias is now SymmetricAlibiBias (KerasHub's AlibiBias is causal; "
            "this one is not); the old name will be removed.",
            DeprecationWarning,
            stacklevel=2,
        )
        return SymmetricAlibiBias
    raise AttributeError(f"module 'convatt.layers' has no attribute {name!r}")
