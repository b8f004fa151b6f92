"""The character LM's n-gram baselines (`convatt.sequence.ngram`): interpolated Kneser-Ney
against hand-computed probabilities and a loop-by-loop reference, and the LM's events."""

from collections import Counter, defaultdict

import numpy as np
import pytest

from convatt.data.char_text import text_chunks
from convatt.data.corpus import Corpus
from convatt.sequence.data import encode_sequences, symbol_vocabulary
from convatt.sequence.ngram import KneserNey, bits_per_character, corpus_baselines


def encoded(train: str, test: str = "", chunk_len: int = 64):
    corpus = Corpus(
        "toy",
        text_chunks(train, chunk_len),
        text_chunks(test or train, chunk_len),
        text_chunks(test or train, chunk_len),
    )
    symbols = symbol_vocabulary(corpus)
    split = lambda s: encode_sequences(s, symbols, chunk_len, False)
    return symbols, split(corpus.train), split(corpus.test)


def test_a_unigram_is_absolute_discounting_against_uniform():
    symbols, train, _ = encoded("aab")  # targets a, b; symbols PAD, OOV, a, b
    model = KneserNey.fit(train, 1, len(symbols), discount=0.5)
    # p(w) = max(c(w) - 0.5, 0) / 2 + 0.5 * 2 / 2 * 1/3 over OOV, a, b
    np.testing.assert_allclose(model.distribution([]), [0, 1 / 6, 5 / 12, 5 / 12])


def test_a_bigram_by_hand():
    symbols, train, _ = encoded("abab")  # events a->b, b->a, a->b; ids: a 2, b 3 (a tie, alphabetical)
    assert symbols[2:] == ["a", "b"]
    model = KneserNey.fit(train, 2, len(symbols), discount=0.5)
    # continuation counts of the unigram level: a after b, b after a: p1 = (1/6, 5/12, 5/12)
    # p2(b | a) = (2 - 0.5) / 2 + 0.5 * 1 / 2 * 5/12 = 41/48; p2(a | a) = 5/48; p2(OOV | a) = 2/48
    np.testing.assert_allclose(model.distribution([2]), [0, 2 / 48, 5 / 48, 41 / 48])
    np.testing.assert_allclose(np.exp(model.log_probs(train)), [41 / 48, 17 / 24, 41 / 48])


def reference_kneser_ney(train_chunks: list[str], order: int, vocabulary: list[str], discount: float):
    """p(w | context) by the textbook recursion, one dict per order, from the chunks' events."""
    events = [(chunk[max(0, i - order + 1) : i], chunk[i]) for chunk in train_chunks for i in range(1, len(chunk))]
    top = Counter((h[len(h) - order + 1 :] if order > 1 else "") + w for h, w in events if len(h) >= order - 1)
    counts = {order: top}
    for m in range(order - 1, 0, -1):
        counts[m] = Counter(gram[1:] for gram in {g for h, w in events if len(h) >= m for g in [h[len(h) - m :] + w]})
    tables = {}
    for m, c in counts.items():
        totals, followers = defaultdict(int), defaultdict(int)
        for gram, n in c.items():
            totals[gram[:-1]] += n
            followers[gram[:-1]] += 1
        tables[m] = (c, totals, followers)

    def prob(context: str, w: str) -> float:
        p = 1 / len(vocabulary)
        for m in range(1, order + 1):
            h = context[len(context) - m + 1 :] if m > 1 else ""
            if m - 1 > len(context) or h not in tables[m][1]:
                continue
            c, totals, followers = tables[m]
            p = max(c.get(h + w, 0) - discount, 0) / totals[h] + discount * followers[h] / totals[h] * p
        return p

    return prob


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_against_a_loop_by_loop_reference(order):
    rng = np.random.default_rng(order)
    train = "".join(rng.choice(list("abcde "), 300, p=[0.3, 0.2, 0.2, 0.1, 0.05, 0.15]))
    test = "".join(rng.choice(list("abcdefz "), 120))  # f and z: OOV
    symbols, train_split, test_split = encoded(train, test, chunk_len=16)
    model = KneserNey.fit(train_split, order, len(symbols), discount=0.6)
    prob = reference_kneser_ney([train[i : i + 17] for i in range(0, len(train) - 1, 16)], order, symbols[1:], 0.6)
    # an unseen character (f, z) is in no count, as the OOV id it becomes
    expected = [
        prob(chunk[max(0, i - order + 1) : i], chunk[i])
        for chunk in (test[i : i + 17] for i in range(0, len(test) - 1, 16))
        for i in range(1, len(chunk))
    ]
    np.testing.assert_allclose(np.exp(model.log_probs(test_split)), expected, rtol=1e-12)


@pytest.mark.parametrize("order", [1, 2, 3, 5])
def test_each_distribution_sums_to_one_over_the_vocabulary(order):
    symbols, train, _ = encoded("the cat sat on the mat. the hat sat on the cat.", chunk_len=12)
    model = KneserNey.fit(train, order, len(symbols))  # the discounts estimated
    ids = {s: i for i, s in enumerate(symbols)}
    for context in ["", "t", "th", "the ", " the", "zzzz", "at.", "q t"]:
        p = model.distribution([ids.get(c, 1) for c in context])
        assert p[0] == 0 and (p[1:] > 0).all()
        assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_bits_per_character_and_the_baselines_frame():
    text = "a cat sat on a mat\nthe cat ate\n" * 4
    corpus = Corpus("toy", text_chunks(text, 8), text_chunks(text[:40], 8), text_chunks(text[:40], 8))
    frame = corpus_baselines(corpus, orders=(1, 2))
    symbols = symbol_vocabulary(corpus)
    test = encode_sequences(corpus.test, symbols, 8, False)
    model = KneserNey.fit(encode_sequences(corpus.train, symbols, 8, False), 2, len(symbols))
    assert frame["test_bpc"].iloc[1] == pytest.approx(bits_per_character(model, test))
    assert frame["test_bpc"].iloc[1] < frame["test_bpc"].iloc[0]  # a repeated text: the bigram knows it better
    assert frame["test_characters"].iloc[0] == len(text[:40]) - 1 == test.weights.sum()


def test_the_discounts_are_estimated_from_counts_of_one_and_two():
    text = "abracadabra, a bar, a cab, a dab; abba"
    symbols, train, _ = encoded(text, chunk_len=200)
    model = KneserNey.fit(train, 2, len(symbols))
    bigrams = Counter(text[i : i + 2] for i in range(len(text) - 1))  # the top order: raw counts
    n1, n2 = sum(c == 1 for c in bigrams.values()), sum(c == 2 for c in bigrams.values())
    assert model.orders[1].discount == pytest.approx(n1 / (n1 + 2 * n2))
    types = Counter(gram[1] for gram in bigrams)  # below it: distinct characters before each one
    n1, n2 = sum(c == 1 for c in types.values()), sum(c == 2 for c in types.values())
    assert model.orders[0].discount == pytest.approx(n1 / (n1 + 2 * n2) if n1 else 0.75)
