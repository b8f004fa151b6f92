"""RMSpropKeras2: Keras 2.2.4's RMSprop update, against the formula in NumPy."""

import keras
import numpy as np
import pytest

from convatt.training.optimizers import RMSpropKeras2


def keras2_rmsprop(p, grads, lr=1e-3, rho=0.9, eps=1e-7):
    """Keras 2.2.4, keras/optimizers.py RMSprop.get_updates, step by step."""
    a = np.zeros_like(p)
    for g in grads:
        a = rho * a + (1 - rho) * g**2
        p = p - lr * g / (np.sqrt(a) + eps)
    return p


def apply(optimizer, p0, grads):
    variable = keras.Variable(p0)
    for g in grads:
        optimizer.apply_gradients([(keras.ops.convert_to_tensor(g), variable)])
    return keras.ops.convert_to_numpy(variable)


def test_several_steps_match_keras_2_2_4():
    rng = np.random.default_rng(0)
    p0 = rng.normal(size=(5, 3)).astype("float32")
    # small and large gradients: the two rules differ most where a < epsilon
    grads = [(rng.normal(size=(5, 3)) * scale).astype("float32") for scale in (1e-5, 1e-3, 1.0, 1e-4, 0.1)]
    got = apply(RMSpropKeras2(), p0, grads)
    np.testing.assert_allclose(got, keras2_rmsprop(p0.astype("float64"), grads), rtol=1e-5, atol=1e-6)


def test_it_is_not_keras_3s_rule_for_small_gradients():
    p0 = np.zeros((4,), "float32")
    grads = [np.full((4,), 1e-5, "float32")] * 3
    ours = apply(RMSpropKeras2(), p0, grads)
    keras3 = apply(keras.optimizers.RMSprop(), p0, grads)
    # Keras 2.2.4: ~lr per step; Keras 3: lr * g / sqrt(a + eps), far smaller here
    assert np.all(np.abs(ours) > 10 * np.abs(keras3))
    np.testing.assert_allclose(ours, keras2_rmsprop(p0.astype("float64"), grads), rtol=1e-5)


def test_config_round_trip_and_refuses_momentum():
    optimizer = RMSpropKeras2(learning_rate=0.01, rho=0.8, epsilon=1e-6)
    again = RMSpropKeras2.from_config(optimizer.get_config())
    assert (float(again.learning_rate), again.rho, again.epsilon) == pytest.approx((0.01, 0.8, 1e-6))
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, RMSpropKeras2)
    with pytest.raises(ValueError, match="no momentum"):
        RMSpropKeras2(momentum=0.9)


def test_a_model_saved_with_it_resumes_with_its_state(tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(16, 3)).astype("float32"), rng.normal(size=(16, 1)).astype("float32")
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=RMSpropKeras2(), loss="mse")
    model.fit(x, y, epochs=2, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.optimizer, RMSpropKeras2)
    for a, b in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
