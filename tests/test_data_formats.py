"""The data-format registry: a format registered in a test flows through load_corpus,
the vocabularies and the tagger's configuration; unknown presets are one clear error."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from convatt.data import build_vocabularies, corpus_files, load_corpus
from convatt.data.corpus import Corpus
from convatt.data.formats import FORMATS, DataFormat, data_format, preset_label, register
from convatt.errors import ConvattError
from convatt.model.variants import make_config


def read_slash(path: Path) -> Corpus:
    """A toy format: one sentence per line, tokens `form/TAG`; files train.txt, dev.txt, test.txt."""

    def split(name: str):
        lines = (path / f"{name}.txt").read_text().splitlines()
        return [[tuple(token.rsplit("/", 1)) for token in line.split()] for line in lines if line.strip()]

    return Corpus("slash-" + path.name, split("train"), split("dev"), split("test"))


@pytest.fixture
def slash_format():
    fmt = register(
        DataFormat(
            "slash",
            "Slash",
            read=read_slash,
            files=lambda path: [path / f"{s}.txt" for s in ("train", "dev", "test")],
            default_data=None,
            tag_column="xpos",
            word_dim=16,
            pretrained_words=False,
            vocab_size=3,
        )
    )
    yield fmt
    del FORMATS["slash"]


def write_slash(tmp_path: Path) -> Path:
    (tmp_path / "train.txt").write_text("the/DT dog/NN runs/VBZ\nthe/DT cat/NN sleeps/VBZ\n")
    (tmp_path / "dev.txt").write_text("a/DT dog/NN\n")
    (tmp_path / "test.txt").write_text("the/DT bird/NN sings/VBZ\n")
    return tmp_path


def test_a_registered_format_flows_through_load_corpus(slash_format, tmp_path):
    corpus = load_corpus("slash", write_slash(tmp_path))
    assert corpus.name == f"slash-{tmp_path.name}"
    assert corpus.train[1] == [("the", "DT"), ("cat", "NN"), ("sleeps", "VBZ")]
    assert corpus.test == [[("the", "DT"), ("bird", "NN"), ("sings", "VBZ")]]
    assert corpus_files("slash", tmp_path) == [tmp_path / "train.txt", tmp_path / "dev.txt", tmp_path / "test.txt"]
    vocab = build_vocabularies(corpus, "slash")
    # vocab_size 3: "the" (4 times), "dog" (2), then the first of the once-seen forms; plus <PAD>, <OOV>
    assert list(vocab.words.tokens)[2:] == ["the", "dog", "runs"]
    config = make_config("slash", "san-pe-add")
    assert (config.word_dim, config.pretrained_words) == (16, False)
    assert preset_label("slash") == "Slash"


def test_the_paper_presets_are_rows_of_the_registry():
    assert list(FORMATS)[:2] == ["ptb", "ud"]
    assert data_format("ptb").default_data.exists() and data_format("ud").default_data.exists()
    assert (data_format("ptb").tag_column, data_format("ud").tag_column) == ("xpos", "upos")
    assert [data_format(p).treebanks for p in ("ptb", "ud")] == [False, True]
    assert make_config("ud", "san").word_dim == 128 and make_config("ptb", "san").word_dim == 300


def test_an_unknown_preset_is_one_clear_error(tmp_path):
    with pytest.raises(ConvattError, match="unknown preset 'slahs'. Known: ptb, ud, toy, charlm"):
        load_corpus("slahs", tmp_path)
    with pytest.raises(ConvattError, match="Did you mean 'ud'"):
        make_config("UD", "san")


def test_a_format_row_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        data_format("ptb").label = "WSJ"
