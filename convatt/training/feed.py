"""The training batches of a run as one stream for `keras.Model.fit`.

Epoch `e`'s batches are `convatt.data.batching`'s, in the order `batch_order` gives them
for the shuffle seed of (run seed, e): what the trainer fed `train_on_batch` before it
trained through `fit`, so the same seed gives the same numbers, and a resumed run (`fit`'s
`initial_epoch`) gets the same batches as one that was never interrupted.

The stream is indexed globally (batch `i` is epoch `first_epoch + i // n`, batch `i % n`),
so a batch depends on nothing but its index: prefetching (tf.data runs ahead of the
training step in a thread) cannot give a batch the wrong epoch's order. `fit` is told
`steps_per_epoch=n` and keeps one iterator across epochs.

What a batch holds is the kind of run's (`TrainRows`, from the trainer's `train_rows` hook);
the order, the epochs and the tf.data wiring are the same for every kind.
"""

from __future__ import annotations

import itertools
import typing

import keras
import numpy as np

from convatt.data.batching import batch_order

Batch = tuple[typing.Any, np.ndarray, np.ndarray]  # (inputs, targets, sample weights)


class TrainRows(typing.Protocol):
    """A training split's rows as batches: what a kind of run feeds its model."""

    def __len__(self) -> int:
        """The split's rows (encoded sequences)."""

    def batch(self, rows: np.ndarray) -> Batch:
        """(inputs, targets, sample weights) of the rows `rows`."""

    def tokens(self, rows: np.ndarray) -> float:
        """The scored tokens of the rows `rows`: the weight of their batch's accuracy."""

    def varying_axes(self, batch: Batch) -> typing.Any:
        """For each array of `batch` (the same structure), how many of its leading axes vary
        from batch to batch (1: the batch's rows; 2: also its length)."""


def batches_per_epoch(rows: int, batch_size: int) -> int:
    """The batches of an epoch over `rows` rows (the last one may be short; at least one)."""
    return max(1, -(-rows // batch_size))


def shuffle_seed(seed: int, epoch: int) -> int:
    """The batch order's seed of one epoch: fixed by the run's seed and the epoch alone."""
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])


class TrainBatches(keras.utils.PyDataset):
    """The batches of `rows` for epochs `first_epoch`, `first_epoch + 1`, ... (1-based)."""

    def __init__(self, rows: TrainRows, batch_size: int, seed: int, first_epoch: int):
        super().__init__(workers=1, use_multiprocessing=False)
        self.rows, self.batch_size, self.seed, self.first_epoch = rows, batch_size, seed, first_epoch
        self.n_batches = batches_per_epoch(len(rows), batch_size)
        self._orders: dict[int, list[np.ndarray]] = {}

    def order(self, epoch: int) -> list[np.ndarray]:
        """The index arrays of epoch `epoch`'s batches (the last two epochs' are cached)."""
        if epoch not in self._orders:
            self._orders = {e: o for e, o in self._orders.items() if e == epoch - 1}
            self._orders[epoch] = batch_order(len(self.rows), self.batch_size, shuffle_seed(self.seed, epoch))
        return self._orders[epoch]

    def tokens(self, epoch: int, batch: int) -> float:
        """The scored tokens of a batch (1-based batch): the weight of its accuracy."""
        return self.rows.tokens(self.order(epoch)[batch - 1])

    @property
    def num_batches(self) -> None:
        return None  # endless: fit's steps_per_epoch cuts it into epochs

    def __getitem__(self, index: int) -> Batch:
        epoch, batch = self.first_epoch + index // self.n_batches, index % self.n_batches
        return self.rows.batch(self.order(epoch)[batch])

    def for_fit(self):
        """What to give `fit`: this dataset, or under TensorFlow a tf.data pipeline over it
        with the shapes that vary declared (Keras would infer fixed shapes from two batches)."""
        if keras.backend.backend() != "tensorflow":
            return self
        import tensorflow as tf

        def spec(array: np.ndarray, varying: int) -> tf.TensorSpec:
            shape = [None if axis < varying else n for axis, n in enumerate(array.shape)]
            return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

        first = self[0]
        signature = keras.tree.map_structure(spec, first, self.rows.varying_axes(first))
        stream = lambda: (self[i] for i in itertools.count())
        return tf.data.Dataset.from_generator(stream, output_signature=signature).prefetch(2)
