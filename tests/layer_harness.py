"""The checks every layer passes, modelled on KerasHub's `TestCase.run_layer_test`.

`run_layer_test(cls, init_kwargs, inputs, expected_output_shape, tmp_path)` checks, for
the layer built from `init_kwargs`:

- config: `from_config(get_config())` gives the same (JSON) config, the class is
  registered as `convatt>Name`, and `keras.layers.serialize` / `deserialize` through
  JSON revives it;
- under each dtype policy of `POLICIES` (float32, mixed_float16, mixed_bfloat16):
  - a symbolic call (`keras.Input`) and an eager call give the expected shape (the
    symbolic one with batch `None`) and the policy's compute dtype, for every output;
  - the weights have the policy's variable dtype (float32), and every sublayer has
    the layer's policy;
  - with the float32 layer's weights, the outputs are within the policy's rounding
    of the float32 outputs (`TOLERANCE`, relative to the outputs' scale);
  - the layer saved in a `.keras` model and loaded gives identical outputs, and the
    loaded layer has the same policy;
  - one `fit` step (SGD, mse to random targets) changes the trainable weights and
    leaves them finite and float32.

Weights are random (`randomize`), so a lost or swapped weight shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import numpy as np

POLICIES = ("float32", "mixed_float16", "mixed_bfloat16")
# Largest |mixed - float32| / max(1, max |float32 output|) accepted: a few roundings of
# float16 (11 bits) / bfloat16 (8 bits).
TOLERANCE = {"float32": 0.0, "mixed_float16": 1e-2, "mixed_bfloat16": 4e-2}


def randomize(model_or_layer, seed: int = 0, low: float = -0.5, high: float = 0.5) -> list[np.ndarray]:
    """Give every weight random values; returns them (float64)."""
    rng = np.random.default_rng(seed)
    values = [rng.uniform(low, high, w.shape) for w in model_or_layer.weights]
    model_or_layer.set_weights([v.astype("float32") for v in values])
    return values


def to_numpy(structure) -> list[np.ndarray]:
    """Flat list of float64 arrays from a tensor or a nest of tensors."""
    return [
        np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(x, "float32")), np.float64)
        for x in keras.tree.flatten(structure)
    ]


def check_config_round_trip(layer: keras.layers.Layer) -> None:
    config = layer.get_config()
    as_json = json.dumps(config, sort_keys=True)
    clone = type(layer).from_config(config)
    assert json.dumps(clone.get_config(), sort_keys=True) == as_json
    assert keras.saving.get_registered_name(type(layer)) == f"convatt>{type(layer).__name__}"
    serialized = json.loads(json.dumps(keras.layers.serialize(layer)))
    revived = keras.layers.deserialize(serialized)
    assert type(revived) is type(layer)
    assert json.dumps(revived.get_config(), sort_keys=True) == as_json


def check_clone_computes_the_same(layer: keras.layers.Layer, *inputs: np.ndarray, atol: float = 1e-6) -> None:
    """A `from_config` clone of the built `layer`, with its weights, has the same weight
    paths and outputs, and the same config (also through `keras.layers.deserialize`)."""
    out = to_numpy(layer(*inputs))
    config = layer.get_config()
    clone = type(layer).from_config(config)
    assert clone.get_config() == config
    revived = keras.layers.deserialize(keras.layers.serialize(layer))
    assert type(revived) is type(layer) and revived.get_config() == config
    assert keras.saving.get_registered_name(type(layer)) == f"convatt>{type(layer).__name__}"
    clone(*inputs)  # build
    assert [w.path.split("/", 1)[1] for w in clone.weights] == [w.path.split("/", 1)[1] for w in layer.weights]
    clone.set_weights(layer.get_weights())
    for a, b in zip(to_numpy(clone(*inputs)), out):
        np.testing.assert_allclose(a, b, atol=atol)


def _symbolic(inputs: tuple, tensor_kwargs: dict) -> tuple[list, dict]:
    """keras.Input for every array argument (batch dimension left open)."""
    sym_inputs = [keras.Input(x.shape[1:], dtype=str(x.dtype)) for x in inputs]
    sym_kwargs = {k: keras.Input(v.shape[1:], dtype=str(v.dtype)) for k, v in tensor_kwargs.items()}
    return sym_inputs, sym_kwargs


def _check_outputs(outputs, expected_shapes: list[tuple], compute_dtype: str, symbolic: bool) -> None:
    flat = keras.tree.flatten(outputs)
    assert len(flat) == len(expected_shapes), (len(flat), expected_shapes)
    for tensor, shape in zip(flat, expected_shapes):
        expected = (None,) + tuple(shape[1:]) if symbolic else tuple(shape)
        kind = "symbolic" if symbolic else "eager"
        assert tuple(tensor.shape) == expected, f"{kind} shape {tuple(tensor.shape)} != {expected}"
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        assert dtype == compute_dtype, f"{kind} output dtype {dtype}, policy compute dtype {compute_dtype}"


def _check_policy(layer: keras.layers.Layer, policy: str) -> None:
    expected = keras.dtype_policies.get(policy)
    assert layer.dtype_policy.name == policy
    for weight in layer.weights:
        assert keras.backend.standardize_dtype(weight.dtype) == expected.variable_dtype, weight.path
    for sublayer in layer._flatten_layers(include_self=False):
        assert sublayer.compute_dtype == expected.compute_dtype, sublayer.name
        assert sublayer.variable_dtype == expected.variable_dtype, sublayer.name


def _check_saving(model: keras.Model, model_inputs: list, layer: keras.layers.Layer, path: Path) -> None:
    before = to_numpy(model(model_inputs))
    model.save(path)
    loaded = keras.models.load_model(path)  # registered: no custom_objects needed
    for a, b in zip(to_numpy(loaded(model_inputs)), before):
        np.testing.assert_array_equal(a, b)  # exactly: the same eager program on copied weights
    assert loaded.get_layer(layer.name).dtype_policy.name == layer.dtype_policy.name
    for a, b in zip(model.weights, loaded.weights):
        assert a.path == b.path
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))


def _check_fit_step(model: keras.Model, model_inputs: list, layer: keras.layers.Layer) -> None:
    rng = np.random.default_rng(1)
    targets = [rng.normal(size=tuple(x.shape)).astype("float32") for x in keras.tree.flatten(model(model_inputs))]
    before = [keras.ops.convert_to_numpy(w) for w in layer.trainable_weights]
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(model_inputs, targets, batch_size=len(model_inputs[0]), epochs=1, verbose=0)
    after = [keras.ops.convert_to_numpy(w) for w in layer.trainable_weights]
    assert any(not np.array_equal(a, b) for a, b in zip(after, before)), "fit changed no weight"
    for weight, value in zip(layer.trainable_weights, after):
        assert np.isfinite(value).all(), weight.path
        assert keras.backend.standardize_dtype(weight.dtype) == "float32", weight.path


def run_layer_test(
    cls: Callable[..., keras.layers.Layer],
    init_kwargs: dict[str, Any],
    inputs: np.ndarray | tuple,
    expected_output_shape: tuple | list[tuple],
    tmp_path: Path,
    call_kwargs: dict[str, Any] | None = None,
    expected_num_weights: int | None = None,
    run_training_check: bool = True,
    policies: tuple[str, ...] = POLICIES,
) -> None:
    """All the checks of this module for one layer configuration (see the module docstring).

    Args:
        cls, init_kwargs: the layer is `cls(**init_kwargs, dtype=policy)`.
        inputs: one array or a tuple of arrays, the positional call arguments.
        expected_output_shape: the eager output shape, or a list of them for a nest
            of outputs (in `keras.tree.flatten` order).
        tmp_path: where the `.keras` files go.
        call_kwargs: keyword call arguments; arrays among them become model inputs.
        expected_num_weights: if given, `len(layer.weights)`.
        run_training_check: run the `fit` step (only for layers with trainable weights).
    """
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    call_kwargs = dict(call_kwargs or {})
    tensor_kwargs = {k: v for k, v in call_kwargs.items() if isinstance(v, np.ndarray)}
    expected_shapes = expected_output_shape if isinstance(expected_output_shape, list) else [expected_output_shape]
    model_inputs = list(inputs) + list(tensor_kwargs.values())
    check_config_round_trip(cls(**init_kwargs))

    reference_weights, reference_outputs = None, None
    for policy in policies:
        compute_dtype = keras.dtype_policies.get(policy).compute_dtype
        layer = cls(**init_kwargs, dtype=policy)
        revived = type(layer).from_config(layer.get_config())
        assert revived.dtype_policy.name == policy

        sym_inputs, sym_kwargs = _symbolic(inputs, tensor_kwargs)
        sym_outputs = layer(*sym_inputs, **{**call_kwargs, **sym_kwargs})
        _check_outputs(sym_outputs, expected_shapes, compute_dtype, symbolic=True)
        if expected_num_weights is not None:
            assert len(layer.weights) == expected_num_weights
        _check_policy(layer, policy)

        if reference_weights is None:
            reference_weights = [v.astype("float32") for v in randomize(layer)]
        else:
            layer.set_weights(reference_weights)
        outputs = layer(*inputs, **call_kwargs)
        _check_outputs(outputs, expected_shapes, compute_dtype, symbolic=False)
        if reference_outputs is None:
            reference_outputs = to_numpy(outputs)
        for got, want in zip(to_numpy(outputs), reference_outputs):
            scale = max(1.0, float(np.abs(want).max()))
            assert np.abs(got - want).max() <= TOLERANCE[policy] * scale, (policy, np.abs(got - want).max())

        model = keras.Model(sym_inputs + list(sym_kwargs.values()), sym_outputs)
        _check_saving(model, model_inputs, layer, tmp_path / f"{type(layer).__name__}-{policy}.keras")
        if run_training_check and layer.trainable_weights:
            _check_fit_step(model, model_inputs, layer)
