"""`.keras` save/load and get_config/from_config round trips of every layer."""
import numpy as np
import pytest
import keras

from convatt import layers as cl

T, D, H, DH = 8, 8, 2, 4


def randomize(model_or_layer, seed=0):
    """Random values for every weight, so a lost or swapped weight changes the outputs."""
    rng = np.random.default_rng(seed)
    model_or_layer.set_weights([rng.uniform(0.1, 0.6, w.shape).astype("float32") for w in model_or_layer.weights])


def every_layer_model():
    # Zero initialisers where a layer has them: every weight is overwritten by `randomize`, and
    # random initialisers compile one program per shape under JAX (slow).
    zeros = "zeros"
    words = keras.Input((T, D), name="words")
    x = keras.layers.Add()([words, cl.PositionEmbedding(T, initializer=zeros)(words)])
    x = keras.layers.Concatenate()([x, cl.PositionEmbedding(T, output_dim=2, initializer=zeros)(words)])
    x = cl.SinusoidalPositionEncoding()(x)
    x = cl.TemperatureDense(D, use_bias=True, kernel_initializer=zeros)(x)
    z = cl.SelfAttention(H, DH, max_len=T, position_interaction=True, relative_bias=True, temperature=True,
                         attention_conv="1d", relative_position_representation=2, alibi=True,
                         kernel_initializer=zeros)(x)
    z, attention = cl.SelfAttention(H, DH, attention_conv="2d", temperature=True, kernel_initializer=zeros)(
        z, return_attention_scores=True)
    scores = cl.PositionInteraction(T, H)(attention)
    scores = cl.RelativeBias(T, H)(scores)
    scores = cl.AlibiBias(H)(scores)
    query = keras.layers.Reshape((T, H, DH))(z)
    scores = cl.RelativePositionRepresentation(3, DH, embeddings_initializer=zeros)(scores, query)
    conv1 = cl.AttentionConv1D(T, H, activation="tanh", kernel_initializer=zeros)(scores)
    conv2 = cl.AttentionConv2D(H, kernel_size=2, kernel_initializer=zeros)(scores)
    return keras.Model(words, {"z": z, "conv1": conv1, "conv2": conv2})


def test_keras_save_and_load_gives_identical_outputs(tmp_path):
    model = every_layer_model()
    randomize(model)
    x = np.random.default_rng(1).normal(size=(3, T, D)).astype("float32")
    before = {k: keras.ops.convert_to_numpy(v) for k, v in model(x).items()}
    path = tmp_path / "every_layer.keras"
    model.save(path)
    loaded = keras.models.load_model(path)  # registered: no custom_objects needed
    after = {k: keras.ops.convert_to_numpy(v) for k, v in loaded(x).items()}
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])
    assert loaded.count_params() == model.count_params()
    for a, b in zip(model.weights, loaded.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))


# Non-default arguments everywhere, so a dropped config entry shows. Constant initialisers
# test initializer serialisation without compiling random programs under JAX.
SCORES, SEQ = (2, H, T, T), (2, T, D)
LAYERS = {
    "PositionInteraction": (lambda: cl.PositionInteraction(T, H), SCORES),
    "RelativeBias": (lambda: cl.RelativeBias(T, H), SCORES),
    "TemperatureDense": (
        lambda: cl.TemperatureDense(3, use_bias=True, kernel_initializer=keras.initializers.Constant(0.3)), SEQ),
    "AttentionConv1D": (
        lambda: cl.AttentionConv1D(T, H, kernel_size=5, activation="sigmoid", kernel_initializer="ones",
                                   bias_initializer=keras.initializers.Constant(-0.1)),
        SCORES,
    ),
    "AttentionConv2D": (lambda: cl.AttentionConv2D(H, kernel_size=2, activation=None, kernel_initializer="zeros"),
                        SCORES),
    "PositionEmbedding": (lambda: cl.PositionEmbedding(T, output_dim=3, initializer="ones"), SEQ),
    "SinusoidalPositionEncoding": (lambda: cl.SinusoidalPositionEncoding(max_wavelength=100.0), SEQ),
    "AlibiBias": (lambda: cl.AlibiBias(H), SCORES),
    "SelfAttention": (
        lambda: cl.SelfAttention(H, DH, max_len=T, position_interaction=True, relative_bias=True, temperature=True,
                                 attention_conv="1d", conv_kernel_size=5, relative_position_representation=1,
                                 alibi=True, kernel_initializer=keras.initializers.Constant(0.2)),
        SEQ,
    ),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_from_config_round_trip(name):
    make, shape = LAYERS[name]
    layer = make()
    x = np.random.default_rng(2).uniform(size=shape).astype("float32")
    layer(x)  # build
    randomize(layer)
    out = keras.ops.convert_to_numpy(layer(x))
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    # Also through Keras' registry, by the registered name.
    assert keras.saving.get_registered_name(type(layer)) == f"convatt>{name}"
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(revived) is type(layer) and revived.get_config() == config
    clone.build(shape)
    assert [w.path.split("/", 1)[1] for w in clone.weights] == [w.path.split("/", 1)[1] for w in layer.weights]
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(keras.ops.convert_to_numpy(clone(x)), out, atol=1e-6)


def test_shaw_layer_round_trip():
    layer = cl.RelativePositionRepresentation(3, DH, embeddings_initializer="ones")
    scores = np.zeros((2, H, T, T), "float32")
    query = np.random.default_rng(3).normal(size=(2, T, H, DH)).astype("float32")
    out = keras.ops.convert_to_numpy(layer(scores, query))
    clone = cl.RelativePositionRepresentation.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(clone(scores, query)), out, atol=1e-6)
