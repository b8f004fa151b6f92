"""Keras' own tests of its `MultiHeadAttention` (the file Keras ships in its wheel,
keras/src/layers/attention/multi_head_attention_test.py), run against convatt's layer:
unmodified, every one must pass, as the drop-in promise says; with the modifications on
(combinations that together switch every modification on), every one that can apply must
pass, and each that cannot is listed with the reason (marked an expected failure, so one
that starts to pass is reported)."""

from __future__ import annotations

import functools
import unittest

import keras
import pytest

from convatt.layers import MultiHeadAttention

keras_tests = pytest.importorskip(
    "keras.src.layers.attention.multi_head_attention_test", reason="this Keras ships no tests of its layer"
)
keras_layers = pytest.importorskip("keras.src.layers")

MAX_LEN = 64  # past every length Keras' tests use
# Each modification is on in at least one of these (+P, +R, the temperature, the 1-d and 2-d
# convolutions after and before the softmax, Multi-Token Attention's kernel, Shaw, ALiBi,
# talking heads); the last has no convolution.
MODIFIED = {
    "P+R+Temp+Conv2d": dict(position_interaction=True, relative_bias=True, temperature=True, attention_conv="2d"),
    "Conv+Shaw": dict(attention_conv="1d", relative_position_representation=3),
    "MTA-kq+Talking+ALiBi": dict(
        attention_conv="2d", conv_before_softmax=True, conv_kernel_size=(2, 9), talking_heads=True, alibi=True
    ),
    "Conv-pre+R": dict(attention_conv="1d", conv_before_softmax=True, relative_bias=True),
    "P+Shaw+ALiBi+Talking": dict(
        position_interaction=True, relative_position_representation=2, alibi=True, talking_heads=True
    ),
}
NEEDS_MAX_LEN = ("position_interaction", "relative_bias", "attention_conv")

# Keras' tests that cannot apply to a modified layer, and why.
_WEIGHTS = "it counts Keras' 8 weights; the modifications add their own"
_NUMBERS = (
    "its expected numbers come from setting Keras' 8 weights; the modifications have more and change the attention"
)
_AXES = (
    "it attends over another axis or several (inputs of rank 4 or 5); the modifications take (batch, length, "
    "features) with one attention axis (a ValueError says so)"
)
_CAUSAL_FLAG = (
    "it compares use_causal_mask=True with an equal explicit mask; a convolution aligns its query taps on past "
    "queries only under use_causal_mask (an explicit mask leaves them centred, as documented)"
)
_WINDOW = (
    "it checks for zero weight outside the sliding window; a convolution after the softmax spreads weight to "
    "neighbouring keys"
)
ANY_MODIFICATION = {
    "test_basics": _WEIGHTS,
    "test_lora": _WEIGHTS,
    "test_correctness_disable_flash_attention": _NUMBERS,
    "test_correctness_enable_flash_attention": _NUMBERS,
    "test_attention_axes_negative_indexing": _AXES,
    "test_causal_only_masks_non_4d_inputs": _AXES,
    "test_compute_output_shape_different_qv_last_dims": _AXES,
    "test_compute_output_shape_high_dim_different_proj": _AXES,
    "test_compute_output_shape_high_dim_same_proj": _AXES,
    "test_high_dim_attention_4d_inputs_1freebatch_mask2": _AXES,
    "test_high_dim_attention_4d_inputs_1freebatch_mask3": _AXES,
    "test_high_dim_attention_4d_inputs_1freebatch_mask4": _AXES,
    "test_high_dim_attention_4d_inputs_2d_attention": _AXES,
    "test_high_dim_attention_5d_inputs_2d_attention": _AXES,
    "test_high_dim_attention_5d_inputs_2d_attention_fullmask": _AXES,
}
A_CONVOLUTION = {
    "test_causal_only_fast_path": _CAUSAL_FLAG,
    "test_causal_only_masks_when_fused_path_disabled_dropout_only": _CAUSAL_FLAG,
    "test_causal_only_with_other_mask_falls_back": _CAUSAL_FLAG,
    "test_compute_attention_combines_causal_and_explicit_mask_fused_fallback": _CAUSAL_FLAG,
    "test_compute_attention_combines_causal_and_explicit_mask_manual_path": _CAUSAL_FLAG,
    "test_masking_causal": _CAUSAL_FLAG,
}
A_CONVOLUTION_AFTER_THE_SOFTMAX = {"test_sliding_window": _WINDOW}


def not_applicable(options: dict) -> dict[str, str]:
    """Keras' tests that cannot apply to a layer with `options` on, and why."""
    tests = {} if not options else dict(ANY_MODIFICATION)
    if options.get("attention_conv"):
        tests.update(A_CONVOLUTION)
        if not options.get("conv_before_softmax"):
            tests.update(A_CONVOLUTION_AFTER_THE_SOFTMAX)
    return tests


def _expected_failure(method):
    """`method` in a new function marked as expected to fail (`unittest.expectedFailure` marks the
    function it is given: Keras' own, shared by every class here)."""

    @functools.wraps(method)
    def test(self):
        return method(self)

    return unittest.expectedFailure(test)


def _with_layer(layer_class: type, name: str, options: dict) -> type:
    """Keras' test case with `layers.MultiHeadAttention` replaced by `layer_class` while it runs;
    the tests that cannot apply expected to fail (one that passes is reported)."""

    class KerasOwnTest(keras_tests.MultiHeadAttentionTest):
        def setUp(self):
            super().setUp()
            self._keras_class = keras_layers.MultiHeadAttention
            keras_layers.MultiHeadAttention = layer_class

        def tearDown(self):
            keras_layers.MultiHeadAttention = self._keras_class
            super().tearDown()

    for test in not_applicable(options):
        setattr(KerasOwnTest, test, _expected_failure(getattr(keras_tests.MultiHeadAttentionTest, test)))
    KerasOwnTest.__name__ = KerasOwnTest.__qualname__ = f"TestKerasOwn_{name}"
    return KerasOwnTest


def _modified(name: str, options: dict) -> type:
    """convatt's layer with `options` on by default (a max_len where one is needed), registered
    so that Keras' save-and-load tests find it."""
    if any(options.get(option) for option in NEEDS_MAX_LEN):
        options = {**options, "max_len": MAX_LEN}

    class Modified(MultiHeadAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**options, **kwargs})

    Modified.__name__ = Modified.__qualname__ = f"MultiHeadAttention_{name.replace('+', '_').replace('-', '_')}"
    return keras.saving.register_keras_serializable("convatt_keras_own_tests")(Modified)


TestKerasOwnPlain = pytest.mark.slow(_with_layer(MultiHeadAttention, "plain", {}))
# The modifications' runs: TensorFlow (their ops run under JAX in the layers' own tests)
for _name, _options in MODIFIED.items():
    _case = _with_layer(_modified(_name, _options), _name.replace("+", "_").replace("-", "_"), _options)
    globals()[_case.__name__] = pytest.mark.slow(pytest.mark.tf_only(_case))
del _case  # else collected twice: pytest collects a TestCase under any name
