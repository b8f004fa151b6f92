"""SinusoidalPositionEncoding: the harness, a NumPy reference, known values."""

import math

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, run_layer_test

from convatt.layers import SinusoidalPositionEncoding

ATOL = 1e-5


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    x = np.random.default_rng(0).normal(size=(2, 9, 6)).astype("float32")
    run_layer_test(
        SinusoidalPositionEncoding, dict(max_wavelength=100.0), x, (2, 9, 6), tmp_path, expected_num_weights=0
    )


@pytest.mark.parametrize("d", [6, 7])
def test_matches_numpy(d):
    rng = np.random.default_rng(d)
    x = rng.normal(size=(2, 9, d))
    out = keras.ops.convert_to_numpy(SinusoidalPositionEncoding()(x.astype("float32")))
    pe = ref.sinusoidal_encoding(9, d)
    np.testing.assert_allclose(out, x + pe, atol=ATOL)
    layer = SinusoidalPositionEncoding()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(np.zeros((1, 3, d), "float32")))[0], pe[:3], atol=ATOL)
    assert layer.count_params() == 0 and not layer.weights


def test_known_values():
    out = keras.ops.convert_to_numpy(SinusoidalPositionEncoding()(np.zeros((1, 2, 4), "float32")))[0]
    np.testing.assert_allclose(out[0], [0, 1, 0, 1], atol=1e-6)
    np.testing.assert_allclose(out[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-6)


@pytest.mark.tf_only
def test_from_config_round_trip():
    x = np.random.default_rng(2).uniform(size=(2, 8, 8)).astype("float32")
    check_clone_computes_the_same(SinusoidalPositionEncoding(max_wavelength=100.0), x)
