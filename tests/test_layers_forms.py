"""The forms of the attention core, chosen in one place (`convatt/layers/forms.py`), and the
house rules of convatt/layers that keep it so: no other module asks for the backend, XLA or the
device; no module over 400 lines; no measurement or commit hash in the layers' code."""

import ast
import dataclasses
import re
from pathlib import Path

import keras
import numpy as np
import pytest

from convatt.layers import MultiHeadAttention, SelfAttention
from convatt.layers.forms import (
    PUBLISHED,
    compile_core,
    drop_in_forms,
    on_accelerator,
    published_forms,
    tracing_island,
)

LAYERS = Path(__file__).resolve().parents[1] / "convatt" / "layers"
FORMS_MODULE = LAYERS / "forms.py"
ENVIRONMENT_CALLS = {
    "backend",
    "compiled_by_xla",
    "on_accelerator",
    "get_enclosing_xla_context",
    "list_devices",
    "executing_eagerly",
}


def test_the_tagger_takes_the_published_forms_and_the_drop_in_those_of_its_environment():
    assert SelfAttention.choose_forms is published_forms and published_forms() == PUBLISHED
    assert MultiHeadAttention.choose_forms is drop_in_forms
    assert PUBLISHED.conv2d == "depthwise" and PUBLISHED.talking_heads == "einsum" and PUBLISHED.shaw == "gathered"
    assert not compile_core(None, False)  # an eager call (TensorFlow) or JAX: no island


def test_the_core_is_an_xla_island_in_tensorflow_s_graphs_without_xla_only():
    if keras.backend.backend() != "tensorflow":
        assert not compile_core(True, False)
        return
    import tensorflow as tf

    def asked(jit_compile: bool, training=True, symbolic_or_stateless=False) -> bool:
        answer = []
        tf.function(
            lambda: answer.append(compile_core(training, symbolic_or_stateless)) or 0.0, jit_compile=jit_compile
        )()
        return answer[0]

    assert asked(jit_compile=False) and asked(jit_compile=False, training=None)
    assert not asked(jit_compile=True)  # XLA compiles the whole step already
    assert not asked(jit_compile=False, symbolic_or_stateless=True)
    assert not asked(jit_compile=False, training=tf.constant(True))  # not a Python value


@pytest.mark.skipif(on_accelerator(), reason="the CPU's forms")
def test_the_drop_in_forms_follow_the_compilation_on_a_cpu():
    """Under JAX (always XLA) and inside TensorFlow's `jit_compile=True`: the skews, chunked sums;
    TensorFlow without XLA: the gathered tables and autodiff's batch sums."""
    if keras.backend.backend() == "jax":
        forms = drop_in_forms()
        assert (forms.shaw, forms.bias_batch_sum, forms.conv2d_kernel_gradient) == ("skewed", "product", "convolved")
        assert forms.chunked_sums and forms.anchored and forms.talking_heads_gradient == "autodiff"
        return
    import tensorflow as tf

    eager = drop_in_forms()
    assert (eager.shaw, eager.bias_batch_sum, eager.chunked_sums) == ("gathered", "autodiff", False)
    traced = {}

    @tf.function(jit_compile=True)
    def under_xla(x):
        traced["forms"] = drop_in_forms()
        with tracing_island():  # the island's trace: XLA, but its backward is TensorFlow's gradient
            traced["island"] = drop_in_forms()
        return x

    under_xla(tf.constant(1.0))
    forms = traced["forms"]
    assert (forms.shaw, forms.bias_batch_sum, forms.talking_heads_gradient) == ("skewed", "additions", "per_example")
    assert forms.chunked_sums and not forms.anchored and forms.conv2d_kernel_gradient == "row_summed"
    assert traced["island"] == dataclasses.replace(forms, talking_heads_gradient="autodiff")
    assert drop_in_forms() == eager  # the island's trace ended with its block


def test_a_layer_with_the_other_forms_computes_the_same_values():
    """The forms differ in float order only: a `SelfAttention` switched to the drop-in's forms."""
    options = dict(attention_conv="2d", talking_heads=True, relative_position_representation=2, relative_bias=True)
    x = np.random.default_rng(0).normal(size=(2, 6, 8)).astype("float32")
    layer = SelfAttention(2, 4, max_len=6, **options)
    published = keras.ops.convert_to_numpy(layer(x, use_causal_mask=True))
    layer.choose_forms = drop_in_forms
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, use_causal_mask=True)), published, atol=1e-5)


def _environment_calls(path: Path) -> list[str]:
    """`line name` of each call of a function that asks for the backend, XLA or the device."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ENVIRONMENT_CALLS:
                found.append(f"{node.lineno} {name}")
    return found


@pytest.mark.tf_only
def test_only_the_forms_module_asks_for_the_backend_xla_or_the_device():
    asking = {
        str(path.relative_to(LAYERS)): calls
        for path in sorted(LAYERS.rglob("*.py"))
        if path != FORMS_MODULE and (calls := _environment_calls(path))
    }
    assert asking == {}


@pytest.mark.tf_only
def test_no_module_of_the_layers_is_over_400_lines():
    long = {str(p.relative_to(LAYERS)): n for p in LAYERS.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


MEASUREMENT = re.compile(
    r"\d\s?(ms|GiB|H200)\b|\d(\.\d+)?x (faster|slower)|\b\d+(\.\d+)?-\d+(\.\d+)?x\b|\b[0-9a-f]{7}\b"
)


@pytest.mark.tf_only
def test_the_layers_code_holds_no_measurement_or_commit_hash():
    """The numbers live in docs/speed.md; the code says which form is used and why."""
    found = [
        f"{path.relative_to(LAYERS)}:{number} {line.strip()}"
        for path in sorted(LAYERS.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if MEASUREMENT.search(line) and "0x" not in line
    ]
    assert found == []
