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


def block_layer(part: str, index: int) -> str:
    """The name of block `index`'s (0 = first) layer `part`: "ln_attention", "attention", "ln_ff",
    "ff_in" or "ff_out" (the names `causal_step` finds the layers by, and saved models know)."""
    return f"{part}_{index + 1}"


def _block(x, config: SequenceModelConfig, index: int):
    d, heads = config.d_model, config.num_heads
    h = keras.layers.LayerNormalization(epsilon=1e-5, name=block_layer("ln_attention", index))(x)
    options = layer_options(config, index)
    attention = MultiHeadAttention(heads, d // heads, name=block_layer("attention", index), **options)
    h = attention(h, h, use_causal_mask=True)
    x = keras.layers.Add()([x, keras.layers.Dropout(config.dropout)(h)])
    h = keras.layers.LayerNormalization(epsilon=1e-5, name=block_layer("ln_ff", index))(x)
    h = keras.layers.Dense(config.ff_dim, activation="gelu", name=block_layer("ff_in", index))(h)
    h = keras.layers.Dense(d, name=block_layer("ff_out", index))(h)
    return keras.layers.Add()([x, keras.layers.Dropout(config.dropout)(h)])


def count_blocks(model: keras.Model) -> int:
    """How many blocks a `build_causal_model` model has."""
    return sum(1 for layer in model.layers if isinstance(layer, MultiHeadAttention))


def empty_caches(model: keras.Model, batch_size: int = 1) -> tuple:
    """Each block's empty attention cache for `causal_step`, as long as the model's input."""
    length = int(model.input_shape[1])
    return tuple(
        model.get_layer(block_layer("attention", i)).empty_cache(batch_size, length) for i in range(count_blocks(model))
    )


def causal_step(model: keras.Model, tokens, caches: tuple, index):
    """`(logits (batch, t, symbols), caches)`: the model of `build_causal_model` (inference, no
    dropout) on the symbols `tokens` `(batch, t)` at positions `index ..`, through each block's
    attention cache (`empty_caches` at first): the whole model's logits at those positions."""
    get, caches = model.get_layer, list(caches)
    x = get("embedding")(tokens)
    if any(layer.name == "positions" for layer in model.layers):
        rows = keras.ops.cast(index, "int32") + keras.ops.arange(keras.ops.shape(tokens)[1], dtype="int32")
        x = x + keras.ops.expand_dims(keras.ops.take(get("positions").embeddings, rows, axis=0), 0)
    for i in range(len(caches)):
        h = get(block_layer("ln_attention", i))(x)
        h, caches[i] = get(block_layer("attention", i))(
            h, h, cache=caches[i], cache_update_index=index, use_causal_mask=True
        )
        x = x + h
        x = x + get(block_layer("ff_out", i))(get(block_layer("ff_in", i))(get(block_layer("ln_ff", i))(x)))
    return get("logits")(get("ln_final")(x)), tuple(caches)


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
