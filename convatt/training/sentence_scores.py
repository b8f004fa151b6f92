"""Per-sentence scores: the counts behind result.json's accuracies, one row per sentence.

`test_sentences.csv` (and `dev_sentences.csv`) in a run directory hold, per sentence of
the split (in corpus order), its tokens and correct tags, over all tokens, OOV tokens
and ambiguous tokens as `convatt.protocol.metrics` defines them. Summed over the rows,
correct / tokens is result.json's accuracy; the significance tests
(`convatt.results.significance`) resample these rows.

A sentence longer than the tagger's `max_len` is tagged as several rows (chunks): its
row here adds them up, so that a resample draws whole sentences.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import pandas as pd

from convatt.data import Corpus, EncodedSplit
from convatt.model.prediction import predict_tags, score_predictions
from convatt.rundir.schema import DEV_SENTENCE_SCORES_FILE, SENTENCE_SCORE_COLUMNS, SENTENCE_SCORES_FILE
from convatt.rundir.storage import write_text

FILES = {"test": SENTENCE_SCORES_FILE, "dev": DEV_SENTENCE_SCORES_FILE}


def rows_per_sentence(lengths: list[int] | np.ndarray, max_len: int) -> np.ndarray:
    """How many encoded rows (chunks of at most `max_len` tokens) each sentence takes."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return np.maximum(1, -(-lengths // max_len))


def sentence_scores(predicted: np.ndarray, split: EncodedSplit, rows: np.ndarray) -> pd.DataFrame:
    """SENTENCE_SCORE_COLUMNS for the predicted tag ids of `split`, whose rows belong to the
    sentences as `rows` says (`rows_per_sentence`)."""
    if int(rows.sum()) != len(split):
        raise ValueError(f"{int(rows.sum())} rows for the sentences, but the split has {len(split)}")
    valid = split.tags != 0
    correct = (predicted == split.tags) & valid
    sentence_of_row = np.repeat(np.arange(len(rows)), rows)
    per_row = {
        "tokens": valid,
        "correct": correct,
        "oov_tokens": valid & split.oov,
        "oov_correct": correct & split.oov,
        "ambiguous_tokens": valid & split.ambiguous,
        "ambiguous_correct": correct & split.ambiguous,
    }
    frame = pd.DataFrame({"sentence": np.arange(len(rows))})
    for name, where in per_row.items():
        frame[name] = np.bincount(sentence_of_row, weights=where.sum(axis=1), minlength=len(rows)).astype(np.int64)
    return frame[SENTENCE_SCORE_COLUMNS]


@dataclass(frozen=True)
class SentenceRows:
    """How many encoded rows (`rows_per_sentence`) each dev and test sentence takes: read off
    the corpus the splits were encoded from, so it is never read again to score them."""

    dev: np.ndarray
    test: np.ndarray

    @classmethod
    def of(cls, corpus: Corpus, max_len: int) -> SentenceRows:
        """The rows of `corpus`'s dev and test sentences (the corpus as encoded: `--limit` applied)."""
        rows = lambda sentences: rows_per_sentence([len(s) for s in sentences], max_len)
        return cls(dev=rows(corpus.dev), test=rows(corpus.test))


@dataclass(frozen=True)
class PredictedSplit:
    """A split of a run, encoded, with the model's tag ids on it (`predict_tags`, predicted
    once for the accuracies and the sentence scores both) and its sentences' rows."""

    name: str  # "test" or "dev": its file is FILES[name]
    encoded: EncodedSplit
    predicted: np.ndarray  # (n, t) tag ids
    rows: np.ndarray  # the split's entry of `SentenceRows`

    @classmethod
    def predict(
        cls, model: keras.Model, name: str, encoded: EncodedSplit, rows: SentenceRows, batch_size: int
    ) -> PredictedSplit:
        """The model's predictions on the split `name` ("test" or "dev")."""
        return cls(name, encoded, predict_tags(model, encoded, batch_size), getattr(rows, name))

    def accuracies(self, tag_names: list[str]) -> dict:
        """result.json's scores of the split (`accuracy_report`: all / OOV / ambiguous / per tag)."""
        return score_predictions(self.predicted, self.encoded, tag_names)

    def sentence_scores(self) -> pd.DataFrame:
        """SENTENCE_SCORE_COLUMNS per sentence: summed, the counts behind `accuracies`."""
        return sentence_scores(self.predicted, self.encoded, self.rows)


def write_sentence_scores(run_dir: Path, splits: Iterable[PredictedSplit]) -> list[Path]:
    """Write each split's FILES entry into `run_dir` (atomically). Returns the files written."""
    written = []
    for split in splits:
        path = Path(run_dir) / FILES[split.name]
        write_text(path, split.sentence_scores().to_csv(index=False))
        written.append(path)
    return written
