"""The raw-text tokeniser: UD English tokens and sentences, offsets that give back the text."""

import pytest

from convatt.data.tokenize import carries_punctuation, sentences_of, tokenize_paragraph


@pytest.mark.parametrize(
    "text, forms",
    [
        ("I don't know.", ["I", "do", "n't", "know", "."]),
        ("You're sure? It's", ["You", "'re", "sure", "?"] + ["It", "'s"]),
        ("We cannot, won't go.", ["We", "can", "not", ",", "wo", "n't", "go", "."]),
        (
            "Mr. Smith saw the U.S. team, e.g. here.",
            ["Mr.", "Smith", "saw", "the", "U.S.", "team", ",", "e.g.", "here", "."],
        ),
        ('She said "no" (twice).', ["She", "said", '"', "no", '"', "(", "twice", ")", "."]),
        ("An e-mail came.", ["An", "e-mail", "came", "."]),
    ],
)
def test_ud_english_tokens(text, forms):
    assert [f for s in tokenize_paragraph(text) for f in s.forms] == forms


def test_sentences_are_split_and_spacing_is_kept():
    sentences = tokenize_paragraph("Raw text. Two  sentences!\nStill two?")
    assert [s.forms for s in sentences] == [["Raw", "text", "."], ["Two", "sentences", "!"], ["Still", "two", "?"]]
    assert [s.text for s in sentences] == ["Raw text.", "Two sentences!", "Still two?"]
    assert sentences[0].space_after == [True, False, True]


def test_no_tokenizer_is_a_sentence_per_line_split_on_whitespace():
    got = [s.forms for s in sentences_of("The dog. barks\n\n don't  \n", "none")]
    assert got == [["The", "dog.", "barks"], ["don't"]]


@pytest.mark.parametrize(
    "form, tokenizer, carries",
    [
        ("dog.", "none", True),
        ("(it", "none", True),
        ("Mr.", "syntok", False),
        ("Mr.", "none", True),
        ("n't", "none", False),
        ("'s", "syntok", False),
        (".", "none", False),
        ("3.5", "none", False),
        ("...", "none", False),
    ],
)
def test_tokens_that_still_carry_punctuation(form, tokenizer, carries):
    assert carries_punctuation(form, tokenizer) is carries
