"""`convatt tag`: a finished run's best model tags new text, CoNLL-U out.

Sentences are encoded exactly as in training (`convatt.data.encode_split`): one
longer than the model's `max_len` is cut into consecutive pieces of at most
`max_len` tokens, each tagged as a row of its own (attention does not cross the
pieces), and a word longer than `max_word_len` reaches the char CNN as its first
`max_word_len` characters (the word embedding sees the whole word). Both are
reported on standard error, never silent. Tags are the best of the run's real
tags: the labels `<PAD>` and `<OOV>` are never written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from convatt.data import EncodedSplit, Vocabularies, encode_split
from convatt.data.untagged import Block
from convatt.model.prediction import predict_tags
from convatt.model.variants import TaggerConfig


@dataclass(frozen=True)
class TaggingStats:
    sentences: int
    tokens: int
    seconds: float  # encoding, prediction and formatting; not loading the model
    long_sentences: int  # longer than max_len: tagged in pieces
    long_words: int  # tokens longer than max_word_len: the char CNN reads their start

    def summary(self, load_seconds: float | None = None) -> str:
        rate = lambda n: n / max(self.seconds, 1e-9)
        text = (
            f"tagged {self.sentences:,} sentences ({self.tokens:,} tokens) in {self.seconds:.2f} s: "
            f"{rate(self.sentences):,.1f} sentences/s, {rate(self.tokens):,.0f} tokens/s"
        )
        return text + (f" (model loaded in {load_seconds:.1f} s)" if load_seconds is not None else "")


def predict_tag_ids(model, split: EncodedSplit, batch_size: int = 256) -> np.ndarray:
    """(n, t) ids of the most probable real tag (never <PAD> = 0 or <OOV> = 1)."""
    return predict_tags(model, split, batch_size, real_tags_only=True)


def tag_sentences(model, vocab: Vocabularies, config: TaggerConfig, sentences: list[list[str]]) -> list[list[str]]:
    """The tag of every token of every sentence, however long."""
    untagged = [[(form, "") for form in forms] for forms in sentences]
    split = encode_split(untagged, vocab, config.max_len, config.max_word_len)
    ids = predict_tag_ids(model, split)[split.mask]  # row-major: the tokens in reading order
    names = np.asarray(vocab.tags.tokens, dtype=object)[ids]
    ends = np.cumsum([len(s) for s in sentences])
    return [list(piece) for piece in np.split(names, ends[:-1])] if sentences else []


def tag_blocks(
    model, vocab: Vocabularies, config: TaggerConfig, column: str, blocks: list[Block]
) -> tuple[str, TaggingStats]:
    """CoNLL-U text of `blocks` with `column` ("upos"/"xpos") filled in, and what it took."""
    start = time.perf_counter()
    sentences = [b.forms for b in blocks if b.forms]
    tags = iter(tag_sentences(model, vocab, config, sentences))
    out = []
    for block in blocks:
        lines = block.tagged(next(tags), column) if block.forms else block.lines
        out.append("\n".join(lines) + "\n\n")
    stats = TaggingStats(
        sentences=len(sentences),
        tokens=sum(map(len, sentences)),
        seconds=time.perf_counter() - start,
        long_sentences=sum(len(s) > config.max_len for s in sentences),
        long_words=sum(len(w) > config.max_word_len for s in sentences for w in s),
    )
    return "".join(out), stats


def notes(stats: TaggingStats, config: TaggerConfig) -> list[str]:
    """What the encoding did to long input, as training does it."""
    found = []
    if stats.long_sentences:
        found.append(
            f"{stats.long_sentences:,} sentence(s) longer than {config.max_len} tokens were tagged in "
            f"consecutive pieces of at most {config.max_len} tokens, as in training "
            "(attention does not cross the pieces)"
        )
    if stats.long_words:
        found.append(
            f"{stats.long_words:,} token(s) longer than {config.max_word_len} characters: the char CNN "
            f"reads their first {config.max_word_len} characters, as in training"
        )
    return found


def tag_run(run, blocks: list[Block], log: Callable[[str], None]) -> str:
    """Tag `blocks` with the best model of `run`; progress and rates go to `log`."""
    from convatt.trained.loading import load_model, load_settings, load_vocabularies

    settings = load_settings(run)
    vocab = load_vocabularies(run)
    start = time.perf_counter()
    model = load_model(run)
    load_seconds = time.perf_counter() - start
    text, stats = tag_blocks(model, vocab, settings.config, settings.tag_column, blocks)
    for note in notes(stats, settings.config):
        log(f"note: {note}")
    log(f"{stats.summary(load_seconds)}; {settings.tag_column.upper()} from {settings.variant} ({settings.preset} run)")
    return text
