"""Pretrained vectors: .vec text through gensim (limit, random rows) and fastText .bin."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from convatt.data import Vocab, load_word_vectors

ROWS = {
    "the": [0.1, 0.2, 0.3, 0.4],
    ",": [1.0, -1.0, 0.5, 0.25],
    "dog": [2.0, 2.0, 2.0, 2.0],
    "runs": [-0.5, 0.0, 0.5, 1.0],
    "cat": [3.0, 3.0, 3.0, 3.0],
}


def write_vec(path, rows=ROWS, dim=4):
    lines = [f"{len(rows)} {dim}"]
    # rows end with a space, as in fastText files
    lines += [f"{w} " + " ".join(map(str, v)) + " " for w, v in rows.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


VOCAB = Vocab.from_items(["the", ",", "dog", "cat", "unseen"])


def test_vec_rows_limit_and_random_rows(tmp_path):
    path = write_vec(tmp_path / "v.vec")
    matrix, found = load_word_vectors(path, VOCAB, dim=4, limit=3)  # reads the, ",", dog
    assert matrix.shape == (7, 4) and matrix.dtype == np.float32
    assert found == 3
    for word in ("the", ",", "dog"):
        np.testing.assert_array_equal(matrix[VOCAB.encode(word)], np.float32(ROWS[word]))
    # PAD (random, as the original code's: pads take part in attention), <OOV>,
    # a word past the limit, a word not in the file
    random_rows = matrix[[0, 1, VOCAB.encode("cat"), VOCAB.encode("unseen")]]
    assert ((random_rows >= -0.05) & (random_rows < 0.05)).all() and random_rows.std() > 0
    again, _ = load_word_vectors(path, VOCAB, dim=4, limit=3)
    np.testing.assert_array_equal(matrix, again)  # seeded
    other, _ = load_word_vectors(path, VOCAB, dim=4, limit=3, seed=1)
    assert not np.array_equal(matrix[1], other[1])
    zero_pad, _ = load_word_vectors(path, VOCAB, dim=4, limit=3, random_pad_row=False)
    assert not zero_pad[0].any()  # the Keras 3 protocol's zero PAD row
    np.testing.assert_array_equal(zero_pad[1:], matrix[1:])


def test_the_oov_row_is_one_oov_words_vector_as_in_the_original(tmp_path):
    # the original wrote the vector of every OOV corpus word found among the first N
    # vectors into row 1 (<OOV>); here one of them, drawn with the seed
    rows = {**ROWS, "zebra": [5.0, 5.0, 5.0, 5.0], "yak": [6.0, 6.0, 6.0, 6.0]}
    path = write_vec(tmp_path / "v.vec", rows)
    plain, _ = load_word_vectors(path, VOCAB, dim=4)
    oov = {"zebra", "yak", "quokka"}  # quokka has no vector
    drawn = {tuple(load_word_vectors(path, VOCAB, dim=4, seed=s, oov_words=oov)[0][1]) for s in range(12)}
    assert drawn == {(5.0,) * 4, (6.0,) * 4}  # a real vector, each candidate drawn for some seed
    matrix, _ = load_word_vectors(path, VOCAB, dim=4, oov_words=oov)
    np.testing.assert_array_equal(np.delete(matrix, 1, axis=0), np.delete(plain, 1, axis=0))  # other rows as before
    # past the limit (the original read the first 100,000 vectors), no candidate: random as before
    limited, _ = load_word_vectors(path, VOCAB, dim=4, limit=5, oov_words=oov)
    np.testing.assert_array_equal(limited[1], load_word_vectors(path, VOCAB, dim=4, limit=5)[0][1])


def test_vec_without_limit_and_gzipped(tmp_path):
    plain = write_vec(tmp_path / "v.vec")
    gz = tmp_path / "v.vec.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    matrix, found = load_word_vectors(gz, VOCAB, dim=4, limit=None)
    assert found == 4
    np.testing.assert_array_equal(matrix[VOCAB.encode("cat")], np.float32(ROWS["cat"]))


@pytest.fixture(scope="module")
def fasttext_bin(tmp_path_factory):
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    sentences = [["the", "dog", "runs"], ["the", "cat", "sleeps", ","]] * 10
    model = FastText(vector_size=8, window=2, min_count=1, min_n=2, max_n=3, bucket=2000, seed=1, workers=1)
    model.build_vocab(corpus_iterable=sentences)
    model.train(corpus_iterable=sentences, total_examples=len(sentences), epochs=2)
    path = tmp_path_factory.mktemp("ft") / "tiny.bin"
    save_facebook_model(model, str(path))
    return path, model.wv


def test_bin_gives_every_word_a_vector_from_subwords(fasttext_bin):
    path, wv = fasttext_bin
    matrix, found = load_word_vectors(path, VOCAB, dim=8)
    assert found == len(VOCAB) - 2  # "unseen" too, from its character n-grams
    np.testing.assert_allclose(matrix[VOCAB.encode("dog")], wv["dog"], rtol=1e-6)
    np.testing.assert_allclose(matrix[VOCAB.encode("unseen")], wv["unseen"], rtol=1e-6)
    assert matrix[0].any() and not load_word_vectors(path, VOCAB, dim=8, random_pad_row=False)[0][0].any()
