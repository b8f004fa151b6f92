"""Encoding: chunking, truncation, PAD/OOV ids, OOV and ambiguity masks, saved vocabularies."""

from __future__ import annotations

import numpy as np
import pytest

from convatt.data import (
    EMBEDDED_DATA_DIR,
    Vocab,
    Vocabularies,
    ambiguous_words,
    build_char_vocab,
    build_tag_vocab,
    build_vocabularies,
    build_word_vocab,
    chunk,
    encode_split,
    read_ptb,
)
from convatt.errors import ConvattError

TRAIN = [[("the", "DT"), ("dog", "NN"), ("runs", "VBZ")], [("the", "DT"), ("runs", "NNS")], [("dog", "VB")]]
TEST = [[("the", "DT"), ("cat", "NN"), ("dog", "NN"), ("runs", "VBZ"), ("Ω", "NN")]]


@pytest.fixture
def vocabs():
    # counts over train+test: the 3, dog 3, runs 2, cat 1, Ω 1; keep 2 -> "the", "dog"
    words = build_word_vocab(TRAIN + TEST, max_size=2)
    return Vocabularies(words, build_char_vocab(TRAIN), build_tag_vocab(TRAIN), ambiguous_words(TRAIN))


def test_chunk_cuts_130_tokens_into_60_60_10():
    sentence = [(f"w{i}", "NN") for i in range(130)]
    pieces = chunk(sentence, 60)
    assert [len(p) for p in pieces] == [60, 60, 10]
    assert [t for p in pieces for t in p] == sentence
    assert chunk([], 60) == [] and chunk(sentence[:60], 60) == [sentence[:60]]


def test_encode_chunks_long_sentences_without_dropping(vocabs):
    sentence = [(f"w{i}", "NN") for i in range(130)]
    vocabs = Vocabularies(build_word_vocab([sentence]), vocabs.chars, vocabs.tags, vocabs.ambiguous)
    enc = encode_split([sentence, sentence[:5]], vocabs)
    assert len(enc) == 4
    assert enc.words.shape == (4, 60) and enc.chars.shape == (4, 60, 20)
    assert enc.mask.sum(axis=1).tolist() == [60, 60, 10, 5]
    decoded = [vocabs.words.tokens[i] for i in enc.words[enc.mask]]
    assert decoded == [w for w, _ in sentence] + [w for w, _ in sentence[:5]]
    for a in (enc.words, enc.chars, enc.tags):
        assert a.dtype == np.int32


def test_ids_masks_and_padding_on_a_tiny_example(vocabs):
    enc = encode_split(TEST, vocabs, max_len=8, max_word_len=4)
    assert vocabs.words.tokens == ("<PAD>", "<OOV>", "the", "dog")  # tie: "the" seen first
    assert enc.words[0].tolist() == [2, 1, 3, 1, 1, 0, 0, 0]  # the cat dog runs Ω
    assert enc.tags[0].tolist() == [2, 3, 3, 6, 3, 0, 0, 0]  # DT NN NN VBZ NN
    assert enc.oov[0].tolist() == [False, True, False, True, True, False, False, False]
    # "dog" is ambiguous and known; "runs" is ambiguous but OOV; "the" has one tag
    assert enc.ambiguous[0].tolist() == [False, False, True, False, False, False, False, False]
    c = vocabs.chars.encode
    assert enc.chars[0, 0].tolist() == [c("t"), c("h"), c("e"), 0]
    assert enc.chars[0, 1].tolist() == [1, 1, c("t"), 0]  # "c", "a" not in training chars
    assert enc.chars[0, 2].tolist() == [c("d"), c("o"), c("g"), 0]
    assert enc.chars[0, 4].tolist() == [1, 0, 0, 0]
    assert not enc.chars[0, 5:].any()  # no pad_spelling: PAD positions have no characters


def test_pad_positions_spell_the_pad_token_as_the_original_code():
    chars = build_char_vocab(TRAIN, extra_words=["<PAD>", "<OOV>"])
    vocabs = Vocabularies(build_word_vocab(TRAIN), chars, build_tag_vocab(TRAIN), frozenset(), pad_spelling="<PAD>")
    enc = encode_split(TEST, vocabs, max_len=8, max_word_len=4)
    c = chars.encode
    spelt = [c("<"), c("P"), c("A"), c("D")]  # "<PAD>" cut to max_word_len, as any word
    assert 1 not in spelt and all(row.tolist() == spelt for row in enc.chars[0, 5:])
    assert enc.chars[0, 0].tolist() == [c("t"), c("h"), c("e"), 0]  # real tokens unchanged
    assert not enc.words[0, 5:].any() and not enc.tags[0, 5:].any()  # still PAD for words and loss


def test_long_words_keep_their_first_characters():
    chars = Vocab.from_items("abcdefghijklmnopqrstuvwxyz")
    word = "abcdefghijklmnopqrstuvwxy"  # 25 characters
    vocabs = Vocabularies(Vocab.from_items([word]), chars, Vocab.from_items("X"), frozenset())
    enc = encode_split([[(word, "X")]], vocabs, max_len=3, max_word_len=20)
    assert enc.chars[0, 0].tolist() == [chars.encode(ch) for ch in word[:20]]


def test_empty_input():
    v = Vocab.from_items([])
    enc = encode_split([], Vocabularies(v, v, v, frozenset(), "<PAD>"))
    assert len(enc) == 0 and enc.chars.shape == (0, 60, 20)


def test_vocabularies_json_round_trip(tmp_path, vocabs):
    path = tmp_path / "vocab.json"
    for pad_spelling in ("", "<PAD>"):
        vocabs = Vocabularies(vocabs.words, vocabs.chars, vocabs.tags, vocabs.ambiguous, pad_spelling)
        path.write_text(vocabs.to_json(), encoding="utf-8")
        assert Vocabularies.load(path) == vocabs


def test_vocabularies_of_older_runs_load_with_zero_pads(tmp_path, vocabs):
    import json

    path = tmp_path / "vocab.json"
    path.write_text(vocabs.to_json(), encoding="utf-8")
    data = json.loads(path.read_text())
    del data["pad_spelling"]
    path.write_text(json.dumps({**data, "version": 1}))
    assert Vocabularies.load(path).pad_spelling == ""


def test_vocabularies_load_errors(tmp_path):
    bad = tmp_path / "vocab.json"
    bad.write_text('{"format": "convatt-vocabularies",\n "words": [}')
    with pytest.raises(ConvattError, match=r"vocab\.json:2: not valid JSON"):
        Vocabularies.load(bad)
    with pytest.raises(ConvattError, match="not found"):
        Vocabularies.load(tmp_path / "missing.json")


def test_unknown_preset():
    corpus = read_ptb(EMBEDDED_DATA_DIR / "ptb-sample.tar.gz")
    with pytest.raises(ConvattError, match="unknown preset"):
        build_vocabularies(corpus, "conll")


def test_ptb_sample_encodes_every_token():
    corpus = read_ptb(EMBEDDED_DATA_DIR / "ptb-sample.tar.gz")
    vocabs = build_vocabularies(corpus, "ptb")
    enc = encode_split(corpus.train, vocabs)
    assert enc.mask.sum() == sum(map(len, corpus.train))
    rows = sum(-(-len(s) // 60) for s in corpus.train)
    assert len(enc) == rows > len(corpus.train)  # sentences over 60 tokens give several rows
    assert (enc.tags[enc.mask] >= 2).all() and not enc.tags[~enc.mask].any()
    assert not enc.oov.any()  # the vocabulary counts train+dev+test and holds every form
