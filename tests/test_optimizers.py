"""RMSpropKeras2: Keras 2.2.4's RMSprop update, against the formula in NumPy."""

import keras
import numpy as np
import pytest

from convatt.protocol.optimizers import RMSpropKeras2


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


def keras2_rows(table, ids, upstream, steps, lr=1e-3, rho=0.9, eps=1e-7):
    """Keras 2.2.4 on an embedding: the dense gradient (each id's upstream values summed
    into its row), squared as a whole, `steps` times with the same gradient."""
    grad = np.zeros_like(table)
    np.add.at(grad, ids, upstream)
    return keras2_rmsprop(table, [grad] * steps, lr, rho, eps)


def embedding_step(ids, upstream, table, steps):
    """The rows after `steps` steps of RMSpropKeras2 on loss = sum(embedding(ids) * upstream):
    under TensorFlow the gradient reaches the optimizer as IndexedSlices, one slice per id."""
    layer = keras.layers.Embedding(*table.shape, embeddings_initializer=keras.initializers.Constant(table))
    model = keras.Sequential([keras.Input((len(ids),), dtype="int32"), layer])
    model.compile(optimizer=RMSpropKeras2(), loss=lambda y_true, y_pred: keras.ops.sum(y_pred * y_true))
    for _ in range(steps):
        model.train_on_batch(np.asarray([ids], "int32"), upstream[None].astype("float32"))
    return keras.ops.convert_to_numpy(layer.embeddings)


def test_repeated_embedding_rows_step_as_keras_2_2_4s_dense_rule():
    # row 0 occurs 100 times (a PAD row), row 1 once, row 2 never: the dense rule moves
    # row 0 by about lr per step, not sqrt(100) times that
    rng = np.random.default_rng(2)
    table = rng.normal(size=(3, 4)).astype("float32")
    ids = np.array([0] * 100 + [1])
    upstream = np.full((101, 4), 0.01, "float32")
    got = embedding_step(ids, upstream, table, steps=3)
    want = keras2_rows(table.astype("float64"), ids, upstream.astype("float64"), steps=3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert np.abs(got[0] - table[0]).max() < 0.01  # 0.0074; squared slice by slice: ~0.074
    np.testing.assert_array_equal(got[2], table[2])  # a row without gradient does not move


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="IndexedSlices exist under TensorFlow only")
def test_indexed_slices_with_repeated_rows_are_summed_before_squaring():
    import tensorflow as tf

    # 100 slices of 0.01 for row 0: one dense gradient of 1.0 -> a step of lr / sqrt(0.1)
    slices = tf.IndexedSlices(tf.fill((100, 1), 0.01), tf.zeros((100,), "int64"), tf.constant([2, 1], "int64"))
    variable = keras.Variable(np.zeros((2, 1), "float32"))
    RMSpropKeras2().apply_gradients([(slices, variable)])
    step = keras.ops.convert_to_numpy(variable)
    np.testing.assert_allclose(step[0], -1e-3 / (np.sqrt(0.1) + 1e-7), rtol=1e-5)  # 0.00316, not 0.0316
    assert step[1] == 0
