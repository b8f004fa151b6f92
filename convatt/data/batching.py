"""Model inputs from encoded arrays, with the char CNN's work deduplicated.

The tagger's char CNN maps each word's character ids (t_char of them) to a 64-d
vector. A batch of 32 sentences has 32 x 60 token positions but only a few hundred
distinct character rows (padding positions are all the same row). `pack_chars`
sends each distinct row through the CNN once and gives the model an index from
token position to row, so the result is the same as running the CNN per position.

Inputs of the tagger (all with the batch as first axis):
    words       (b, t)          word ids
    char_rows   (b, k, t_char)  the distinct char rows of the batch, flattened to b*k
    char_index  (b, t)          for each token, its row in the flattened b*k rows

k, the rows per sentence, is rounded up so that few input shapes occur: to a
multiple of 4 by default (TensorFlow without XLA takes any shape at no cost), or,
with `few_shapes` (an XLA-compiled model: JAX, or a GPU), to one of a short
ladder, since every new shape there costs a compilation of the training step
(seconds each; measured on an H100 they were most of a UD run's time).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

ROW_BUCKET = 4  # k is rounded up to a multiple of this ...
FEW_SHAPES_LADDER = (8, 16, 24, 32, 48)  # ... or, with few_shapes, to one of these (then to t)


def rows_per_sentence(n_rows: int, b: int, t: int, few_shapes: bool = False) -> int:
    """k: at least n_rows / b, rounded up as the module says, at most t."""
    need = math.ceil(n_rows / b)
    if few_shapes:
        return min(next((k for k in FEW_SHAPES_LADDER if k >= need), t), t)
    return min(ROW_BUCKET * math.ceil(need / ROW_BUCKET), t)


def pack_chars(chars: np.ndarray, dedupe: bool = True, few_shapes: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(b, t, t_char) char ids -> char_rows (b, k, t_char), char_index (b, t)."""
    b, t, tc = chars.shape
    flat = np.ascontiguousarray(chars.reshape(b * t, tc), dtype=np.int32)
    if not dedupe:
        return flat.reshape(b, t, tc), np.arange(b * t, dtype=np.int32).reshape(b, t)
    keys = flat.view(np.dtype((np.void, flat.dtype.itemsize * tc))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    k = rows_per_sentence(len(first), b, t, few_shapes)
    rows = np.zeros((b * k, tc), dtype=np.int32)
    rows[: len(first)] = flat[first]
    return rows.reshape(b, k, tc), inverse.astype(np.int32).reshape(b, t)


def make_inputs(
    words: np.ndarray, chars: np.ndarray, dedupe: bool = True, few_shapes: bool = False
) -> dict[str, np.ndarray]:
    """The tagger's input dict for one batch of encoded sentences."""
    char_rows, char_index = pack_chars(chars, dedupe, few_shapes)
    return {"words": words.astype(np.int32), "char_rows": char_rows, "char_index": char_index}


def batch_order(n: int, batch_size: int, shuffle_seed: int | None) -> list[np.ndarray]:
    """Index arrays of the batches of one epoch (shuffled when a seed is given)."""
    order = np.arange(n) if shuffle_seed is None else np.random.default_rng(shuffle_seed).permutation(n)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


def iterate_batches(
    split, batch_size: int, shuffle_seed: int | None = None, dedupe: bool = True, few_shapes: bool = False
) -> Iterator[tuple[dict, np.ndarray, np.ndarray]]:
    """Yield (inputs, tags, sample_weight) for an EncodedSplit; weight 0 on PAD."""
    for idx in batch_order(len(split.words), batch_size, shuffle_seed):
        yield split_batch(split, idx, dedupe, few_shapes)


def split_batch(
    split, rows: np.ndarray, dedupe: bool = True, few_shapes: bool = False
) -> tuple[dict, np.ndarray, np.ndarray]:
    """(inputs, tags, sample_weight) of the rows `rows` of an EncodedSplit; weight 0 on PAD."""
    tags = split.tags[rows]
    return make_inputs(split.words[rows], split.chars[rows], dedupe, few_shapes), tags, (tags != 0).astype("float32")
