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

from pathlib import Path

import keras
import numpy as np
import pandas as pd

from convatt.data import EncodedSplit, load_corpus
from convatt.errors import ConvattError
from convatt.model.prediction import predict_tags
from convatt.rundir.schema import DEV_SENTENCE_SCORES_FILE, SENTENCE_SCORE_COLUMNS, SENTENCE_SCORES_FILE, RunConfig
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


def write_split_scores(path: Path, model: keras.Model, split: EncodedSplit, rows: np.ndarray, batch_size: int) -> None:
    """The model's sentence scores on `split` as a CSV file at `path` (written atomically)."""
    scores = sentence_scores(predict_tags(model, split, batch_size), split, rows)
    write_text(path, scores.to_csv(index=False))


def split_rows(run: RunConfig, data: str | Path, max_len: int) -> dict[str, np.ndarray]:
    """`rows_per_sentence` of the run's dev and test sentences (at most `run.limit` each, as trained)."""
    corpus = load_corpus(run.preset, data)
    return {name: rows_per_sentence([len(s) for s in getattr(corpus, name)[: run.limit]], max_len) for name in FILES}


def write_sentence_scores(
    run_dir: Path, model: keras.Model, run: RunConfig, max_len: int, splits: dict[str, EncodedSplit]
) -> list[Path]:
    """Write FILES for the encoded `splits` ("test", "dev") of the run `run` into `run_dir`;
    the sentence boundaries come from the run's corpus, read again. Returns the files written."""
    rows = split_rows(run, run.data_path(run_dir), max_len)
    written = []
    for name, split in splits.items():
        if int(rows[name].sum()) != len(split):
            raise ConvattError(
                f"the {name} split's sentences take {int(rows[name].sum())} rows, not the {len(split)} "
                "the run evaluated: has the corpus changed since the run?",
                run.data_path(run_dir),
            )
        path = Path(run_dir) / FILES[name]
        write_split_scores(path, model, split, rows[name], run.eval_batch_size)
        written.append(path)
    return written
