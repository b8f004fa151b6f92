"""The training batches of a run as one stream for `keras.Model.fit`.

Epoch `e`'s batches are `convatt.data.batching`'s, in the order `batch_order` gives them
for the shuffle seed of (run seed, e): what the trainer fed `train_on_batch` before it
trained through `fit`, so the same seed gives the same numbers, and a resumed run (`fit`'s
`initial_epoch`) gets the same batches as one that was never interrupted.

The stream is indexed globally (batch `i` is epoch `first_epoch + i // n`, batch `i % n`),
so a batch depends on nothing but its index: prefetching (tf.data runs ahead of the
training step in a thread) cannot give a batch the wrong epoch's order. `fit` is told
`steps_per_epoch=n` and keeps one iterator across epochs.
"""

from __future__ import annotations

import itertools

import keras
import numpy as np

from convatt.data import EncodedSplit
from convatt.data.batching import batch_order, make_inputs


def shuffle_seed(seed: int, epoch: int) -> int:
    """The batch order's seed of one epoch: fixed by the run's seed and the epoch alone."""
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])


class TrainBatches(keras.utils.PyDataset):
    """(inputs, tags, sample_weight) of epochs `first_epoch`, `first_epoch + 1`, ... (1-based)."""

    def __init__(self, split: EncodedSplit, batch_size: int, seed: int, first_epoch: int, few_shapes: bool):
        super().__init__(workers=1, use_multiprocessing=False)
        self.split, self.batch_size, self.seed = split, batch_size, seed
        self.first_epoch, self.few_shapes = first_epoch, few_shapes
        self.n_batches = max(1, -(-self.n_rows() // batch_size))
        self._orders: dict[int, list[np.ndarray]] = {}

    def n_rows(self) -> int:
        """The split's rows (encoded sequences)."""
        return len(self.split.words)

    def order(self, epoch: int) -> list[np.ndarray]:
        """The index arrays of epoch `epoch`'s batches (the last two epochs' are cached)."""
        if epoch not in self._orders:
            self._orders = {e: o for e, o in self._orders.items() if e == epoch - 1}
            self._orders[epoch] = batch_order(self.n_rows(), self.batch_size, shuffle_seed(self.seed, epoch))
        return self._orders[epoch]

    def tokens(self, epoch: int, batch: int) -> float:
        """The non-PAD tokens of a batch (1-based batch): the weight of its accuracy."""
        return float((self.split.tags[self.order(epoch)[batch - 1]] != 0).sum())

    @property
    def num_batches(self) -> None:
        return None  # endless: fit's steps_per_epoch cuts it into epochs

    def __getitem__(self, index: int):
        epoch, batch = self.first_epoch + index // self.n_batches, index % self.n_batches
        idx = self.order(epoch)[batch]
        tags = self.split.tags[idx]
        inputs = make_inputs(self.split.words[idx], self.split.chars[idx], few_shapes=self.few_shapes)
        return inputs, tags, (tags != 0).astype("float32")

    def for_fit(self):
        """What to give `fit`: this dataset, or under TensorFlow a tf.data pipeline over it
        with the shapes that vary declared (Keras would infer fixed shapes from two batches)."""
        if keras.backend.backend() != "tensorflow":
            return self
        import tensorflow as tf

        def spec(array: np.ndarray, varying: tuple[int, ...]) -> tf.TensorSpec:
            shape = [None if axis in varying else n for axis, n in enumerate(array.shape)]
            return tf.TensorSpec(shape, tf.as_dtype(array.dtype))

        inputs, tags, weights = self[0]
        signature = (
            {name: spec(a, (0, 1) if name == "char_rows" else (0,)) for name, a in inputs.items()},
            spec(tags, (0,)),
            spec(weights, (0,)),
        )
        stream = lambda: (self[i] for i in itertools.count())
        return tf.data.Dataset.from_generator(stream, output_signature=signature).prefetch(2)
