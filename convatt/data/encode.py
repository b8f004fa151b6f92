"""Sentences -> padded, chunked NumPy arrays; the vocabularies of a run, saved as JSON."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from convatt.data.corpus import MAX_LEN, MAX_WORD_LEN, Corpus, Sentence
from convatt.data.formats import data_format
from convatt.data.vocab import (
    OOV_ID,
    PAD,
    PAD_ID,
    SPECIAL_TOKENS,
    Vocab,
    ambiguous_words,
    build_char_vocab,
    build_tag_vocab,
    build_word_vocab,
)
from convatt.errors import ConvattError
from convatt.protocol import DEFAULT_PROTOCOL, TrainingProtocol


@dataclass
class EncodedSplit:
    """One split as arrays of n rows (chunks of at most t tokens); PAD = 0 everywhere.

    words, tags: (n, t) int32; chars: (n, t, t_char) int32;
    oov: (n, t) bool, tokens mapped to the OOV word id;
    ambiguous: (n, t) bool, in-vocabulary tokens whose form is ambiguous in training.
    At PAD positions chars spell `Vocabularies.pad_spelling` (zeros when it is "").
    """

    words: np.ndarray
    chars: np.ndarray
    tags: np.ndarray
    oov: np.ndarray
    ambiguous: np.ndarray

    def __len__(self) -> int:
        return self.words.shape[0]

    @property
    def mask(self) -> np.ndarray:
        """(n, t) bool: True at real tokens, False at PAD."""
        return self.words != PAD_ID


def chunk(sentence: Sentence, max_len: int) -> list[Sentence]:
    """Cut a sentence into consecutive pieces of at most `max_len` tokens (nothing dropped)."""
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    return [sentence[i : i + max_len] for i in range(0, len(sentence), max_len)]


def spell(word: str, chars: Vocab, max_word_len: int) -> list[int]:
    """A word's char ids: its first `max_word_len` characters (the rest is PAD = 0)."""
    return [chars.encode(c) for c in word[:max_word_len]]


def encode_split(
    sentences: list[Sentence],
    vocab: Vocabularies,
    max_len: int = MAX_LEN,
    max_word_len: int = MAX_WORD_LEN,
) -> EncodedSplit:
    """Encode sentences: long ones are chunked, words keep their first `max_word_len` characters."""
    words, chars, tags = vocab.words, vocab.chars, vocab.tags
    if max_word_len < 1:
        raise ValueError(f"max_word_len must be >= 1, got {max_word_len}")
    rows = [piece for s in sentences for piece in chunk(s, max_len)]
    n = len(rows)
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
    row_of = np.repeat(np.arange(n), lengths)
    col_of = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    forms = [w for r in rows for w, _ in r]

    # Work per distinct form, then gather: a corpus has far fewer forms than tokens.
    form_ids: dict[str, int] = {}
    token_form = np.fromiter((form_ids.setdefault(w, len(form_ids)) for w in forms), dtype=np.int64, count=len(forms))
    distinct = list(form_ids)
    form_word = np.array([words.encode(w) for w in distinct] or [0], dtype=np.int32)
    form_chars = np.zeros((max(len(distinct), 1), max_word_len), dtype=np.int32)
    for i, w in enumerate(distinct):
        ids = spell(w, chars, max_word_len)
        form_chars[i, : len(ids)] = ids
    form_ambiguous = np.array([w in vocab.ambiguous for w in distinct] or [False]) & (form_word != OOV_ID)

    shape = (n, max_len)
    out_words = np.zeros(shape, dtype=np.int32)
    out_chars = np.zeros(shape + (max_word_len,), dtype=np.int32)
    pad_ids = spell(vocab.pad_spelling, chars, max_word_len)
    out_chars[:, :, : len(pad_ids)] = pad_ids  # PAD positions; real tokens are written below
    out_tags = np.zeros(shape, dtype=np.int32)
    out_ambiguous = np.zeros(shape, dtype=bool)
    out_words[row_of, col_of] = form_word[token_form]
    out_chars[row_of, col_of] = form_chars[token_form]
    out_tags[row_of, col_of] = [tags.encode(t) for r in rows for _, t in r]
    out_ambiguous[row_of, col_of] = form_ambiguous[token_form]
    return EncodedSplit(out_words, out_chars, out_tags, out_words == OOV_ID, out_ambiguous)


@dataclass
class Vocabularies:
    """Everything needed to encode data the way a run was trained: saved beside the run."""

    words: Vocab
    chars: Vocab
    tags: Vocab
    ambiguous: frozenset[str]
    pad_spelling: str = ""  # the characters of a PAD position: "<PAD>" in the original code

    def to_json(self) -> str:
        """The vocabularies as the JSON text that `load` reads (the run directory writes it)."""
        data = {
            "format": "convatt-vocabularies",
            "version": 2,
            "words": list(self.words.tokens),
            "chars": list(self.chars.tokens),
            "tags": list(self.tags.tokens),
            "ambiguous": sorted(self.ambiguous),
            "pad_spelling": self.pad_spelling,
        }
        return json.dumps(data, ensure_ascii=False)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocabularies:
        """Read vocabularies written as `to_json` gives them."""
        path = Path(path)
        if not path.is_file():
            raise ConvattError("vocabularies file not found", path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ConvattError(f"not valid JSON: {e.msg}", path, e.lineno) from e
        except (OSError, UnicodeDecodeError) as e:
            raise ConvattError(f"cannot read vocabularies: {e}", path) from e
        except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4,300 digits
            raise ConvattError(f"malformed vocabularies file: {str(e)[:100]}", path) from e
        if not isinstance(data, dict) or data.get("format") != "convatt-vocabularies":
            raise ConvattError("not a convatt vocabularies file (no \"format\": \"convatt-vocabularies\")", path)
        for key in ("words", "chars", "tags", "ambiguous"):
            if not (isinstance(data.get(key), list) and all(isinstance(t, str) for t in data[key])):
                raise ConvattError(f"malformed vocabularies file: {key} is not a list of strings", path)
        if not isinstance(data.get("pad_spelling", ""), str):
            raise ConvattError("malformed vocabularies file: pad_spelling is not a string", path)
        try:
            return cls(
                Vocab(tuple(data["words"])),
                Vocab(tuple(data["chars"])),
                Vocab(tuple(data["tags"])),
                frozenset(data["ambiguous"]),
                str(data.get("pad_spelling", "")),
            )  # version 1 (older runs): zeros
        except (KeyError, TypeError, ValueError) as e:
            raise ConvattError(f"malformed vocabularies file: {e}", path) from e


def build_vocabularies(corpus: Corpus, preset: str, protocol: TrainingProtocol = DEFAULT_PROTOCOL) -> Vocabularies:
    """The paper's vocabularies: words counted over train+dev+test (the preset's format says
    how many: PTB the 20,000 most frequent; UD the most frequent half of the distinct forms), chars and ambiguous
    words from train. With the original protocol's `vocabulary`, the chars of the
    special tokens join the chars and the tags are counted over all splits, as the
    original code does; its `pad_inputs` spell PAD positions "<PAD>"."""
    fmt = data_format(preset)
    words = build_word_vocab(corpus.all_sentences(), max_size=fmt.vocab_size, fraction=fmt.vocab_fraction)
    original_vocab = protocol.vocabulary == "original"
    chars = build_char_vocab(corpus.train, SPECIAL_TOKENS if original_vocab else ())
    tags = build_tag_vocab(corpus.all_sentences() if original_vocab else corpus.train)
    pad_spelling = PAD if protocol.pad_inputs == "original" else ""
    return Vocabularies(words, chars, tags, ambiguous_words(corpus.train), pad_spelling)
