"""RelativeBias (+R): the harness, a NumPy reference, the Toeplitz structure, init, errors."""

import keras
import layer_references as ref
import numpy as np
import pytest
from layer_harness import check_clone_computes_the_same, randomize, run_layer_test

from convatt.layers import RelativeBias

ATOL = 1e-5


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    scores = np.random.default_rng(0).normal(size=(2, 2, 5, 6)).astype("float32")
    run_layer_test(RelativeBias, dict(max_len=8, num_heads=2), scores, (2, 2, 5, 6), tmp_path, expected_num_weights=1)


@pytest.mark.tf_only
def test_parameter_count_and_shape():
    layer = RelativeBias(60, 4)
    out = layer(np.zeros((2, 4, 60, 60), "float32"))
    assert layer.count_params() == 480
    assert tuple(out.shape) == tuple(layer.compute_output_shape((2, 4, 60, 60))) == (2, 4, 60, 60)


@pytest.mark.parametrize("q, k", [(8, 8), (2, 5), (5, 3)])
def test_matches_numpy(q, k):
    rng = np.random.default_rng(1)
    max_len = 8
    layer = RelativeBias(max_len=max_len, num_heads=2)
    layer.build((None, 2, max_len, max_len))
    (ar,) = randomize(layer, seed=1)
    assert ar.shape == (2, 2 * max_len)
    scores = rng.normal(size=(3, 2, q, k))
    out = keras.ops.convert_to_numpy(layer(scores.astype("float32")))
    np.testing.assert_allclose(out, ref.relative_bias(scores, ar, max_len), atol=ATOL)


def test_float32_sum_under_mixed_policy():
    layer = RelativeBias(max_len=4, num_heads=2, dtype="mixed_float16")
    layer.build((None, 2, 4, 4))
    (ar,) = randomize(layer, low=100, high=200)
    scores = np.full((1, 2, 4, 4), 0.25, "float32")
    exact = ref.relative_bias(scores, ar, 4)
    summed = keras.ops.convert_to_numpy(layer.add_float32(scores))
    assert summed.dtype == np.float32
    np.testing.assert_allclose(summed, exact, rtol=1e-6)
    assert keras.backend.standardize_dtype(layer(scores).dtype) == "float16"


def test_is_a_function_of_the_offset_only():
    layer = RelativeBias(max_len=8, num_heads=2)
    layer.build((None, 2, 8, 8))
    layer.set_weights([np.stack([np.arange(16), -np.arange(16)]).astype("float32")])
    ar = keras.ops.convert_to_numpy(layer(np.zeros((1, 2, 8, 8), "float32")))[0]
    i, j = np.indices((8, 8))
    np.testing.assert_array_equal(ar[0], i - j + 8)  # a Toeplitz matrix, entries 1 .. 15; 0 unused
    np.testing.assert_array_equal(ar[1], -(i - j + 8))
    assert ar[0].min() == 1 and ar[0].max() == 15


def test_rejects_long_sequences_and_bad_shapes():
    with pytest.raises(ValueError, match="max_len=4"):
        RelativeBias(4, 2)(np.zeros((1, 2, 4, 5), "float32"))
    with pytest.raises(ValueError, match="shape"):
        RelativeBias(4, 2)(np.zeros((2, 4, 4), "float32"))


def test_initialisation_is_per_head_glorot():
    keras.utils.set_random_seed(3)
    t, heads = 60, 4
    r = RelativeBias(t, heads)
    r.build((None, heads, t, t))
    # glorot-normal of a (2t,) vector: std sqrt(2 / (2t + 2t)).
    assert np.std(r.get_weights()[0]) == pytest.approx(np.sqrt(1 / (2 * t)), rel=0.15)


def test_from_config_round_trip():
    layer = RelativeBias(8, 2)
    x = np.random.default_rng(2).uniform(size=(2, 2, 8, 8)).astype("float32")
    layer(x)
    randomize(layer, low=0.1, high=0.6)
    check_clone_computes_the_same(layer, x)


@pytest.mark.parametrize("form", ["batch_sum_by_product", "batch_sum_by_additions", None])
def test_batch_sum_by_product_equals_the_broadcast_add(form):
    """`add_with_fast_batch_sum`: the values and both gradients of `scores + bias` (the bias's
    the upstream summed over the batch), with the product (JAX on a CPU), the additions
    (TensorFlow with XLA on a CPU; each forced on the other backend) and autodiff's."""
    from kernel_gradients import value_and_gradients

    from convatt.layers import _score_bias

    batch_sum = "autodiff" if form is None else form.removeprefix("batch_sum_by_")  # product, additions
    rng = np.random.default_rng(6)
    scores, bias = rng.normal(size=(3, 2, 4, 5)), rng.normal(size=(2, 4, 5))
    fast = value_and_gradients(lambda s, b: _score_bias.add_with_fast_batch_sum(s, b, batch_sum), scores, bias)
    plain = value_and_gradients(lambda s, b: s + b, scores, bias)
    for new, old in zip(fast, plain, strict=True):
        np.testing.assert_allclose(new, old, rtol=1e-6, atol=1e-6)


def _mha_step(layer, causal: bool):
    """`(x_query, x_value, *weights) -> output` of `layer` (built), for `value_and_gradients`."""

    def step(x_query, x_value, *weights):
        output, _ = layer.stateless_call(list(weights), [], x_query, x_value, use_causal_mask=causal)
        return output

    return step


@pytest.mark.parametrize("form", ["batch_sum_by_product", "batch_sum_by_additions"])
@pytest.mark.parametrize("q, k, causal", [(6, 6, True), (6, 6, False), (5, 7, False), (7, 5, True)])
def test_multi_head_attention_bias_gradients_by_product_equal_autodiffs(q, k, causal, form, monkeypatch):
    """+P+R in `convatt.layers.MultiHeadAttention` sums the biases' gradients over the batch by a
    product: the same outputs and gradients (inputs and every weight) as autodiff's sum (the form
    `SelfAttention` runs); cross-attention, lengths below `max_len`, causal and not."""
    from dataclasses import replace

    from kernel_gradients import value_and_gradients

    from convatt.layers import MultiHeadAttention, SelfAttention
    from convatt.layers.forms import PUBLISHED, drop_in_forms

    assert MultiHeadAttention.choose_forms is drop_in_forms and SelfAttention.choose_forms() == PUBLISHED
    rng = np.random.default_rng(4)
    layer = MultiHeadAttention(num_heads=2, key_dim=3, max_len=8, position_interaction=True, relative_bias=True)
    layer.build((2, q, 5), (2, k, 5))
    weights = [rng.normal(size=v.shape).astype("float32") for v in layer.trainable_variables]
    inputs = [rng.normal(size=(2, length, 5)).astype("float32") for length in (q, k)]
    batch_sum = form.removeprefix("batch_sum_by_")
    layer.choose_forms = lambda: replace(drop_in_forms(), bias_batch_sum=batch_sum)  # on either backend
    by_product = value_and_gradients(_mha_step(layer, causal), *inputs, *weights)
    layer.choose_forms = lambda: PUBLISHED
    autodiff = value_and_gradients(_mha_step(layer, causal), *inputs, *weights)
    scale = max(np.abs(old).max() for old in autodiff)  # the key bias's gradient is 0 up to rounding
    for new, old in zip(by_product, autodiff, strict=True):
        np.testing.assert_allclose(new, old, rtol=1e-5, atol=1e-5 * scale)
