"""GatherCharFeatures (the tagger's own layer, convatt/model/tagger.py): the harness and values."""

import keras
import numpy as np
import pytest
from layer_harness import run_layer_test

from convatt.model.tagger import GatherCharFeatures


def _inputs():
    features = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")  # 6 distinct rows
    index = np.array([[0, 1, 1, 5, 0], [2, 2, 3, 4, 0]], "int32")
    return features, index


@pytest.mark.tf_only
def test_layer_harness(tmp_path):
    run_layer_test(GatherCharFeatures, {}, _inputs(), (2, 5, 4), tmp_path, expected_num_weights=0)


def test_gathers_each_tokens_row():
    features, index = _inputs()
    out = keras.ops.convert_to_numpy(GatherCharFeatures()(features, index))
    flat = features.reshape(6, 4)
    for b in range(2):
        for t in range(5):
            np.testing.assert_array_equal(out[b, t], flat[index[b, t]])
