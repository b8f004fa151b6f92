"""One run of a causal sequence task, through the tagger's `Trainer`: the same `fit` loop,
callbacks (curve, early stopping, checkpoints, stop requests), run directory and lock; only
the data, the model and what result.json measures differ.

    config.json   the run's `RunConfig` (preset "toy" or "charlm", the variant, the seed)
    vocab.json    the symbols ({"symbols": [...]}: PAD, OOV, then by frequency)
    history.csv, curve.csv   as the tagger's; dev_accuracy is the task's accuracy (find-block:
                  exact match of the answer block; char-lm: next-character accuracy), with
                  dev_bits_per_symbol (the cross-entropy in bits) beside it
    result.json   `RunResult`: dev/test "all" = the task's accuracy, "bits_per_symbol" (bits per
                  character for char-lm), "symbol_accuracy"; test_sentences.csv / dev_sentences.csv:
                  a sample (find-block: 1 token, right if exact) or a chunk (char-lm: its characters)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import keras

from convatt.data import corpus_files, load_corpus
from convatt.data.formats import data_format
from convatt.model.tagger import count_parameters
from convatt.run.fingerprint import DataFingerprint
from convatt.run.schema import (
    CHECKPOINT_FILE,
    DEV_SENTENCE_SCORES_FILE,
    MODEL_FILE,
    RUN_FILES,
    SENTENCE_SCORE_COLUMNS,
    SENTENCE_SCORES_FILE,
    VOCAB_FILE,
    RunConfig,
    RunResult,
)
from convatt.run.storage import remove_temporaries, write_atomically, write_csv, write_json
from convatt.sequence.config import make_sequence_config
from convatt.sequence.data import SequenceSplit, encode_sequences, symbol_vocabulary
from convatt.sequence.model import build_causal_model
from convatt.training.feed import TrainBatches
from convatt.training.state import TrainState
from convatt.training.trainer import Trainer, configure_matmul_precision


@dataclass
class PreparedSequences:
    """A sequence task's corpus, encoded, and its fingerprint."""

    symbols: list[str]
    train: SequenceSplit
    dev: SequenceSplit
    test: SequenceSplit
    corpus_name: str
    note: str
    max_len: int
    fingerprint: DataFingerprint
    vocab = None  # no tagger vocabularies (Trainer._check_same_data reads the fingerprint)


def prepare_sequences(run: RunConfig) -> PreparedSequences:
    """Read the corpus (pairs of symbol and next symbol) and encode it at its longest sequence."""
    corpus = load_corpus(run.preset, run.data)
    if run.limit:
        corpus = dataclasses.replace(
            corpus, train=corpus.train[: run.limit], dev=corpus.dev[: run.limit], test=corpus.test[: run.limit]
        )
    symbols = symbol_vocabulary(corpus)
    max_len = max(len(s) for s in corpus.all_sentences())
    exact = data_format(run.preset).task == "find-block"
    splits = {n: encode_sequences(getattr(corpus, n), symbols, max_len, exact) for n in ("train", "dev", "test")}
    fingerprint = DataFingerprint.measure(
        run.data,
        corpus_files(run.preset, run.data),
        {"symbols": symbols, **{f"{n} split": [s.inputs, s.targets, s.weights] for n, s in splits.items()}},
    )
    note = f"(--limit {run.limit})" if run.limit else ""
    return PreparedSequences(symbols, *splits.values(), corpus.name, note, max_len, fingerprint)


class SequenceBatches(TrainBatches):
    """(symbols, next symbols, weights) of the epochs left, in `TrainBatches`' order."""

    def __init__(self, split: SequenceSplit, batch_size: int, seed: int, first_epoch: int):
        super().__init__(split, batch_size, seed, first_epoch, few_shapes=False)

    def n_rows(self) -> int:
        return len(self.split)

    def tokens(self, epoch: int, batch: int) -> float:
        return float(self.split.weights[self.order(epoch)[batch - 1]].sum())

    def __getitem__(self, index: int):
        epoch, batch = self.first_epoch + index // self.n_batches, index % self.n_batches
        idx = self.order(epoch)[batch]
        return self.split.inputs[idx], self.split.targets[idx], self.split.weights[idx]

    def for_fit(self):
        if keras.backend.backend() != "tensorflow":
            return self
        import itertools

        import tensorflow as tf

        t = self.split.inputs.shape[1]
        signature = (
            tf.TensorSpec((None, t), tf.int32),
            tf.TensorSpec((None, t), tf.int32),
            tf.TensorSpec((None, t), tf.float32),
        )
        stream = lambda: (self[i] for i in itertools.count())
        return tf.data.Dataset.from_generator(stream, output_signature=signature).prefetch(2)


class SequenceTrainer(Trainer):
    """The tagger's `Trainer` with a causal sequence task's data, model and result."""

    def run(self) -> RunResult:
        run = self.run_config
        data = prepare_sequences(run)  # bad input fails here, before the directory is claimed
        self.config = make_sequence_config(run.preset, run.variant, data.max_len)
        remove_temporaries(self.out, lambda name: name in RUN_FILES)
        remove_temporaries(self.ckpt, lambda name: bool(CHECKPOINT_FILE.fullmatch(name)))
        self._check_same_data(data)
        run.save(self.out, fingerprint=data.fingerprint.to_json())
        self._describe(data)
        configure_matmul_precision(run.protocol)
        model, state = self._restore_or_build(data)
        n_params = count_parameters(model)
        label = self.config.spec.label
        self.log(f"{run.variant} ({label}), {n_params:,} parameters, seed {run.seed}, {self.config.max_len} symbols")
        if state.should_continue(run):
            self._fit(model, data, state)
        else:  # killed after its last checkpoint, before result.json
            model.load_weights(self.checkpoints.best_weights(state.best_epoch))
        result = self._result(model, data, state, n_params)
        write_atomically(self.out / MODEL_FILE, model.save)
        result.save(self.out)
        self.checkpoints.remove()
        self._report(result, state)
        return result

    def _train_batches(self, data: PreparedSequences, state: TrainState, model: keras.Model) -> SequenceBatches:
        return SequenceBatches(data.train, self.run_config.batch_size, self.run_config.seed, state.epoch + 1)

    def _describe(self, data: PreparedSequences) -> None:
        if data.note:
            self.log(f"note: {data.note}")
        write_json(self.out / VOCAB_FILE, {"symbols": data.symbols})
        self.log(
            f"{data.corpus_name}: {len(data.train):,} / {len(data.dev):,} / {len(data.test):,} "
            f"train/dev/test sequences of up to {data.max_len} symbols; {len(data.symbols):,} symbols"
        )

    def _build_model(self, data: PreparedSequences) -> keras.Model:
        return build_causal_model(self.config, len(data.symbols), self.run_config.jit_compile)

    def _result(self, model: keras.Model, data: PreparedSequences, state: TrainState, n_params: int) -> RunResult:
        run = self.run_config
        size = run.eval_batch_size
        scores = {name: getattr(data, name).scores(model, size) for name in ("dev", "test")}
        for name, file in (("test", SENTENCE_SCORES_FILE), ("dev", DEV_SENTENCE_SCORES_FILE)):
            write_csv(self.out / file, scores[name].sentence_rows(), SENTENCE_SCORE_COLUMNS)
        return RunResult(
            preset=run.preset,
            variant=run.variant,
            label=self.config.spec.label,
            seed=run.seed,
            corpus=data.corpus_name,
            is_sample=False,
            corpus_note=data.note,
            vectors_note="",
            mask_padding=False,
            dev=scores["dev"].to_json(),
            test=scores["test"].to_json(),
            **self._provenance(state, n_params),
        )

    def _report(self, result: RunResult, state: TrainState) -> None:
        t = result.test
        self.log(
            f"done: test accuracy {100 * t['all']:.2f}%  {t['bits_per_symbol']:.4f} bits per symbol  "
            f"(best epoch {state.best_epoch} of {state.epoch}, {state.seconds:.0f} s) -> {self.out}"
        )
