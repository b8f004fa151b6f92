"""convatt.training.feed: one stream of training batches for every kind of run, its rows given by
the kind's trainer (the tagger's `TaggedRows`, a sequence task's `SequenceRows`)."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from helpers import LINES

from convatt.data import build_vocabularies, encode_split, load_corpus
from convatt.sequence.data import encode_sequences
from convatt.training.feed import TrainBatches, batches_per_epoch
from convatt.training.sequence_trainer import SequenceRows
from convatt.training.tagger_trainer import TaggedRows


@pytest.fixture(scope="module")
def tagged_rows() -> TaggedRows:
    corpus = load_corpus("ud", LINES).limited(23)
    split = encode_split(corpus.train, build_vocabularies(corpus, "ud"), max_len=20, max_word_len=8)
    return TaggedRows(split, few_shapes=False)


def sequence_rows() -> SequenceRows:
    sentences = [[("a", "b"), ("b", "c"), ("c", "")][:n] for n in (1, 2, 3)] * 5  # 15 rows; "": not scored
    return SequenceRows(encode_sequences(sentences, ["<PAD>", "<OOV>", "a", "b", "c"], 6, exact_match=False))


def test_an_epoch_holds_every_row_once_and_the_stream_runs_on_into_the_next(tagged_rows):
    batches = TrainBatches(tagged_rows, batch_size=4, seed=7, first_epoch=1)
    n = batches.n_batches
    assert n == batches_per_epoch(len(tagged_rows), 4) == -(-len(tagged_rows) // 4)
    for epoch in (1, 2):
        rows = np.concatenate(batches.order(epoch))
        assert sorted(rows.tolist()) == list(range(len(tagged_rows)))
    assert [o.tolist() for o in batches.order(1)] != [o.tolist() for o in batches.order(2)]  # reshuffled
    resumed = TrainBatches(tagged_rows, batch_size=4, seed=7, first_epoch=2)
    for batch in range(n):  # a resumed run gets epoch 2's batches as the uninterrupted one did
        whole, again = batches[n + batch], resumed[batch]
        assert all(np.array_equal(a, b) for a, b in zip(keras.tree.flatten(whole), keras.tree.flatten(again)))


def test_a_batch_weighs_its_real_tokens(tagged_rows):
    batches = TrainBatches(tagged_rows, batch_size=4, seed=1, first_epoch=1)
    for batch in range(1, batches.n_batches + 1):
        inputs, tags, weights = batches[batch - 1]
        assert weights.dtype == np.float32 and np.array_equal(weights, (tags != 0).astype("float32"))
        assert batches.tokens(1, batch) == float((tags != 0).sum()) == float(weights.sum())


def test_a_sequence_batch_is_the_split_s_rows_and_weighs_its_scored_symbols():
    rows = sequence_rows()
    batches = TrainBatches(rows, batch_size=4, seed=3, first_epoch=1)
    inputs, targets, weights = batches[0]
    index = batches.order(1)[0]
    assert np.array_equal(inputs, rows.split.inputs[index]) and np.array_equal(targets, rows.split.targets[index])
    assert batches.tokens(1, 1) == float(weights.sum()) == float(rows.split.weights[index].sum())


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the tf.data pipeline is TensorFlow's")
def test_the_pipeline_declares_the_axes_that_vary(tagged_rows):
    tagged = TrainBatches(tagged_rows, batch_size=4, seed=1, first_epoch=1).for_fit().element_spec
    inputs, tags, weights = tagged
    assert inputs["char_rows"].shape.as_list() == [None, None, 8]  # the batch's distinct char rows vary
    assert inputs["words"].shape.as_list() == inputs["char_index"].shape.as_list() == [None, 20]
    assert tags.shape.as_list() == weights.shape.as_list() == [None, 20]
    symbols, targets, scored = TrainBatches(sequence_rows(), batch_size=4, seed=1, first_epoch=1).for_fit().element_spec
    assert symbols.shape.as_list() == targets.shape.as_list() == scored.shape.as_list() == [None, 6]
    assert (symbols.dtype.name, targets.dtype.name, scored.dtype.name) == ("int32", "int32", "float32")
