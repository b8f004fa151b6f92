"""The straightforward port of the tagger, used ONLY as the baseline of `convatt bench`.

It has the same mathematics and parameter count as `convatt.model.tagger.build_tagger`, in
the structure of a direct port of the original code:

- the char CNN runs on every token position, padding included: Embedding on
  (b, t, t_char), then TimeDistributed(Conv1D) x 3 and a max over the chars
  (Keras 3's TimeDistributed calls the Conv1D once per token position, t times);
- every head is its own set of layers: Dense(head_dim, use_bias=False) (or
  TemperatureDense for +Temp) for q, k and v, PositionInteraction / RelativeBias
  built with num_heads=1, and for +Conv / +Conv2d plain Keras
  Conv1D(t, 3, same, relu) / Conv2D(1, 3, same, relu) on the head's attention
  matrix; the heads are joined with Concatenate;
- compiled without XLA.

Its inputs are {"words": (b, t), "chars": (b, t, t_char)}. `copy_weights_to_tagger`
maps its weights onto a project tagger (per-head kernels stacked into
(d, num_heads, head_dim), per-head position / conv weights stacked on a leading head
axis), so tests can check that both compute the same function.
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import layers, ops

from convatt.errors import ConvattError
from convatt.layers import (
    PositionEmbedding,
    PositionInteraction,
    RelativeBias,
    SinusoidalPositionEncoding,
    TemperatureDense,
)
from convatt.model.tagger import compile_tagger
from convatt.model.variants import TaggerConfig


def _head(x, config: TaggerConfig, first: bool, name: str):
    """One attention head on x (b, t, d) -> (b, t, head_dim)."""
    spec, t, hd = config.spec, config.max_len, config.d_model // config.num_heads

    def project(what):
        if spec.temperature:
            return TemperatureDense(hd, kernel_initializer=config.attention_initializer, name=f"{name}_{what}")(x)
        return layers.Dense(hd, use_bias=False, kernel_initializer=config.attention_initializer, name=f"{name}_{what}")(
            x
        )

    q, k, v = project("query"), project("key"), project("value")
    scores = ops.matmul(q, ops.transpose(k, (0, 2, 1))) * (1.0 / math.sqrt(hd))
    scores = ops.expand_dims(scores, 1)  # (b, 1, t, t): the layers' one-head layout
    if spec.position_interaction and first:
        scores = PositionInteraction(t, 1, name=f"{name}_position_interaction")(scores)
    if spec.relative_bias and first:
        scores = RelativeBias(
            t, 1, parameterization=config.relative_bias_parameterization, name=f"{name}_relative_bias"
        )(scores)
    attention = ops.softmax(scores, axis=-1)[:, 0]  # (b, t, t)
    if spec.attention_conv == "1d":  # over the query axis, the t key columns as channels
        attention = layers.Conv1D(t, 3, padding="same", activation="relu", name=f"{name}_attention_conv")(attention)
    elif spec.attention_conv == "2d":  # one 3x3 filter on the (query, key) image
        image = layers.Conv2D(1, 3, padding="same", activation="relu", name=f"{name}_attention_conv")(
            ops.expand_dims(attention, -1)
        )
        attention = image[..., 0]
    return ops.matmul(attention, v)


def baseline_covers(config: TaggerConfig) -> bool:
    """Whether the port has this tagger: the paper's variants (no Shaw, ALiBi or the
    attention variants beyond the paper), without masking."""
    spec = config.spec
    beyond_paper = (
        spec.shaw or spec.alibi or spec.attention != "standard" or spec.conv_before_softmax or spec.talking_heads
    )
    return not beyond_paper and not config.mask_padding


def build_baseline(
    config: TaggerConfig, n_words: int, n_chars: int, n_labels: int, word_vectors: np.ndarray | None = None
) -> keras.Model:
    """The straightforward port of `build_tagger` (same arguments; no XLA)."""
    t, tc = config.max_len, config.max_word_len
    if not baseline_covers(config):
        raise ConvattError(
            f"the benchmark baseline covers the paper's variants without masking, "
            f"not {config.variant!r} (mask_padding={config.mask_padding})"
        )
    words = keras.Input((t,), dtype="int32", name="words")
    chars = keras.Input((t, tc), dtype="int32", name="chars")
    word_embedding = layers.Embedding(
        n_words, config.word_dim, trainable=not config.pretrained_words, name="word_embedding"
    )
    x = _with_positions(config, word_embedding(words))
    h0 = layers.Concatenate(name="layer_0_input")([x, _char_features(config, n_chars, chars)])
    h = h0
    for i in range(config.num_layers):
        z = layers.Dropout(config.dropout, name=f"dropout_{i + 1}")(h)
        heads = [_head(z, config, i == 0, f"attention_{i + 1}_head_{j}") for j in range(config.num_heads)]
        residual = z if config.residual_adds_dropped else h  # the original adds the dropped tensor
        h = layers.Add(name=f"residual_{i + 1}")([residual, layers.Concatenate(name=f"attention_{i + 1}")(heads)])

    out = layers.Concatenate(name="output_features")([h0, h])
    tags = layers.Dense(n_labels, activation="softmax", name="tags")(out)
    model = keras.Model({"words": words, "chars": chars}, tags, name=f"baseline_{config.variant.replace('-', '_')}")
    if word_vectors is not None:
        word_embedding.set_weights([word_vectors.astype("float32")])
    compile_tagger(model, jit_compile=False)
    return model


def _with_positions(config: TaggerConfig, x):
    """The word embeddings `x` with the variant's absolute positions (PE added or concatenated, Sin)."""
    t = config.max_len
    if config.spec.position_embedding == "add":
        x = layers.Add(name="add_position")([x, PositionEmbedding(t, name="position_embedding")(x)])
    elif config.spec.position_embedding == "con":
        positions = PositionEmbedding(t, output_dim=config.pe_con_dim, name="position_embedding")(x)
        x = layers.Concatenate(name="concat_position")([x, positions])
    elif config.spec.position_embedding == "sin-add":
        x = SinusoidalPositionEncoding(name="sinusoidal_position")(x)
    return x


def _char_features(config: TaggerConfig, n_chars: int, chars):
    """The char CNN features (b, t, filters) of every position, each convolved on its own (no deduplication)."""
    c = layers.Embedding(n_chars, config.char_dim, name="char_embedding")(chars)  # (b, t, t_char, dim)
    for i in range(config.char_layers):
        conv = layers.Conv1D(
            config.char_filters, config.char_kernel_size, padding="same", activation="relu", name=f"char_conv_{i + 1}"
        )
        c = layers.TimeDistributed(conv, name=f"time_distributed_{i + 1}")(c)
    return ops.max(c, axis=-2)


def baseline_inputs(words: np.ndarray, chars: np.ndarray) -> dict[str, np.ndarray]:
    """The baseline's input dict for one batch of encoded sentences."""
    return {"words": words.astype(np.int32), "chars": chars.astype(np.int32)}


def by_path(model: keras.Model, values: dict | None = None) -> dict[str, np.ndarray]:
    """The baseline's weights (or `values`: arrays by weight path, e.g. gradients) by path, with
    TimeDistributed's "time_distributed_i/char_conv_i/kernel" read as "char_conv_i/kernel"."""
    if values is None:
        values = {w.path: w for w in model.weights}
    strip = lambda p: p.split("/", 1)[1] if p.startswith("time_distributed_") else p
    return {strip(p): np.asarray(v) for p, v in values.items()}


def to_tagger_layout(source: dict[str, np.ndarray], tagger: keras.Model, num_heads: int) -> dict[str, np.ndarray]:
    """Baseline arrays by path (`by_path`) -> the same arrays in the layout of `tagger`'s weights.

    Layers outside the attention have the same names and shapes in both. Head h of
    attention layer `attention_i` is the baseline's `attention_i_head_h_*`:
    - its query/key/value kernels (d, head_dim) are stacked into (d, num_heads, head_dim);
    - its TemperatureDense gammas of q, k, v form column h of the (3, num_heads) temperature;
    - its other weights (PositionInteraction / RelativeBias built for one head,
      Conv1D / Conv2D kernel and bias) are stacked on a leading head axis.
    Tagger weights with no source (e.g. frozen ones when mapping gradients) are left out.
    """
    out = {}
    for w in tagger.weights:
        layer, _, rest = w.path.partition("/")
        heads = [f"{layer}_head_{h}" for h in range(num_heads)]
        if rest in ("query_kernel", "key_kernel", "value_kernel"):
            parts = [source.get(f"{h}_{rest.split('_')[0]}/kernel") for h in heads]
            value = None if parts[0] is None else np.stack(parts, axis=1)
        elif rest == "temperature" and f"{heads[0]}_query/gamma" in source:
            value = np.array([[source[f"{h}_{what}/gamma"] for h in heads] for what in ("query", "key", "value")])
        elif f"{heads[0]}_{rest}" in source:  # position_interaction/interactions, attention_conv/kernel, ...
            value = np.stack([source[f"{h}_{rest}"] for h in heads])
        else:
            value = source.get(w.path)  # outside the attention: the same path
        if value is not None:
            out[w.path] = value.reshape(w.shape)
    return out


def copy_weights_to_tagger(baseline: keras.Model, tagger: keras.Model, num_heads: int) -> None:
    """Give `tagger` (`build_tagger`, same config) the weights of `baseline`."""
    values = to_tagger_layout(by_path(baseline), tagger, num_heads)
    for w in tagger.weights:
        w.assign(values[w.path])
