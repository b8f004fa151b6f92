"""PositionInteraction (+P): the harness, a NumPy reference, initialisation, errors."""

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import PositionInteraction

ATOL = 1e-5


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    scores = np.random.default_rng(0).normal(size=(2, 2, 6, 5)).astype("float32")
    run_layer_test(
        PositionInteraction, dict(max_len=8, num_heads=2), scores, (2, 2, 6, 5), tmp_path, expected_num_weights=1
    )


@pytest.mark.tf_only
def test_parameter_count_and_shape():
    layer = PositionInteraction(60, 4)
    out = layer(np.zeros((2, 4, 60, 60), "float32"))
    assert layer.count_params() == 14_400
    assert tuple(out.shape) == tuple(layer.compute_output_shape((2, 4, 60, 60))) == (2, 4, 60, 60)


@pytest.mark.parametrize("q, k", [(8, 8), (3, 5), (8, 2)])
def test_matches_numpy(q, k):
    rng = np.random.default_rng(0)
    layer = PositionInteraction(max_len=8, num_heads=2)
    layer.build((None, 2, 8, 8))
    (ap,) = randomize(layer)
    scores = rng.normal(size=(2, 2, q, k))
    out = keras.ops.convert_to_numpy(layer(scores.astype("float32")))
    np.testing.assert_allclose(out, ref.position_interaction(scores, ap), atol=ATOL)


def test_float32_sum_under_mixed_policy():
    """A^p is added in float32 (no bfloat16 rounding of A^p), only the result is rounded."""
    layer = PositionInteraction(max_len=4, num_heads=1, dtype="mixed_bfloat16")
    layer.build((None, 1, 4, 4))
    (ap,) = randomize(layer, low=10, high=20)
    scores = np.full((1, 1, 4, 4), 0.5, "float32")
    exact = ref.position_interaction(scores, ap)
    summed = keras.ops.convert_to_numpy(layer.add_float32(scores))
    assert summed.dtype == np.float32
    np.testing.assert_allclose(summed, exact, rtol=1e-6)
    out = layer(scores)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(keras.ops.cast(out, "float32")), exact, rtol=2**-8)


def test_rejects_long_sequences_and_wrong_heads():
    with pytest.raises(ValueError, match="max_len=4"):
        PositionInteraction(4, 2)(np.zeros((1, 2, 5, 5), "float32"))
    with pytest.raises(ValueError, match="num_heads=2"):
        PositionInteraction(4, 2)(np.zeros((1, 3, 4, 4), "float32"))


def test_initialisation_is_per_head_glorot():
    """Each head's matrix is drawn as if it were the paper's own per-head variable."""
    keras.utils.set_random_seed(3)
    t, heads = 60, 4
    p = PositionInteraction(t, heads)
    p.build((None, heads, t, t))
    # glorot-normal of a (t, t) matrix: std sqrt(2 / (t + t)).
    assert np.std(p.get_weights()[0]) == pytest.approx(np.sqrt(1 / t), rel=0.05)
    # The heads are different draws.
    assert not np.allclose(p.get_weights()[0][0], p.get_weights()[0][1])


def test_from_config_round_trip():
    layer = PositionInteraction(8, 2)
    x = np.random.default_rng(2).uniform(size=(2, 2, 8, 8)).astype("float32")
    layer(x)  # build
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)
