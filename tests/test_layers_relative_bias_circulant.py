"""RelativeBias(parameterization="circulant"): the original code's +R, against NumPy's FFT
(and TensorFlow's LinearOperatorCirculant, which the original called, when TensorFlow runs)."""

import keras
import numpy as np
import pytest

from convatt.layers import RelativeBias, SelfAttention


def circulant_reference(spectrum: np.ndarray, t: int) -> np.ndarray:
    """Re(circulant matrix whose first column is IFFT(spectrum))[:t, :t], per head."""
    n = spectrum.shape[-1]
    column = np.fft.ifft(spectrum, axis=-1).real  # (h, n)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    full = column[:, (i - j) % n]  # C[i, j] = c[(i - j) mod n]
    return full[:, :t, :t]


def make(t=6, heads=3, seed=0):
    layer = RelativeBias(max_len=t, num_heads=heads, parameterization="circulant")
    layer.build((None, heads, t, t))
    values = np.random.default_rng(seed).normal(size=(heads, 2 * t)).astype("float32")
    layer.biases.assign(values)
    return layer, values


@pytest.mark.parametrize("q,k", [(6, 6), (4, 6), (3, 2)])
def test_matches_the_numpy_circulant(q, k):
    layer, values = make()
    got = keras.ops.convert_to_numpy(layer.relative_matrix(q, k))
    np.testing.assert_allclose(got, circulant_reference(values.astype("float64"), 6)[:, :q, :k], atol=1e-5)
    scores = np.random.default_rng(1).normal(size=(2, 3, q, k)).astype("float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(scores)), scores + got, atol=1e-6)


def test_depends_on_distance_only():
    layer, _ = make(t=7)
    a = keras.ops.convert_to_numpy(layer.relative_matrix(7, 7))
    np.testing.assert_allclose(a, np.transpose(a, (0, 2, 1)), atol=1e-6)  # symmetric: no direction
    np.testing.assert_allclose(a[:, 1:, 1:], a[:, :-1, :-1], atol=1e-6)  # Toeplitz


def test_matches_tensorflows_linear_operator_circulant():
    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's operator is checked under the tensorflow backend")
    import tensorflow as tf

    layer, values = make(t=5, heads=2)
    for h in range(2):  # the original: Rop.matmul(eye(2t))[:t, :t], cast to float32
        op = tf.linalg.LinearOperatorCirculant(tf.constant(values[h]), input_output_dtype=tf.float32)
        expected = op.matmul(tf.eye(10))[:5, :5].numpy()
        np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.relative_matrix(5, 5))[h], expected, atol=1e-5)


@pytest.mark.tf_only
def test_initial_scale_is_keras_2_2_4s_glorot_normal_of_a_1d_weight():
    keras.utils.set_random_seed(3)
    layer = RelativeBias(max_len=60, num_heads=64, parameterization="circulant")
    layer.build((None, 64, 60, 60))
    values = keras.ops.convert_to_numpy(layer.biases)
    expected = np.sqrt(1 / np.sqrt(120))  # fans sqrt(120) each; truncation restores this std
    assert values.std() == pytest.approx(expected, rel=0.05)
    assert np.abs(values).max() <= 2 * expected / 0.87962566103423978 + 1e-6


@pytest.mark.tf_only
def test_config_and_keras_file_round_trip(tmp_path):
    inputs = keras.Input((6, 8))
    outputs = SelfAttention(
        num_heads=2, head_dim=4, max_len=6, relative_bias=True, relative_bias_parameterization="circulant"
    )(inputs)
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(model.predict(x, verbose=0), loaded.predict(x, verbose=0), atol=1e-6)
    layer = loaded.layers[-1]
    assert layer.get_config()["relative_bias_parameterization"] == "circulant"
    assert RelativeBias.from_config(layer._relative_bias.get_config()).parameterization == "circulant"


@pytest.mark.tf_only
def test_lookup_is_still_the_layers_default_and_unknown_names_fail():
    assert RelativeBias(max_len=4, num_heads=1).parameterization == "lookup"
    with pytest.raises(ValueError, match="parameterization takes one of"):
        RelativeBias(max_len=4, num_heads=1, parameterization="fft")
