"""The PoS tagger of the paper (Table 1a), built with the functional API.

    words -> word embedding (+ position embedding, added or concatenated)
    chars -> char embedding -> 3 x Conv1D(64, 5, relu, same) -> max over chars
    h0 = concat(word part, char part)                      d_model = word (+64) + 64
    h_{l+1} = D(h_l) + SelfAttention(D(h_l)), D = Dropout(0.1)    4 layers, 4 heads
                  (the original code's residual; `h_l + ...` with residual_adds_dropped=False)
    tags = Dense(n_labels, softmax)(concat(h0, h4))

Per-layer modifications (REFERENCE.md): +P and +R in the first layer only; +Temp
and +Conv/+Conv2d in every layer. Beyond the paper: +Conv2d[pre] and
+Talking in every layer; +Denser replaces every SelfAttention with a
DenserSelfAttention of the same heads; +Narrowing gives layer l 4 * 2^l heads of
d_model together (see `attention_layer`). The char CNN runs once per distinct char row of a
batch (see `convatt.data.batching`), which gives the same result as running it per token:
a PTB batch of 32 x 60 token positions has ~450 distinct rows, so the CNN does a
quarter of the work. `convatt bench` compares the speed with a straightforward port.

Precision (`dtype_policy`): every layer gets the policy, except the output layer
`tags`, which is float32 (its softmax and the loss see float32 probabilities);
weights stay float32. Under "mixed_float16" the optimizer scales the loss.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers, ops

from convatt.layers import (
    DenserSelfAttention,
    NarrowingSelfAttention,
    PositionEmbedding,
    SelfAttention,
    SinusoidalPositionEncoding,
)
from convatt.layers.narrowing_self_attention import narrowing_num_heads
from convatt.model.variants import PRECISIONS, TaggerConfig, attention_options
from convatt.protocol import DEFAULT_PROTOCOL, TrainingProtocol
from convatt.protocol.optimizers import RMSpropKeras2


@keras.saving.register_keras_serializable(package="convatt")
class GatherCharFeatures(keras.layers.Layer):
    """Per-token features from the features of a batch's distinct char rows.

    The char CNN runs on the distinct char rows of a batch (`convatt.data.batching`);
    this layer gives every token position the features of its row.

    Call arguments:
        features: `(n, f)` or `(b, k, f)` features of the rows (flattened to `(b * k, f)`).
        index: int `(b, t)`, each token's row in the flattened rows.

    Returns:
        `(b, t, f)`.

    Example:
    ```python
    features = np.random.rand(2, 3, 64).astype("float32")  # 6 distinct rows
    index = np.array([[0, 1, 1, 5], [2, 2, 3, 4]])
    GatherCharFeatures()(features, index).shape  # (2, 4, 64)
    ```
    """

    def call(self, features, index):
        flat = ops.reshape(features, (-1, ops.shape(features)[-1]))
        return ops.take(flat, index, axis=0)

    def compute_output_shape(self, features_shape, index_shape):
        return tuple(index_shape) + (features_shape[-1],)


def char_encoder(config: TaggerConfig, n_chars: int, char_rows, dtype_policy: str = "float32"):
    """char_rows (b, k, t_char) -> (b * k, char_filters): embedding, CNN, max over chars."""
    rows = ops.reshape(char_rows, (-1, config.max_word_len))
    x = layers.Embedding(n_chars, config.char_dim, name="char_embedding", dtype=dtype_policy)(rows)
    for i in range(config.char_layers):
        x = layers.Conv1D(
            config.char_filters,
            config.char_kernel_size,
            padding="same",
            activation="relu",
            name=f"char_conv_{i + 1}",
            dtype=dtype_policy,
        )(x)
    return ops.max(x, axis=-2)


def attention_layer(config: TaggerConfig, index: int, dtype_policy: str = "float32") -> keras.layers.Layer:
    """The attention of layer `index` (0 = first) of the tagger, `d_model` wide."""
    spec, t, name = config.spec, config.max_len, f"attention_{index + 1}"
    head_dim = config.d_model // config.num_heads
    if spec.attention == "denser":
        return DenserSelfAttention(
            config.num_heads,
            head_dim,
            segments=config.denser_segments,
            output_dim=config.d_model,
            kernel_initializer=config.attention_initializer,
            name=name,
            dtype=dtype_policy,
        )
    if spec.attention == "narrowing":
        return NarrowingSelfAttention(
            config.d_model,
            narrowing_num_heads(config.num_heads, index),
            max_len=t,
            kernel_initializer=config.attention_initializer,
            name=name,
            dtype=dtype_policy,
        )
    return _self_attention(config, index, dtype_policy)


def _self_attention(config: TaggerConfig, index: int, dtype_policy: str) -> SelfAttention:
    """`SelfAttention` with the variant's modifications of layer `index` (`attention_options`)."""
    return SelfAttention(
        num_heads=config.num_heads,
        head_dim=config.d_model // config.num_heads,
        max_len=config.max_len,
        kernel_initializer=config.attention_initializer,
        relative_bias_parameterization=config.relative_bias_parameterization,
        **attention_options(config.spec, index, shaw_clip=config.shaw_clip),
        name=f"attention_{index + 1}",
        dtype=dtype_policy,
    )


def build_tagger(
    config: TaggerConfig,
    n_words: int,
    n_chars: int,
    n_labels: int,
    word_vectors: np.ndarray | None = None,
    jit_compile: bool | str = "auto",
    protocol: TrainingProtocol = DEFAULT_PROTOCOL,
    dtype_policy: str = "float32",
) -> keras.Model:
    """Build and compile the tagger of one variant.

    Args:
        config: the architecture (`convatt.model.variants.make_config`).
        protocol: the optimizer and loss (`compile_tagger`); the network's own
            protocol choices are in `config`.
        n_words, n_chars, n_labels: vocabulary sizes, PAD and OOV included.
        word_vectors: optional (n_words, word_dim) initial word embeddings.
        jit_compile: passed to `Model.compile`. The default "auto" lets Keras choose:
            no XLA with TensorFlow on a CPU-only machine (XLA made a training step
            about 10x slower on a 2-core CPU, `convatt bench`), XLA on a GPU and on JAX.
        dtype_policy: one of `PRECISIONS`. "float32" (the paper's) or a mixed policy:
            every layer computes in bfloat16 / float16 with float32 weights, except
            the output layer `tags`, which stays float32 (float32 probabilities for
            the loss); "mixed_float16" also gets loss scaling (`compile_tagger`).
    """
    if dtype_policy not in PRECISIONS:
        raise ValueError(f"dtype_policy must be one of {PRECISIONS}; received {dtype_policy!r}.")
    inputs = tagger_inputs(config)
    word_embedding = layers.Embedding(
        n_words, config.word_dim, trainable=not config.pretrained_words, name="word_embedding", dtype=dtype_policy
    )
    tags = tag_probabilities(config, inputs, word_embedding, n_chars, n_labels, dtype_policy)
    model = keras.Model(inputs, tags, name=f"tagger_{config.variant.replace('-', '_')}")
    # Set once built: the embedding still draws its random weights, so the layers after it
    # get the initial weights the seed gave them before.
    if word_vectors is not None:
        _set_word_vectors(word_embedding, word_vectors)
    compile_tagger(model, jit_compile, protocol)
    return model


def tag_probabilities(
    config: TaggerConfig, inputs: dict, word_embedding, n_chars: int, n_labels: int, dtype_policy: str = "float32"
):
    """The network from the inputs to the tags' probabilities: token features `h0`, the
    attention layers, and the softmax over `concat(h0, h_L)`."""
    h0 = token_features(config, word_embedding(inputs["words"]), inputs, n_chars, dtype_policy)
    attention_mask = ops.not_equal(inputs["words"], 0) if config.mask_padding else None
    h = attention_stack(config, h0, attention_mask, dtype_policy)
    out = layers.Concatenate(name="output_features", dtype=dtype_policy)([h0, h])
    # float32 whatever the policy: the softmax and the loss need float32 probabilities
    # (a small matmul, ~1% of a step's FLOPs).
    return layers.Dense(n_labels, activation="softmax", name="tags", dtype="float32")(out)


def _set_word_vectors(word_embedding: layers.Embedding, word_vectors: np.ndarray) -> None:
    """The built word embedding's weights set to `word_vectors`, of its own shape."""
    expected = tuple(word_embedding.embeddings.shape)
    if word_vectors.shape != expected:
        raise ValueError(f"word_vectors has shape {word_vectors.shape}, expected {expected}")
    word_embedding.set_weights([word_vectors.astype("float32")])


def tagger_inputs(config: TaggerConfig) -> dict:
    """The tagger's inputs: word ids (b, t), the batch's distinct char rows (r, t_char) and
    each token's row among them (b, t) (`convatt.data.batching.make_inputs`)."""
    return {
        "words": keras.Input((config.max_len,), dtype="int32", name="words"),
        "char_rows": keras.Input((None, config.max_word_len), dtype="int32", name="char_rows"),
        "char_index": keras.Input((config.max_len,), dtype="int32", name="char_index"),
    }


def token_features(config: TaggerConfig, embedded_words, inputs: dict, n_chars: int, dtype_policy: str = "float32"):
    """The first layer's input: each token's word embedding with positions, and its char features."""
    x = with_positions(config, embedded_words, dtype_policy)
    char_features = char_encoder(config, n_chars, inputs["char_rows"], dtype_policy)
    chars = GatherCharFeatures(name="char_features", dtype=dtype_policy)(char_features, inputs["char_index"])
    return layers.Concatenate(name="layer_0_input", dtype=dtype_policy)([x, chars])


def with_positions(config: TaggerConfig, x, dtype_policy: str = "float32"):
    """The word embeddings `x` with the variant's absolute positions added or concatenated (PE, Sin)."""
    kind, t, policy = config.spec.position_embedding, config.max_len, dtype_policy
    if kind == "add":
        positions = PositionEmbedding(t, name="position_embedding", dtype=policy)(x)
        return layers.Add(name="add_position", dtype=policy)([x, positions])
    if kind == "con":
        positions = PositionEmbedding(t, output_dim=config.pe_con_dim, name="position_embedding", dtype=policy)(x)
        return layers.Concatenate(name="concat_position", dtype=policy)([x, positions])
    if kind == "sin-add":
        return SinusoidalPositionEncoding(name="sinusoidal_position", dtype=policy)(x)
    return x


def attention_stack(config: TaggerConfig, h, attention_mask=None, dtype_policy: str = "float32"):
    """The self-attention layers with dropout and residuals: `h' = D(h) + SA(D(h))` as the
    original code adds them (`config.residual_adds_dropped`), or `h' = h + SA(D(h))`."""
    for i in range(config.num_layers):
        attention = attention_layer(config, i, dtype_policy)
        dropped = layers.Dropout(config.dropout, name=f"dropout_{i + 1}", dtype=dtype_policy)(h)
        z = attention(dropped, attention_mask=attention_mask) if attention_mask is not None else attention(dropped)
        residual = dropped if config.residual_adds_dropped else h
        h = layers.Add(name=f"residual_{i + 1}", dtype=dtype_policy)([residual, z])
    return h


def compile_tagger(
    model: keras.Model, jit_compile: bool | str = "auto", protocol: TrainingProtocol = DEFAULT_PROTOCOL
) -> None:
    """RMSprop (lr 0.001, rho 0.9, eps 1e-7) and cross-entropy weighted 0 on PAD (REFERENCE.md).

    The original protocol: Keras 2.2.4's RMSprop update, and the weighted loss divided
    by the batch's real tokens (Keras 2.2.4's `weighted_masked_objective`); Keras 3's:
    its own RMSprop, and the weighted loss divided by all positions.
    A model with float16 layers (`dtype_policy="mixed_float16"`) gets dynamic loss
    scaling (`keras.optimizers.LossScaleOptimizer`), so that small gradients do not
    flush to zero in float16; the optimizer's arithmetic stays float32 (the weights are).
    """
    optimizer = RMSpropKeras2() if protocol.optimizer == "keras2-rmsprop" else keras.optimizers.RMSprop()
    if any(layer.compute_dtype == "float16" for layer in model.layers):
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    reduction = "mean_with_sample_weight" if protocol.loss == "real-tokens" else "sum_over_batch_size"
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(reduction=reduction),
        weighted_metrics=["sparse_categorical_accuracy"],
        jit_compile=jit_compile,
    )
