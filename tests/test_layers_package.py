"""The layers together, and the rule that every layer has its own harness-tested file.

Each layer of `convatt.layers` (and the tagger's `GatherCharFeatures`) has
`tests/test_layers_<snake_case_name>.py`, which runs `layer_harness.run_layer_test`;
the NumPy references are in `tests/layer_references.py`.
"""

import re
from pathlib import Path

import keras
import numpy as np
import pytest
from layer_harness import randomize

from convatt import layers as cl

TESTS = Path(__file__).resolve().parent

T, D, H, DH = 8, 8, 2, 4


def every_layer_model():
    # Zero initialisers where a layer has them: every weight is overwritten by `randomize`, and
    # random initialisers compile one program per shape under JAX (slow).
    zeros = "zeros"
    words = keras.Input((T, D), name="words")
    x = keras.layers.Add()([words, cl.PositionEmbedding(T, initializer=zeros)(words)])
    x = keras.layers.Concatenate()([x, cl.PositionEmbedding(T, output_dim=2, initializer=zeros)(words)])
    x = cl.SinusoidalPositionEncoding()(x)
    x = cl.TemperatureDense(D, use_bias=True, kernel_initializer=zeros)(x)
    z = cl.SelfAttention(
        H,
        DH,
        max_len=T,
        position_interaction=True,
        relative_bias=True,
        temperature=True,
        attention_conv="1d",
        relative_position_representation=2,
        alibi=True,
        kernel_initializer=zeros,
    )(x)
    z, attention = cl.SelfAttention(H, DH, attention_conv="2d", temperature=True, kernel_initializer=zeros)(
        z, return_attention_scores=True
    )
    scores = cl.PositionInteraction(T, H)(attention)
    scores = cl.RelativeBias(T, H)(scores)
    scores = cl.SymmetricAlibiBias(H)(scores)
    query = keras.layers.Reshape((T, H, DH))(z)
    scores = cl.RelativePositionRepresentation(3, DH, embeddings_initializer=zeros)(scores, query)
    conv1 = cl.AttentionConv1D(T, H, activation="tanh", kernel_initializer=zeros)(scores)
    conv2 = cl.AttentionConv2D(H, kernel_size=2, kernel_initializer=zeros)(scores)
    return keras.Model(words, {"z": z, "conv1": conv1, "conv2": conv2})


@pytest.mark.tf_only
def test_keras_save_and_load_gives_identical_outputs(tmp_path):
    model = every_layer_model()
    randomize(model, low=0.1, high=0.6)
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


@pytest.mark.tf_only
def test_every_layer_has_a_harness_tested_file():
    for name in cl.__all__ + ["GatherCharFeatures"]:
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("1_d", "1d").replace("2_d", "2d")
        path = TESTS / f"test_layers_{snake}.py"
        assert path.exists(), f"{name} has no {path.name}"
        assert "run_layer_test(" in path.read_text(), f"{path.name} does not run the layer harness"
