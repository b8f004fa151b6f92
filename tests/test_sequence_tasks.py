"""The causal sequence tasks (`convatt.sequence`): the find-the-block generator, the character
text, the scores against NumPy, and tiny real runs that resume after a stop and write the run
directory the results code reads."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logsumexp

from convatt.data.char_text import read_char_text, split_text, text_chunks
from convatt.data.corpus import EMBEDDED_DATA_DIR
from convatt.data.find_block import FindBlockSpec, generate, read_find_block
from convatt.errors import ConvattError
from convatt.sequence.data import SequenceSplit, encode_sequences

SMALL = FindBlockSpec(n_blocks=3, train=64, dev=16, test=16, seed=7)
LINES = EMBEDDED_DATA_DIR / "ud-2.2" / "UD_English-LinES"


def write_spec(path: Path, spec: FindBlockSpec) -> Path:
    path.write_text(json.dumps(dataclasses.asdict(spec)))
    return path


# ---------------------------------------------------------------- the generator


def answer_by_search(text: str) -> list[str]:
    """The blocks of a sample's text (input + answer) that hold every query letter, found anew."""
    blocks, rest = text.split("#")
    query = rest[: SMALL.query_len]
    return [b for b in blocks.split(".") if set(query) <= set(b)]


def test_generator_is_seeded_and_its_splits_are_disjoint():
    train, dev, test = generate(SMALL)
    assert (len(train), len(dev), len(test)) == (64, 16, 16)
    assert generate(SMALL) == (train, dev, test)  # the same spec, the same samples
    assert generate(dataclasses.replace(SMALL, seed=8))[0] != train
    inputs = [s.input for split in (train, dev, test) for s in split]
    assert len(set(inputs)) == len(inputs)


def test_every_sample_has_exactly_one_block_with_the_query_and_its_targets_spell_it():
    for sample in [s for split in generate(SMALL) for s in split]:
        text = sample.input + sample.answer
        assert answer_by_search(text) == [sample.answer]
        assert len(set(sample.answer)) == SMALL.block_len and len(sample.blocks) == SMALL.n_blocks
        pairs = sample.sentence()
        assert "".join(symbol for symbol, _ in pairs) + pairs[-1][1] == text
        assert "".join(target for _, target in pairs if target) == sample.answer
        assert len(pairs) == SMALL.input_len + SMALL.block_len - 1


def test_a_bad_spec_is_one_clear_error(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"block_len": 5, "query_len": 6}))
    with pytest.raises(ConvattError, match="query_len <= block_len"):
        read_find_block(path)
    path.write_text(json.dumps({"blocks": 5}))
    with pytest.raises(ConvattError, match="unknown keys"):
        read_find_block(path)


# ---------------------------------------------------------------- the character text


def test_each_character_after_the_first_is_predicted_once_from_its_own_chunk():
    text = "The cat sat.\nOn the mat!"
    chunks = text_chunks(text, chunk_len=5)
    assert "".join(target for chunk in chunks for _, target in chunk) == text[1:]
    assert "".join(symbol for chunk in chunks for symbol, _ in chunk) == text[:-1]
    assert all(len(c) <= 5 for c in chunks)
    assert split_text([[("a", "DET"), ("b", "NOUN")], [("c", "X")]]) == "a b\nc"


def test_the_treebank_text_keeps_its_splits():
    corpus = read_char_text(LINES)
    first = corpus.test[0]
    assert "".join(s for s, _ in first[:20]) == split_text(corpus.test[:1])[:20] or len(first) == 128
    assert len(corpus.train) > len(corpus.test) > 0


# ---------------------------------------------------------------- scores against NumPy


class FixedLogits:
    """A stand-in model: the same random logits for an input, whatever the batch it comes in."""

    def __init__(self, n_symbols: int, seed: int = 0):
        self.table = np.random.default_rng(seed).normal(size=(64, 12, n_symbols))

    def __call__(self, inputs, training=False):
        return self.table[np.asarray(inputs)[:, 0] % 64]


def test_bits_per_character_and_accuracies_against_numpy():
    rng = np.random.default_rng(3)
    inputs = rng.integers(2, 9, size=(40, 12)).astype("int32")
    inputs[:, 0] = np.arange(40)
    targets = rng.integers(1, 9, size=(40, 12)).astype("int32")
    weights = (rng.random((40, 12)) < 0.7).astype("float32")
    model = FixedLogits(9)
    logits = model(inputs)
    log_p = logits - logsumexp(logits, axis=-1, keepdims=True)
    nats = -sum(log_p[i, j, targets[i, j]] for i in range(40) for j in range(12) if weights[i, j])
    right = (logits.argmax(-1) == targets) & (weights == 1)
    for exact in (False, True):
        scores = SequenceSplit(inputs, targets, weights, exact).scores(model, batch_size=7)
        assert scores.bits_per_symbol == pytest.approx(nats / weights.sum() / np.log(2), rel=1e-9)
        expected = (right.sum(1) == weights.sum(1)).mean() if exact else right.sum() / weights.sum()
        assert scores.accuracy == pytest.approx(expected)
        rows = scores.sentence_rows()
        assert sum(r["tokens"] for r in rows) == (40 if exact else int(weights.sum()))


def test_encoding_pads_and_weights_only_the_targets():
    split = encode_sequences([[("a", ""), ("b", "c")], [("z", "a")]], ["<PAD>", "<OOV>", "a", "b", "c"], 3, True)
    assert split.inputs.tolist() == [[2, 3, 0], [1, 0, 0]]
    assert split.targets.tolist() == [[0, 4, 0], [2, 0, 0]]
    assert split.weights.tolist() == [[0, 1, 0], [1, 0, 0]]


# ---------------------------------------------------------------- tiny real runs


def tiny_run(preset: str, data: Path, out: Path, epochs: int = 2):
    from convatt.training.api import run_config

    limit = 48 if preset == "charlm" else None
    return run_config(
        preset=preset, variant="san-pe-add-conv2d-pre", out=out, seed=3, data=data, epochs=epochs,
        limit=limit, curve_every=1, curve_until=-1, jit_compile="off",
    )  # fmt: skip


@pytest.mark.slow
def test_a_toy_run_stopped_in_epoch_2_resumes_to_the_same_result(tmp_path, monkeypatch):
    from helpers import train_stopped_in_epoch

    from convatt.results.frames import load_records
    from convatt.training.trainer import train_run

    monkeypatch.setenv("CONVATT_PROGRESS_EVERY", "1")
    spec = write_spec(tmp_path / "spec.json", SMALL)
    whole = train_run(tiny_run("toy", spec, tmp_path / "whole"), log=lambda line: None)
    stopped = tiny_run("toy", spec, tmp_path / "stopped")
    train_stopped_in_epoch(stopped, 2)
    assert (tmp_path / "stopped" / "checkpoint" / "state.json").exists()
    assert not (tmp_path / "stopped" / "result.json").exists()
    resumed = train_run(stopped, log=lambda line: None)
    assert resumed["test"] == pytest.approx(whole["test"]) and resumed["epochs_run"] == 2
    for name in ("config.json", "vocab.json", "history.csv", "curve.csv", "model.keras", "test_sentences.csv"):
        assert (tmp_path / "stopped" / name).exists(), name
    records = load_records(tmp_path / "stopped")  # read back as the tables and plots read it
    assert len(records.runs) == 1 and list(records.curves["step"]) == [1, 2, 3, 4]
    assert records.runs["test_all"].iloc[0] == resumed["test"]["all"]  # its result.json read back: a copy
    assert "dev_bits_per_symbol" in records.curves.columns


def test_a_tiny_toy_run_writes_what_the_tables_read(tmp_path):
    """The toy preset's tiny real run in `make test` (stopped and resumed: the slow test above)."""
    from convatt.results.frames import load_records
    from convatt.training.trainer import train_run

    spec = write_spec(tmp_path / "spec.json", SMALL)
    result = train_run(tiny_run("toy", spec, tmp_path / "run", epochs=1), log=lambda line: None)
    assert result["epochs_run"] == 1 and 0 <= result["test"]["all"] <= 1
    records = load_records(tmp_path / "run")  # read back as the tables and plots read it
    assert len(records.runs) == 1 and list(records.curves["step"]) == [1, 2]
    assert records.runs["test_all"].iloc[0] == result["test"]["all"]  # its result.json read back: a copy


@pytest.mark.slow
def test_a_charlm_run_writes_the_tables_and_figures(tmp_path):
    from convatt.results.plots import write_plots
    from convatt.results.tables import write_tables
    from convatt.training.trainer import train_run

    result = train_run(tiny_run("charlm", LINES, tmp_path / "runs" / "lm", epochs=1), log=lambda line: None)
    assert 0 < result["test"]["bits_per_symbol"] < 10 and result["test"]["n_all"] > 48 * 100
    written = write_tables(tmp_path / "runs", tmp_path / "results")
    names = {p.name for p in written.paths}
    assert {"char_lm.md", "efficiency_charlm.md"} <= names
    page = (tmp_path / "results" / "char_lm.md").read_text()
    assert "SAN+PE[add]+Conv2d[pre]" in page and "| bigram (Kneser-Ney) |" in page  # the n-gram rows
    assert "seeds_charlm.md" in names
    plots = write_plots(tmp_path / "runs", tmp_path / "results")
    assert any(p.name == "charlm_dev_by_step.png" for p in plots.paths)
    assert not any(p.name.startswith("figure2") for p in plots.paths)  # the tagger's Figure 2: no runs for it
    check_long_runs_table(tmp_path)


def check_long_runs_table(tmp_path: Path) -> None:
    """`convatt.results.long_runs` on the finished run and on a copy without result.json (running)."""
    import shutil

    from convatt.results.long_runs import write_progress

    shutil.copytree(tmp_path / "runs" / "lm", tmp_path / "long" / "lm")
    (tmp_path / "long" / "lm" / "result.json").unlink()
    for root, status in ((tmp_path / "runs", "finished, 1 epoch"), (tmp_path / "long", "running, epoch 1 of 1 done")):
        paths = write_progress(root, tmp_path / "out", "now")
        assert {p.name for p in paths} == {"lm_long.md", "lm_long.csv", "lm_long_dev_by_step.png"}
        rows = [line for line in paths[0].read_text().splitlines() if line.startswith("| SAN+PE[add]+Conv2d[pre]")]
        assert len(rows) == 2 and status in rows[0], rows  # the run's row, then its setting's over seeds
        assert rows[1].split(" | ")[1] == "1"  # one run
