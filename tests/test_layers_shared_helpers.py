"""The layers' one home of each shared piece, against NumPy: the masked softmax, the causal mask,
the `max_len` check, the temperature's scaling, the biases by offset (cached decoding's), and
the `MODIFICATIONS` table's stages as both attention layers run them."""

import keras
import layer_references as ref
import numpy as np
import pytest
from kernel_gradients import value_and_gradients

from convatt.layers import MultiHeadAttention, RelativeBias, SelfAttention, SymmetricAlibiBias
from convatt.layers._utils import causal_keep, check_length, lower_triangular_keep, masked_softmax
from convatt.layers.core.modifications import MODIFICATIONS, STAGES
from convatt.layers.core.softmax import lean_masked_softmax
from convatt.layers.temperature_dense import scale_by_temperature

RNG = np.random.default_rng(0)


def numpy_of(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


def test_masked_softmax_weighs_only_the_kept_keys_and_zeroes_fully_masked_rows():
    scores = RNG.normal(size=(2, 3, 4, 5)).astype("float32")
    keep = RNG.random((2, 1, 4, 5)) > 0.4
    keep[0, 0, 1] = False  # a fully masked row
    got = numpy_of(masked_softmax(scores, keep))
    expected = np.zeros_like(scores)
    for b, h, i in np.ndindex(2, 3, 4):
        kept = keep[b, 0, i]
        if kept.any():
            expected[b, h, i, kept] = ref.softmax(scores[b, h, i, kept])
    np.testing.assert_allclose(got, expected, atol=1e-6)
    np.testing.assert_allclose(numpy_of(masked_softmax(scores)), ref.softmax(scores), atol=1e-6)


@pytest.mark.parametrize("xla", [False, True], ids=["as-run", "xla"])
@pytest.mark.parametrize("mask", ["none", "causal", "padding", "pads"])
def test_the_lean_softmax_has_the_masked_softmaxs_values_and_gradient(mask, xla):
    """`MultiHeadAttention`'s softmax: its own gradient (from the weights alone) against
    autodiff's of `masked_softmax`, a fully masked row among the padding's (with `pads`: a padded
    row kept whole, uniform over scores the mask replaced, so with no gradient). It zeroes the
    masked weights by the softmax's own underflow, the rows with no key by a factor: XLA too."""
    scores = 3 * RNG.normal(size=(2, 3, 5, 6)).astype("float32")
    padding = RNG.random((2, 1, 5, 6)) > 0.4
    padding[1, 0, 2] = False
    keep = {"none": None, "causal": numpy_of(lower_triangular_keep(5, 6)), "padding": padding, "pads": padding}
    pads = np.zeros((2, 1, 5, 1), bool)
    pads[1, 0, 2] = pads[0, 0, 4] = True
    pads = pads if mask == "pads" else None
    lean = value_and_gradients(lambda s: lean_masked_softmax(s, keep[mask], pads), scores, xla=xla)
    autodiff = value_and_gradients(lambda s: masked_softmax(s, keep[mask], pads), scores)
    for got, expected in zip(lean, autodiff):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert np.abs(lean[1]).max() > 1e-3  # a gradient that is there


def test_masked_softmax_keeps_the_scores_dtype():
    scores = keras.ops.cast(RNG.normal(size=(1, 1, 2, 3)), "float16")
    assert keras.backend.standardize_dtype(masked_softmax(scores, np.ones((1, 1, 2, 3), bool)).dtype) == "float16"


def test_the_causal_mask_is_lower_triangular_and_rows_before_the_sequence_keep_nothing():
    np.testing.assert_array_equal(numpy_of(lower_triangular_keep(4, 6))[0, 0], np.tril(np.ones((4, 6), bool)))
    got = numpy_of(causal_keep(keras.ops.convert_to_tensor(np.array([-1, 2, 5], "int32")), 4))
    np.testing.assert_array_equal(got, [[False] * 4, [True, True, True, False], [True] * 4])


def test_the_max_len_check_names_the_length_and_passes_unknown_or_unbounded():
    check_length(None, 4, "{length}")
    check_length(9, None, "{length}")
    check_length(4, 4, "{length}")
    with pytest.raises(ValueError, match="received 5 for max_len 4"):
        check_length(5, 4, "received {length} for max_len 4")


def test_the_temperature_scales_in_the_projection_dtype():
    x = keras.ops.cast(RNG.normal(size=(2, 3)), "float16")
    got = scale_by_temperature(x, np.float32(2.5))
    assert keras.backend.standardize_dtype(got.dtype) == "float16"
    np.testing.assert_allclose(numpy_of(got), numpy_of(x).astype("float32") * 2.5, rtol=1e-3)


@pytest.mark.parametrize("parameterization", ["lookup", "circulant"])
def test_relative_bias_by_offset_is_the_matrix_at_those_offsets(parameterization):
    t, heads = 5, 2
    layer = RelativeBias(t, heads, parameterization=parameterization)
    layer.build((None, heads, t, t))
    biases = RNG.normal(size=(heads, 2 * t)).astype("float32")
    layer.biases.assign(biases)
    offsets = np.array([[0, -3, 4], [2, -4, 1]], "int32")
    if parameterization == "lookup":
        expected = biases[:, offsets + t]
    else:  # the circulant's first column Re(IFFT(a^r)) at (i - j) mod 2t
        expected = np.fft.ifft(biases.astype("float64"), axis=-1).real[:, offsets % (2 * t)]
    np.testing.assert_allclose(numpy_of(layer.bias_for_offsets(offsets)), expected, atol=1e-5)


def test_alibi_by_offset_is_the_slope_times_the_distance():
    offsets = np.array([[0, -3], [2, 7]], "int32")
    slopes = np.array([ref.alibi_slope(h, 4) for h in range(4)])
    expected = -slopes[:, None, None] * np.abs(offsets)[None]
    np.testing.assert_allclose(numpy_of(SymmetricAlibiBias(4).bias_for_offsets(offsets)), expected, rtol=1e-6)


def test_every_row_acts_at_known_stages_and_temperature_and_shaw_are_rows():
    on = SelfAttention(2, 4, max_len=6, temperature=True, relative_position_representation=2, attention_conv="1d")
    stages = {row.name: set(row.acts_of(on)) for row in MODIFICATIONS}
    assert all(acts <= set(STAGES) for acts in stages.values())
    assert stages["temperature"] == {"projections"}
    assert stages["relative_position_representation"] == {"scores", "values"}


@pytest.mark.parametrize("policy", ["float32", "mixed_float16"])
def test_both_attention_layers_compute_the_same_with_temperature_and_shaws_terms(policy):
    """One implementation: the tagger's layer and the drop-in (no bias, identity output projection)
    give the same outputs for the same weights, every stage on (projections and values included)."""
    heads, dim, t = 2, 4, 5
    options = {"temperature": True, "relative_position_representation": 2, "alibi": True, "max_len": t}
    tagger = SelfAttention(heads, dim, dtype=policy, **options)
    drop_in = MultiHeadAttention(heads, dim, use_bias=False, dtype=policy, **options)
    x = RNG.normal(size=(2, t, heads * dim)).astype("float32")
    tagger.build(x.shape)
    drop_in.build(x.shape, x.shape)
    kernels = [RNG.normal(size=(heads * dim, heads, dim)).astype("float32") for _ in range(3)]
    temperature = RNG.uniform(0.5, 2.0, size=(3, heads)).astype("float32")
    shaw = [RNG.normal(size=(5, dim)).astype("float32") for _ in range(2)]
    tagger.set_weights([*kernels, temperature, *shaw])
    output = np.eye(heads * dim, dtype="float32").reshape(heads, dim, heads * dim)
    drop_in.set_weights([*kernels, output, temperature, *shaw])
    atol = 1e-5 if policy == "float32" else 2e-2
    np.testing.assert_allclose(numpy_of(drop_in(x, x)), numpy_of(tagger(x)), atol=atol)
