"""A small causal transformer of convatt's `MultiHeadAttention`, one named variant's modifications on.

    tokens -> Embedding (+ PositionEmbedding for PE[add]) -> num_layers x [
        x + Dropout(MHA(LN(x), causal)),  x + Dropout(FF(LN(x)))
    ] -> LN -> Dense(symbols): logits of the next symbol at every position

As in the tagger (`convatt.model.variants.attention_options`), +P and +R act in the first
layer only; every modification is causal under `use_causal_mask` (no output depends on a
later symbol). +Conv and +Conv2d use the paper's
kernel (3) after the softmax; +Conv2d[pre] is Multi-Token Attention's key-query convolution
before the softmax (2 queries x 9 keys); a variant's own `conv_kernel` replaces either.
"""

from __future__ import annotations

import keras

from convatt.layers import MultiHeadAttention, PositionEmbedding
from convatt.model.variants import attention_options
from convatt.sequence.config import SequenceModelConfig

ACCURACY = "sparse_categorical_accuracy"  # the compiled metric EpochMeter reads, as the tagger's


def layer_options(config: SequenceModelConfig, index: int) -> dict:
    """`MultiHeadAttention`'s modification options of layer `index` (0 = first): the variant's
    (`attention_options`) with this model's convolution kernels and, where weights are per
    position, its length."""
    spec = config.spec
    pre = spec.conv_before_softmax and spec.attention_conv == "2d"
    kernel = config.pre_softmax_kernel if pre else config.post_softmax_kernel
    options = attention_options(spec, index, conv_kernel_size=kernel)
    if options["position_interaction"] or options["relative_bias"] or spec.attention_conv == "1d":
        options["max_len"] = config.max_len
    return options


def _block(x, config: SequenceModelConfig, index: int):
    d, heads = config.d_model, config.num_heads
    h = keras.layers.LayerNormalization(epsilon=1e-5, name=f"ln_attention_{index + 1}")(x)
    attention = MultiHeadAttention(heads, d // heads, name=f"attention_{index + 1}", **layer_options(config, index))
    h = attention(h, h, use_causal_mask=True)
    x = keras.layers.Add()([x, keras.layers.Dropout(config.dropout)(h)])
    h = keras.layers.LayerNormalization(epsilon=1e-5, name=f"ln_ff_{index + 1}")(x)
    h = keras.layers.Dense(config.ff_dim, activation="gelu", name=f"ff_in_{index + 1}")(h)
    h = keras.layers.Dense(d, name=f"ff_out_{index + 1}")(h)
    return keras.layers.Add()([x, keras.layers.Dropout(config.dropout)(h)])


def build_causal_model(config: SequenceModelConfig, n_symbols: int, jit_compile: bool | str = "auto") -> keras.Model:
    """The compiled model: (batch, max_len) symbol ids -> (batch, max_len, n_symbols) logits,
    trained with Adam on the cross-entropy of the positions weighted 1 (`sample_weight`)."""
    tokens = keras.Input((config.max_len,), dtype="int32", name="symbols")
    x = keras.layers.Embedding(n_symbols, config.d_model, name="embedding")(tokens)
    if config.spec.position_embedding == "add":
        x = keras.layers.Add()([x, PositionEmbedding(config.max_len, name="positions")(x)])
    x = keras.layers.Dropout(config.dropout)(x)
    for index in range(config.num_layers):
        x = _block(x, config, index)
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="ln_final")(x)
    logits = keras.layers.Dense(n_symbols, name="logits")(x)
    model = keras.Model(tokens, logits, name=f"causal_{config.variant.replace('-', '_')}")
    if jit_compile == "auto":  # XLA: 1.7x faster a batch on a 2-core CPU under TensorFlow too (measured)
        jit_compile = True
    model.compile(
        optimizer=keras.optimizers.Adam(config.learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name=ACCURACY)],
        jit_compile=jit_compile,
    )
    return model
