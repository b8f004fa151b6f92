"""Data: corpus files -> (word, tag) sentences -> vocabularies -> NumPy arrays.

load_corpus("ptb" | "ud", path) -> Corpus(train, dev, test)
build_vocabularies(corpus, preset) -> Vocabularies(words, chars, tags, ambiguous)
encode_split(sentences, words, chars, tags, ambiguous) -> EncodedSplit
load_word_vectors(path, vocab, dim) -> (matrix, n_found)
"""

from convatt.data.corpus import EMBEDDED_DATA_DIR, Corpus, Sentence
from convatt.data.embeddings import load_word_vectors
from convatt.data.encode import (
    EncodedSplit,
    Vocabularies,
    build_vocabularies,
    chunk,
    encode_split,
)
from convatt.data.load import corpus_files, load_corpus
from convatt.data.ptb import read_mrg, read_ptb
from convatt.data.ud import read_conllu, read_ud, treebank_key, treebank_name
from convatt.data.vocab import (
    OOV,
    OOV_ID,
    PAD,
    PAD_ID,
    Vocab,
    ambiguous_words,
    build_char_vocab,
    build_tag_vocab,
    build_word_vocab,
)

__all__ = [
    "EMBEDDED_DATA_DIR",
    "Corpus",
    "Sentence",
    "load_corpus",
    "corpus_files",
    "read_mrg",
    "read_ptb",
    "read_conllu",
    "read_ud",
    "treebank_key",
    "treebank_name",
    "Vocab",
    "PAD",
    "OOV",
    "PAD_ID",
    "OOV_ID",
    "build_word_vocab",
    "build_char_vocab",
    "build_tag_vocab",
    "ambiguous_words",
    "EncodedSplit",
    "chunk",
    "encode_split",
    "Vocabularies",
    "build_vocabularies",
    "load_word_vectors",
]
