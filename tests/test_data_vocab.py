"""Vocabularies: special indices, size rules, tie-break, JSON round trip, ambiguity."""

from __future__ import annotations

import json

import pytest

from convatt.data import (
    EMBEDDED_DATA_DIR,
    OOV_ID,
    PAD_ID,
    Corpus,
    Vocab,
    ambiguous_words,
    build_char_vocab,
    build_tag_vocab,
    build_vocabularies,
    build_word_vocab,
    read_ptb,
    read_ud,
)
from convatt.protocol import TrainingProtocol

TRAIN = [[("the", "DT"), ("dog", "NN"), ("runs", "VBZ")], [("the", "DT"), ("runs", "NNS")], [("dog", "VB")]]


def test_pad_and_oov_indices():
    vocab = Vocab.from_items(["a", "b"])
    assert vocab.tokens == ("<PAD>", "<OOV>", "a", "b") and len(vocab) == 4
    assert (PAD_ID, OOV_ID) == (0, 1)
    assert vocab.encode("a") == 2 and vocab.encode("zzz") == OOV_ID
    # the specials are positions, not strings: a real "<PAD>" token is OOV, never padding
    assert vocab.encode("<PAD>") == OOV_ID and "<PAD>" not in vocab


def test_vocab_requires_the_specials_first():
    with pytest.raises(ValueError):
        Vocab(("a", "<PAD>", "<OOV>"))


def test_vocab_json_round_trip():
    vocab = Vocab.from_items(["é", "b", "a"])
    assert Vocab(tuple(json.loads(json.dumps(list(vocab.tokens))))) == vocab


def test_word_vocab_tie_break_is_count_then_first_occurrence():
    sentences = [[("b", "X"), ("a", "X"), ("c", "X"), ("a", "X"), ("b", "X"), ("d", "X")]]
    assert build_word_vocab(sentences).tokens[2:] == ("b", "a", "c", "d")
    assert build_word_vocab(sentences, max_size=3).tokens[2:] == ("b", "a", "c")
    assert build_word_vocab(sentences, fraction=0.5).tokens[2:] == ("b", "a")
    assert build_word_vocab(sentences, max_size=100).tokens[2:] == ("b", "a", "c", "d")


def test_char_and_tag_vocab_come_from_training_data():
    assert build_char_vocab(TRAIN).tokens[2:] == tuple(sorted(set("thedogruns")))
    assert build_tag_vocab(TRAIN).tokens == ("<PAD>", "<OOV>", "DT", "NN", "NNS", "VB", "VBZ")


def test_ambiguous_words():
    assert ambiguous_words(TRAIN) == frozenset({"dog", "runs"})


def test_ptb_sample_vocabularies():
    corpus = read_ptb(EMBEDDED_DATA_DIR / "ptb-sample.tar.gz")
    vocabs = build_vocabularies(corpus, "ptb", TrainingProtocol.named("keras3"))
    distinct = {w for s in corpus.all_sentences() for w, _ in s}
    # fewer than 20,000 forms in the sample: all of them are kept
    assert len(distinct) == 11968 and len(vocabs.words) == min(20000, len(distinct)) + 2
    assert len(vocabs.tags) == 47
    assert len(vocabs.chars) == 80
    assert vocabs.words.tokens[2:5] == (",", "the", ".")
    original = build_vocabularies(corpus, "ptb")  # the default: the original code's vocabularies
    assert original.words == vocabs.words and original.tags == vocabs.tags
    # the characters of "<PAD>", "<OOV>", "<S>", "</S>" join: two of them (here "<", ">") are new
    assert set(original.chars.tokens) - set(vocabs.chars.tokens) == {"<", ">"}
    assert original.pad_spelling == "<PAD>" and vocabs.pad_spelling == ""


def test_original_vocabulary_counts_tags_over_all_splits():
    corpus = Corpus("x", TRAIN, [[("cat", "JJ")]], [[("dog", "UH")]])
    assert build_vocabularies(corpus, "ud", TrainingProtocol.named("keras3")).tags.tokens[2:] == (
        "DT",
        "NN",
        "NNS",
        "VB",
        "VBZ",
    )
    assert build_vocabularies(corpus, "ud").tags.tokens[2:] == ("DT", "JJ", "NN", "NNS", "UH", "VB", "VBZ")


@pytest.mark.parametrize("name, distinct", [("UD_English-LinES", 10138), ("UD_Vietnamese-VTB", 5817)])
def test_ud_vocabulary_is_half_of_the_distinct_forms(name, distinct):
    corpus = read_ud(EMBEDDED_DATA_DIR / "ud-2.2" / name)
    assert len({w for s in corpus.all_sentences() for w, _ in s}) == distinct
    vocabs = build_vocabularies(corpus, "ud", TrainingProtocol.named("keras3"))
    assert len(vocabs.words) == distinct // 2 + 2
    assert len(vocabs.tags) == len({t for s in corpus.train for _, t in s}) + 2
