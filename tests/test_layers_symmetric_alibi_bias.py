"""SymmetricAlibiBias: the harness, slopes, a NumPy reference, errors."""

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, run_layer_test

from convatt.layers import SymmetricAlibiBias

ATOL = 1e-5


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    scores = np.random.default_rng(0).normal(size=(2, 4, 5, 7)).astype("float32")
    run_layer_test(SymmetricAlibiBias, dict(num_heads=4), scores, (2, 4, 5, 7), tmp_path, expected_num_weights=0)


def test_slopes_and_bias_for_four_heads():
    layer = SymmetricAlibiBias(4)
    np.testing.assert_allclose(layer.slopes, [1 / 4, 1 / 16, 1 / 64, 1 / 256])
    scores = np.random.default_rng(0).normal(size=(2, 4, 5, 7))
    out = keras.ops.convert_to_numpy(layer(scores.astype("float32")))
    assert layer.count_params() == 0
    expected = scores.copy()
    for h, m in enumerate([1 / 4, 1 / 16, 1 / 64, 1 / 256]):
        for i in range(5):
            for j in range(7):
                expected[:, h, i, j] -= m * abs(i - j)
    np.testing.assert_allclose(out, expected, atol=ATOL)
    np.testing.assert_allclose(out, ref.alibi(scores), atol=ATOL)
    assert out[0, 0, 0, 3] == pytest.approx(scores[0, 0, 0, 3] - 0.75, abs=ATOL)


def test_float32_bias_under_mixed_policy():
    """Long distances: the bias -m |i - j| is exact in float32, not rounded to bfloat16."""
    layer = SymmetricAlibiBias(2, dtype="mixed_bfloat16")
    scores = np.full((1, 2, 300, 300), 0.1, "float32")
    summed = keras.ops.convert_to_numpy(layer.add_float32(scores))
    assert summed.dtype == np.float32
    np.testing.assert_allclose(summed[0, 0, 0, 299], 0.1 - 299 / 16, rtol=1e-6)


def test_slopes_other_head_counts_and_errors():
    np.testing.assert_allclose(SymmetricAlibiBias(8).slopes, [2.0**-k for k in range(1, 9)])
    np.testing.assert_allclose(SymmetricAlibiBias(2).slopes, [1 / 16, 1 / 256])
    with pytest.raises(ValueError, match="num_heads=4"):
        SymmetricAlibiBias(4)(np.zeros((1, 2, 3, 3), "float32"))


@pytest.mark.tf_only
def test_from_config_round_trip():
    x = np.random.default_rng(2).uniform(size=(2, 2, 8, 8)).astype("float32")
    check_clone_computes_the_same(SymmetricAlibiBias(2), x)


@pytest.mark.tf_only
def test_the_old_name_still_gives_the_layer_with_a_warning():
    import convatt.layers

    with pytest.warns(DeprecationWarning, match="SymmetricAlibiBias"):
        old = convatt.layers.AlibiBias
    assert old is SymmetricAlibiBias

    config = keras.layers.serialize(SymmetricAlibiBias(2))
    config["registered_name"] = "convatt>AlibiBias"  # as 0.1.0 saved it
    assert type(keras.layers.deserialize(config)) is SymmetricAlibiBias
