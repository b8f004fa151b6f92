"""One run of a causal sequence task through the training loop (`convatt.training.loop.Trainer`):
the tagger's `fit` loop, callbacks (curve, early stopping, checkpoints, stop requests), run
directory and lock; only the data, the model and what result.json measures differ (the hooks).

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

from dataclasses import dataclass

import keras
import numpy as np

from convatt.data import corpus_files, load_corpus
from convatt.data.formats import data_format
from convatt.rundir.fingerprint import DataFingerprint
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import DEV_SENTENCE_SCORES_FILE, SENTENCE_SCORE_COLUMNS, SENTENCE_SCORES_FILE, VOCAB_FILE
from convatt.rundir.storage import write_csv, write_json
from convatt.sequence.config import make_sequence_config
from convatt.sequence.data import SequenceSplit, encode_sequences, symbol_vocabulary
from convatt.sequence.model import build_causal_model
from convatt.training.feed import Batch
from convatt.training.loop import Trainer
from convatt.training.state import DevScore, TrainState


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


def prepare_sequences(run: RunConfig) -> PreparedSequences:
    """Read the corpus (pairs of symbol and next symbol) and encode it at its longest sequence."""
    corpus = load_corpus(run.preset, run.data).limited(run.limit)
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


@dataclass(frozen=True)
class SequenceRows:
    """A sequence split's rows as batches (`convatt.training.feed.TrainRows`): the symbols,
    the next symbols, the weights (1: scored), all of the split's one length."""

    split: SequenceSplit

    def __len__(self) -> int:
        return len(self.split)

    def batch(self, rows: np.ndarray) -> Batch:
        return self.split.inputs[rows], self.split.targets[rows], self.split.weights[rows]

    def tokens(self, rows: np.ndarray) -> float:
        return float(self.split.weights[rows].sum())

    def varying_axes(self, batch: Batch) -> tuple[int, int, int]:
        return 1, 1, 1


class SequenceTrainer(Trainer):
    """One run of a causal sequence task (`build_causal_model`) on a sequence preset."""

    causal_attention = True

    def prepare(self) -> PreparedSequences:
        return prepare_sequences(self.run_config)

    def vocabularies(self, data: PreparedSequences) -> dict:
        return {"symbols": data.symbols}

    def describe(self, data: PreparedSequences) -> None:
        if data.note:
            self.log(f"note: {data.note}")
        write_json(self.out / VOCAB_FILE, self.vocabularies(data))
        self.log(
            f"{data.corpus_name}: {len(data.train):,} / {len(data.dev):,} / {len(data.test):,} "
            f"train/dev/test sequences of up to {data.max_len} symbols; {len(data.symbols):,} symbols"
        )

    def build(self, data: PreparedSequences) -> keras.Model:
        run = self.run_config
        config = make_sequence_config(run.preset, run.variant, data.max_len)
        return build_causal_model(config, len(data.symbols), run.jit_compile)

    def model_note(self, data: PreparedSequences) -> str:
        return f"{data.max_len} symbols"

    def train_rows(self, data: PreparedSequences, model: keras.Model) -> SequenceRows:
        return SequenceRows(data.train)

    def measure_dev(self, model: keras.Model, dev: SequenceSplit) -> DevScore:
        scores = dev.scores(model, self.run_config.eval_batch_size)
        return DevScore(scores.accuracy, scores.accuracy, bits_per_symbol=scores.bits_per_symbol)

    def result(self, model: keras.Model, data: PreparedSequences, state: TrainState, n_params: int) -> RunResult:
        scores = {name: getattr(data, name).scores(model, self.run_config.eval_batch_size) for name in ("dev", "test")}
        for name, file in (("test", SENTENCE_SCORES_FILE), ("dev", DEV_SENTENCE_SCORES_FILE)):
            write_csv(self.out / file, scores[name].sentence_rows(), SENTENCE_SCORE_COLUMNS)
        return RunResult(
            is_sample=False,
            vectors_note="",
            mask_padding=False,
            dev=scores["dev"].to_json(),
            test=scores["test"].to_json(),
            **self.result_fields(data, state, n_params),
        )

    def test_summary(self, result: RunResult) -> str:
        t = result.test
        return f"test accuracy {100 * t['all']:.2f}%  {t['bits_per_symbol']:.4f} bits per symbol"
