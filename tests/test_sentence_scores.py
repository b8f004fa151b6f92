"""Per-sentence scores: written with each run, recomputed by `convatt evaluate --sentences`,
and summing to result.json's accuracies."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from helpers import tiny_options

from convatt.cli import main
from convatt.data.encode import EncodedSplit
from convatt.rundir.schema import DEV_SENTENCE_SCORES_FILE, SENTENCE_SCORE_COLUMNS, SENTENCE_SCORES_FILE
from convatt.training.sentence_scores import rows_per_sentence, sentence_scores


@pytest.fixture(scope="module")
def trained(small_run, tmp_path_factory):
    """Two real runs (SAN+PE[add], +Temp; seed 1) of one epoch on 30 PTB-sample sentences: their
    root, and how many batches the +Temp run predicted (`predict_on_batch` calls). SAN+PE[add]
    is the shared `small_run` (copied: a test rewrites a file of it), +Temp one with its options."""
    import keras

    from convatt.training.trainer import train_run

    root = tmp_path_factory.mktemp("sentences")
    shutil.copytree(small_run, root / "san-pe-add")
    predict_on_batch, calls = keras.Model.predict_on_batch, []

    def counted(model, x):
        calls.append(1)
        return predict_on_batch(model, x)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keras.Model, "predict_on_batch", counted)
        options = tiny_options(root / "san-pe-add-temp", "san-pe-add-temp", epochs=1, limit=30, curve_every=0)
        train_run(options, log=lambda s: None)
    return root, len(calls)


@pytest.fixture(scope="module")
def tiny_root(trained):
    return trained[0]


@pytest.fixture(scope="module")
def tiny_run(tiny_root):
    return tiny_root / "san-pe-add"


@pytest.mark.parametrize("split, name", [("test", SENTENCE_SCORES_FILE), ("dev", DEV_SENTENCE_SCORES_FILE)])
def test_sums_are_result_json_accuracies(tiny_run, split, name):
    scores = pd.read_csv(tiny_run / name)
    result = json.loads((tiny_run / "result.json").read_text())[split]
    assert list(scores.columns) == SENTENCE_SCORE_COLUMNS
    assert list(scores["sentence"]) == list(range(30))  # --limit 30: the first 30 sentences, in order
    for metric, prefix in (("all", ""), ("oov", "oov_"), ("ambiguous", "ambiguous_")):
        tokens, correct = scores[f"{prefix}tokens"].sum(), scores[f"{prefix}correct"].sum()
        assert tokens == result[f"n_{metric}"]
        if tokens:
            assert correct / tokens == pytest.approx(result[metric], abs=1e-12)
        else:
            assert result[metric] is None
    assert (scores["correct"] <= scores["tokens"]).all() and (scores["tokens"] > 0).all()


def test_a_run_predicts_each_split_once_at_its_end(trained):
    # one batch per split (30 sentences, eval batch 256): dev after the epoch, then at the run's
    # end dev and test once each, for result.json and the sentence scores both
    assert trained[1] == 3


def test_evaluate_sentences_rewrites_the_same_file(tiny_run, capsys):
    written = (tiny_run / SENTENCE_SCORES_FILE).read_text()
    (tiny_run / SENTENCE_SCORES_FILE).unlink()
    assert main(["evaluate", str(tiny_run), "--sentences"]) == 0
    assert str(tiny_run / SENTENCE_SCORES_FILE) in capsys.readouterr().out
    assert (tiny_run / SENTENCE_SCORES_FILE).read_text() == written


def test_evaluate_sentences_refuses_other_data(tiny_run, capsys):
    assert main(["evaluate", str(tiny_run), "--sentences", "--data", str(tiny_run)]) == 2
    assert "leave out --data" in capsys.readouterr().err


def test_a_long_sentence_adds_up_its_chunks():
    # Sentences of 3, 7 and 4 tokens with max_len 4: rows [3], [4, 3], [4].
    rows = rows_per_sentence([3, 7, 4], max_len=4)
    assert list(rows) == [1, 2, 1]
    lengths = [3, 4, 3, 4]
    tags = np.array([[1] * n + [0] * (4 - n) for n in lengths])
    predicted = tags.copy()
    predicted[1, 0] = predicted[2, 2] = predicted[3, 3] = 2  # one error in each chunk of sentence 1, one in 2
    oov = np.zeros_like(tags, dtype=bool)
    oov[1, 0] = oov[0, 0] = True
    ambiguous = np.zeros_like(oov)
    ambiguous[2, :] = True
    split = EncodedSplit(tags, np.zeros(tags.shape + (2,), dtype=int), tags, oov, ambiguous)
    scores = sentence_scores(predicted, split, rows)
    assert scores.to_dict("list") == {
        "sentence": [0, 1, 2],
        "tokens": [3, 7, 4],
        "correct": [3, 5, 3],
        "oov_tokens": [1, 1, 0],
        "oov_correct": [1, 0, 0],
        "ambiguous_tokens": [0, 3, 0],  # only the second chunk's three real tokens
        "ambiguous_correct": [0, 2, 0],
    }


def test_the_significance_table_bootstraps_real_runs(tiny_root):
    from convatt.results.frames import load_runs
    from convatt.results.significance import comparison_frame

    runs = load_runs(tiny_root)
    row = comparison_frame(runs).iloc[0]
    test_all = runs.set_index("variant")["test_all"]
    assert (row["model"], row["against"], row["bootstrap_note"]) == ("SAN+PE[add]+Temp", "SAN+PE[add]", "")
    assert row["diff"] == pytest.approx(100 * (test_all["san-pe-add-temp"] - test_all["san-pe-add"]), abs=1e-9)
    assert row["ci_low"] <= row["diff"] <= row["ci_high"] and 0 <= row["p_permutation"] <= 1
