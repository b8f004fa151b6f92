"""Any corruption of a valid file gives convatt's own error or a correct result (issue 18).

Property-based (Hypothesis): a valid run-directory file (config.json, result.json,
state.json, vocab.json) or corpus / vectors file is cut short, has bytes flipped,
inserted or deleted, or (JSON) has one value replaced by another JSON value; the
reader must then raise `ConvattError` naming the file, or return a well-typed value.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
from helpers import PTB_SAMPLE_FILES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convatt.data import EMBEDDED_DATA_DIR, Vocab, Vocabularies, load_word_vectors, read_conllu, read_mrg
from convatt.errors import ConvattError
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.storage import read_json
from convatt.training.trainer import TrainState

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LINES_DEV = EMBEDDED_DATA_DIR / "ud-2.2" / "UD_English-LinES" / "en_lines-ud-dev.conllu.gz"
MRG = PTB_SAMPLE_FILES / "wsj_0003.mrg"


@st.composite
def byte_damage(draw, original: bytes) -> bytes:
    """`original` cut short, or with a few bytes flipped, inserted or deleted."""
    data = bytearray(original)
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete"]))
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data) - 1))])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        else:
            del data[at : at + draw(st.integers(1, 8))]
    return bytes(data)


JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


@st.composite
def json_damage(draw, original: dict) -> bytes:
    """`original` with one value (at any depth) replaced, or one key dropped."""
    data = json.loads(json.dumps(original))
    node = data
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        if isinstance(node, dict) and draw(st.integers(0, 3)) == 0:
            del node[key]
        else:
            node[key] = draw(JSON_VALUE)
        break
    return json.dumps(data).encode()


def damaged(original: bytes, as_json: dict | None = None):
    strategies = [byte_damage(original)] + ([json_damage(as_json)] if as_json is not None else [])
    return st.one_of(strategies)


def reads_or_convatt_error(read, path):
    """`read(path)`, or None after a ConvattError that names `path`."""
    try:
        return read(path)
    except ConvattError as e:
        assert e.path == str(path), str(e)
        return None


# ---- run-directory files --------------------------------------------------------------

CONFIG = RunConfig(preset="ptb", variant="san-pe-add", seed=1, data="/data/ptb", out="/runs/x", limit=160)
RESULT = RunResult(
    preset="ptb",
    variant="san-pe-add",
    label="SAN+PE[add]",
    seed=1,
    corpus="PTB",
    is_sample=False,
    corpus_note="",
    vectors_note="",
    mask_padding=False,
    dev={"all": 0.9, "oov": None, "ambiguous": 0.8, "n_all": 10, "n_oov": 0, "n_ambiguous": 3, "per_tag": {"NN": 0.9}},
    test={"all": 0.85, "oov": 0.5, "ambiguous": 0.7, "n_all": 12, "n_oov": 2, "n_ambiguous": 4, "per_tag": {"NN": 0.8}},
    parameters=100,
    epochs_run=2,
    best_epoch=1,
    wall_seconds=3.5,
    backend="tensorflow",
    convatt_version="0.1.0",
)
STATE = TrainState(
    epoch=2,
    step=10,
    best_dev=0.5,
    best_epoch=1,
    bad_epochs=1,
    seconds=3.0,
    history=[{"epoch": 1, "loss": 1.0}, {"epoch": 2, "loss": 0.9}],
    curve=[{"step": 2, "epoch": 1, "dev_accuracy": 0.1}],
)
VOCABULARIES = Vocabularies(
    Vocab.from_items(["the", "dog"]),
    Vocab.from_items("dghet"),
    Vocab.from_items(["DT", "NN"]),
    frozenset({"the"}),
    "<PAD>",
)


def _config_json() -> dict:
    return {**CONFIG.to_json(), "data_fingerprint": {"files": {"a.mrg": "1 sha256:00"}, "parts": {}}}


@FUZZ
@given(data=damaged(json.dumps(_config_json(), indent=2).encode(), _config_json()))
def test_run_config_reader(tmp_path, data):
    (tmp_path / "config.json").write_bytes(data)
    config = reads_or_convatt_error(lambda p: RunConfig.load(p.parent), tmp_path / "config.json")
    if config is not None:
        assert isinstance(config.seed, int) and isinstance(config.preset, str) and config.to_json()


@FUZZ
@given(data=damaged(json.dumps(RESULT.to_json(), indent=2).encode(), RESULT.to_json()))
def test_run_result_reader(tmp_path, data):
    (tmp_path / "result.json").write_bytes(data)
    result = reads_or_convatt_error(lambda p: RunResult.load(p.parent), tmp_path / "result.json")
    if result is not None:
        assert isinstance(result.test, dict) and isinstance(result.seed, int)
        assert result.test.get("all") is None or 0 <= result.test["all"] <= 1


@FUZZ
@given(
    data=damaged(
        json.dumps({**STATE.to_json(), "seed_states": [[1, 2]]}).encode(), {**STATE.to_json(), "seed_states": [[1, 2]]}
    )
)
def test_train_state_reader(tmp_path, data):
    (tmp_path / "state.json").write_bytes(data)
    state = reads_or_convatt_error(lambda p: TrainState.from_json(read_json(p), p), tmp_path / "state.json")
    if state is not None:
        assert 1 <= state.best_epoch <= state.epoch == len(state.history)


@FUZZ
@given(data=st.data())
def test_vocabularies_reader(tmp_path, data):
    (tmp_path / "good.json").write_text(VOCABULARIES.to_json(), encoding="utf-8")
    original = (tmp_path / "good.json").read_bytes()
    (tmp_path / "vocab.json").write_bytes(data.draw(damaged(original, json.loads(original))))
    vocab = reads_or_convatt_error(Vocabularies.load, tmp_path / "vocab.json")
    if vocab is not None:
        assert all(isinstance(t, str) for t in vocab.words.tokens + vocab.tags.tokens)


# ---- corpus and vectors files ---------------------------------------------------------


def _conllu_sample() -> bytes:
    lines = gzip.decompress(LINES_DEV.read_bytes()).decode().split("\n")
    blank = [i for i, line in enumerate(lines) if not line][3]  # the first three sentences
    return ("\n".join(lines[:blank]) + "\n\n").encode()


def _sentences_are_whole(sentences) -> None:
    assert sentences and all(s and all(w and t for w, t in s) for s in sentences)


@FUZZ
@given(data=damaged(_conllu_sample()))
def test_conllu_reader(tmp_path, data):
    (tmp_path / "x.conllu").write_bytes(data)
    sentences = reads_or_convatt_error(read_conllu, tmp_path / "x.conllu")
    if sentences is not None:
        _sentences_are_whole(sentences)


@FUZZ
@given(data=damaged(MRG.read_bytes()))
def test_mrg_reader(tmp_path, data):
    (tmp_path / "wsj_0003.mrg").write_bytes(data)
    sentences = reads_or_convatt_error(read_mrg, tmp_path / "wsj_0003.mrg")
    if sentences is not None:
        _sentences_are_whole(sentences)


VECTORS = b"3 4\nthe 0.1 0.2 0.3 0.4\ndog -1 2.5 0 1e-3\ncat 1 1 1 1\n"
WORDS = Vocab.from_items(["the", "dog", "cat", "bird"])


@FUZZ
@given(data=damaged(VECTORS))
def test_vectors_reader(tmp_path, data):
    (tmp_path / "v.vec").write_bytes(data)
    loaded = reads_or_convatt_error(lambda p: load_word_vectors(p, WORDS, 4, limit=None), tmp_path / "v.vec")
    if loaded is not None:
        matrix, found = loaded
        assert matrix.shape == (len(WORDS), 4) and np.isfinite(matrix).all() and 0 <= found <= 3
