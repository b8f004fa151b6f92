"""Keras' own tests of its `MultiHeadAttention` (the file Keras ships in its wheel,
keras/src/layers/attention/multi_head_attention_test.py), run against convatt's layer:
unmodified, every one must pass, as the drop-in promise says; with the modifications on
(combinations that together switch every modification on), every one that can apply must
pass, and each that cannot is listed with the reason (marked an expected failure, so one
that starts to pass is reported)."""

from __future__ import annotations

import unittest

import pytest

from convatt.layers import MultiHeadAttention

keras_tests = pytest.importorskip(
    "keras.src.layers.attention.multi_head_attention_test", reason="this Keras ships no tests of its layer"
)
keras_layers = pytest.importorskip("keras.src.layers")

MAX_LEN = 64  # past every length Keras' tests use
# Each modification is on in at least one of these (+P, +R, the temperature, the 2-d and 1-d
# convolutions after and before the softmax, Multi-Token Attention's kernel, Shaw, ALiBi,
# talking heads).
MODIFIED = {
    "P+R+Temp+Conv2d": dict(position_interaction=True, relative_bias=True, temperature=True, attention_conv="2d"),
    "Conv+Shaw": dict(attention_conv="1d", relative_position_representation=3),
    "MTA-kq+Talking+ALiBi": dict(
        attention_conv="2d", conv_before_softmax=True, conv_kernel_size=(2, 9), talking_heads=True, alibi=True
    ),
    "Conv-pre+R": dict(attention_conv="1d", conv_before_softmax=True, relative_bias=True),
}
NEEDS_MAX_LEN = ("position_interaction", "relative_bias", "attention_conv")
# Keras' tests that cannot apply to a modified layer, and why.
NOT_APPLICABLE = {}


def _with_layer(layer_class: type, name: str) -> type:
    """Keras' test case with `layers.MultiHeadAttention` replaced by `layer_class` while it runs."""

    class KerasOwnTest(keras_tests.MultiHeadAttentionTest):
        def setUp(self):
            super().setUp()
            self._keras_class = keras_layers.MultiHeadAttention
            keras_layers.MultiHeadAttention = layer_class

        def tearDown(self):
            keras_layers.MultiHeadAttention = self._keras_class
            super().tearDown()

    for test, reason in NOT_APPLICABLE.items() if layer_class is not MultiHeadAttention else ():
        setattr(KerasOwnTest, test, unittest.expectedFailure(getattr(keras_tests.MultiHeadAttentionTest, test)))
    KerasOwnTest.__name__ = KerasOwnTest.__qualname__ = f"TestKerasOwn_{name}"
    return KerasOwnTest


def _modified(name: str, options: dict) -> type:
    """convatt's layer with `options` on by default (a max_len where one is needed)."""
    if any(options.get(option) for option in NEEDS_MAX_LEN):
        options = {**options, "max_len": MAX_LEN}

    class Modified(MultiHeadAttention):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**options, **kwargs})

    Modified.__name__ = Modified.__qualname__ = f"MultiHeadAttention_{name.replace('+', '_').replace('-', '_')}"
    return Modified


TestKerasOwnPlain = pytest.mark.slow(_with_layer(MultiHeadAttention, "plain"))
for _name, _options in MODIFIED.items():
    _cls = pytest.mark.slow(_with_layer(_modified(_name, _options), _name))
    globals()[_cls.__name__] = _cls
