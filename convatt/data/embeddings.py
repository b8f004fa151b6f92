"""Pretrained word vectors (fastText `.vec` text or `.bin` model, via gensim) -> a matrix."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from convatt.data._io import existing_file
from convatt.data.vocab import OOV_ID, PAD_ID, Vocab
from convatt.errors import ConvattError

INIT_RANGE = 0.05  # words without a vector get uniform(-0.05, 0.05) rows


def load_word_vectors(
    path: str | os.PathLike,
    vocab: Vocab,
    dim: int,
    limit: int | None = 100_000,
    seed: int = 0,
    random_pad_row: bool = True,
    oov_words: Iterable[str] = (),
) -> tuple[np.ndarray, int]:
    """An embedding matrix (len(vocab), dim) float32 for `vocab`, and how many words had a vector.

    `.bin` (or `.bin.gz`): a fastText model; every vocabulary word gets its vector,
    built from subwords when the word itself is unknown. Anything else: word2vec
    text format (`.vec`, optionally gzipped) with a "COUNT DIM" header, of which
    the first `limit` vectors are read (None: all); words are matched exactly.
    Vocabulary words without a vector (and <OOV>) get seeded uniform(-0.05, 0.05)
    rows; so does row 0 (<PAD>), as in the original code (pads take part in
    attention, so their vector matters), unless `random_pad_row=False` (zeros).
    `oov_words` (the original protocol: the corpus words outside `vocab`): row 1
    (<OOV>) is the vector of one of those found among the vectors read, drawn with
    `seed`, as the original's `load_word_embeddings` wrote each of them into row 1.
    """
    path = existing_file(path)
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    rng = np.random.default_rng(seed)
    matrix = rng.uniform(-INIT_RANGE, INIT_RANGE, size=(len(vocab), dim)).astype(np.float32)
    if not random_pad_row:
        matrix[PAD_ID] = 0.0
    is_bin = path.name.endswith((".bin", ".bin.gz"))
    vectors = _load_bin(path, dim) if is_bin else _load_vec(path, dim, limit)
    found = _copy_vectors(vectors, vocab, matrix)
    oov_word = _drawn_oov_word(oov_words, vectors, rng)
    if oov_word is not None:
        matrix[OOV_ID] = vectors[oov_word]
    bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
    if bad.size:
        raise ConvattError(f"the vector of {vocab.tokens[bad[0]]!r} holds NaN or infinite values", path)
    return matrix, found


def _copy_vectors(vectors, vocab: Vocab, matrix: np.ndarray) -> int:
    """Copy the vector of each word of `vocab` that `vectors` has into its row; return how many."""
    found = 0
    for i, word in enumerate(vocab.tokens[OOV_ID + 1 :], start=OOV_ID + 1):
        if word in vectors:  # .bin: any word with character n-grams
            matrix[i] = vectors[word]
            found += 1
    return found


def _drawn_oov_word(oov_words: Iterable[str], vectors, rng: np.random.Generator) -> str | None:
    """One of `oov_words` that has a vector of its own (not built from subwords), or None."""
    candidates = sorted({w for w in oov_words if w in vectors.key_to_index})
    return candidates[rng.integers(len(candidates))] if candidates else None


FASTTEXT_MAGIC = 793712314  # the int32 a fastText .bin model starts with (since fastText 0.1, 2017)


def _check_bin_header(path: Path) -> None:
    """A fastText .bin starts with its magic number and a version: else the file is something else
    (a .vec renamed, random bytes), which gensim would misreport as an unsupported model kind."""
    try:
        with _open(path) as f:
            head = f.read(64)
    except (OSError, EOFError) as e:
        raise ConvattError(f"cannot read fastText .bin model: {e}", path) from e
    if len(head) < 8:
        raise ConvattError(f"truncated fastText .bin model ({len(head)} bytes): download it again", path)
    if int.from_bytes(head[:4], "little", signed=True) != FASTTEXT_MAGIC:
        shown = head[:24].decode("utf-8", "replace")
        text = all(c.isprintable() or c in "\n\r\t" for c in shown) and not shown.isspace()
        kind = f"it starts with text, {shown!r}: a .vec file? name it .vec" if text else "wrong magic number"
        raise ConvattError(f"not a fastText .bin model ({kind})", path)


def _load_bin(path: Path, dim: int):
    import struct

    from gensim.models.fasttext import load_facebook_vectors  # gensim is slow to import

    _check_bin_header(path)
    try:
        vectors = load_facebook_vectors(str(path))
    except (EOFError, struct.error, AssertionError, ValueError) as e:  # the file ends before its arrays do
        raise ConvattError(
            f"truncated fastText .bin model ({type(e).__name__}: {str(e)[:120]}): download it again", path
        ) from e
    except Exception as e:  # gensim's binary reader fails in many ways on a bad file
        raise ConvattError(f"not a readable fastText .bin model ({type(e).__name__}: {e})", path) from e
    if vectors.vector_size != dim:
        raise ConvattError(f"vectors have dimension {vectors.vector_size}, the model expects {dim}", path)
    return vectors


def _open(path: Path):
    return gzip.open(path, "rb") if path.name.endswith(".gz") else path.open("rb")


def _load_vec(path: Path, dim: int, limit: int | None):
    """Check the header and the rows gensim will read (file:line errors), then load."""
    from gensim.models import KeyedVectors  # gensim is slow to import

    try:
        with _open(path) as f:
            header = f.readline()
            parts = header.split()
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                shown = header[:60].decode("utf-8", "replace").rstrip()
                raise ConvattError(f"expected a header 'COUNT DIM' (word2vec text format), found {shown!r}", path, 1)
            count, width = int(parts[0]), int(parts[1])
            if width != dim:
                raise ConvattError(f"vectors have dimension {width}, the model expects {dim}", path, 1)
            n = count if limit is None else min(count, limit)
            for number in range(2, n + 2):
                line = f.readline()
                if not line:
                    raise ConvattError(
                        f"the header announces {count} vectors but the file ends after {number - 2}", path, number
                    )
                if line.rstrip().count(b" ") != width:  # gensim splits rows on single spaces
                    raise ConvattError(
                        f"expected a word and {width} numbers separated by single spaces, "
                        f"found {line.rstrip().count(b' ')} values",
                        path,
                        number,
                    )
    except (OSError, EOFError) as e:
        raise ConvattError(f"cannot read vectors file: {e}", path) from e
    try:
        return KeyedVectors.load_word2vec_format(str(path), binary=False, limit=limit)
    except (ValueError, EOFError, OSError) as e:  # UnicodeDecodeError is a ValueError
        number = _first_bad_row(path, n)
        raise ConvattError(f"gensim cannot read the vectors ({e})", path, number) from e


def _first_bad_row(path: Path, n: int) -> int | None:
    """Line number of the first of `n` rows with a non-UTF-8 word or a value that is no number."""
    with _open(path) as f:
        f.readline()
        for number in range(2, n + 2):
            parts = f.readline().rstrip().split(b" ")
            try:
                parts[0].decode("utf-8")
                [float(v) for v in parts[1:]]
            except ValueError:
                return number
    return None
