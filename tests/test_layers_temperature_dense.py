"""TemperatureDense (+Temp): the harness, a NumPy reference, gamma learns."""

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import TemperatureDense

ATOL = 1e-5


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 3, 6)).astype("float32")
    run_layer_test(
        TemperatureDense,
        dict(units=4, use_bias=True, kernel_initializer="zeros"),
        x,
        (2, 3, 4),
        tmp_path,
        expected_num_weights=3,
    )


@pytest.mark.tf_only
def test_parameter_count_and_shape():
    layer = TemperatureDense(91)
    out = layer(np.zeros((2, 60, 364), "float32"))
    assert layer.count_params() == 33_125
    assert tuple(out.shape) == tuple(layer.compute_output_shape((2, 60, 364))) == (2, 60, 91)


@pytest.mark.parametrize("use_bias", [False, True])
def test_matches_numpy(use_bias):
    rng = np.random.default_rng(2)
    layer = TemperatureDense(4, use_bias=use_bias, kernel_initializer="zeros")
    layer.build((None, 3, 6))
    assert [w.name for w in layer.weights] == ["kernel", "gamma"] + (["bias"] if use_bias else [])
    assert layer.count_params() == 6 * 4 + 1 + (4 if use_bias else 0)
    np.testing.assert_array_equal(layer.get_weights()[1], 1.0)
    weights = randomize(layer, seed=2)
    weights[1] = np.array(2.5)
    layer.set_weights([w.astype("float32") for w in weights])
    x = rng.normal(size=(2, 3, 6))
    expected = ref.temperature_dense(x, weights[0], 2.5, weights[2] if use_bias else None)
    out = keras.ops.convert_to_numpy(layer(x.astype("float32")))
    np.testing.assert_allclose(out, expected, atol=ATOL)


def test_gamma_is_trainable_and_learns():
    """With W frozen, fitting y = 3 x W moves gamma from 1 to 3."""
    keras.utils.set_random_seed(0)
    layer = TemperatureDense(2)
    x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    layer.build((None, 3))
    target = 3.0 * x @ layer.get_weights()[0]
    layer.kernel.trainable = False
    model = keras.Sequential([keras.Input((3,)), layer])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(x, target, epochs=60, batch_size=64, verbose=0)
    assert float(layer.get_weights()[1]) == pytest.approx(3.0, abs=0.05)


@pytest.mark.tf_only
def test_from_config_round_trip():
    layer = TemperatureDense(3, use_bias=True, kernel_initializer=keras.initializers.Constant(0.3))
    x = np.random.default_rng(2).uniform(size=(2, 8, 8)).astype("float32")
    layer(x)
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)
