"""Tagging with a finished run's best model, CoNLL-U out: `convatt tag` (`tag_run`, in chunks)
and the Python API (`convatt.inference.api`, `tag_sentences`).

Sentences are encoded exactly as in training (`convatt.data.encode_split`): one
longer than the model's `max_len` is cut into consecutive pieces of at most
`max_len` tokens, each tagged as a row of its own (attention does not cross the
pieces), and a word longer than `max_word_len` reaches the char CNN as its first
`max_word_len` characters (the word embedding sees the whole word). Both are
reported on standard error, never silent. Tags are the best of the run's real
tags: the labels `<PAD>` and `<OOV>` are never written.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from convatt.data import EncodedSplit, Vocabularies, encode_split
from convatt.data.tokenize import carries_punctuation
from convatt.data.untagged import Block
from convatt.model.prediction import predict_tags
from convatt.model.variants import TaggerConfig

CHUNK_SENTENCES = 1000  # sentences encoded and predicted at once: bounds memory on any input size


@dataclass(frozen=True)
class TaggingStats:
    sentences: int
    tokens: int
    seconds: float  # encoding, prediction and formatting; not loading the model
    long_sentences: int  # longer than max_len: tagged in pieces
    long_words: int  # tokens longer than max_word_len: the char CNN reads their start
    punctuated: int = 0  # tokens with punctuation at an edge (checked only for raw-text input)
    punctuated_example: str = ""

    def __add__(self, other: TaggingStats) -> TaggingStats:
        return TaggingStats(
            *(getattr(self, f) + getattr(other, f) for f in self._COUNTS),
            punctuated_example=self.punctuated_example or other.punctuated_example,
        )

    _COUNTS = ("sentences", "tokens", "seconds", "long_sentences", "long_words", "punctuated")

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
    model,
    vocab: Vocabularies,
    config: TaggerConfig,
    column: str,
    blocks: list[Block],
    keep_columns: bool = False,
    tokenizer: str | None = None,
) -> tuple[str, TaggingStats]:
    """CoNLL-U text of `blocks` with `column` ("upos"/"xpos") filled in, and what it took;
    the other analysis columns are emptied unless `keep_columns`. With the `tokenizer` raw
    text was read with, tokens that still carry punctuation are counted."""
    start = time.perf_counter()
    sentences = [b.forms for b in blocks if b.forms]
    tags = iter(tag_sentences(model, vocab, config, sentences))
    out = []
    for block in blocks:
        lines = block.tagged(next(tags), column, keep_columns) if block.forms else block.lines
        out.append("\n".join(lines) + "\n\n")
    stats = TaggingStats(
        sentences=len(sentences),
        tokens=sum(map(len, sentences)),
        seconds=time.perf_counter() - start,
        long_sentences=sum(len(s) > config.max_len for s in sentences),
        long_words=sum(len(w) > config.max_word_len for s in sentences for w in s),
        **_punctuated(sentences, tokenizer),
    )
    return "".join(out), stats


def _punctuated(sentences: list[list[str]], tokenizer: str | None) -> dict:
    found = [w for s in sentences for w in s if tokenizer and carries_punctuation(w, tokenizer)]
    return dict(punctuated=len(found), punctuated_example=found[0] if found else "")


def tag_stream(
    model,
    vocab: Vocabularies,
    config: TaggerConfig,
    column: str,
    blocks: Iterable[Block],
    keep_columns: bool = False,
    tokenizer: str | None = None,
    chunk: int = CHUNK_SENTENCES,
) -> Iterator[tuple[str, TaggingStats]]:
    """`tag_blocks` over `chunk` blocks at a time, read from `blocks` as they are needed:
    (CoNLL-U text, stats) of each chunk, so memory does not grow with the input."""
    blocks = iter(blocks)
    while group := list(itertools.islice(blocks, chunk)):
        yield tag_blocks(model, vocab, config, column, group, keep_columns, tokenizer)


def punctuation_note(stats: TaggingStats, tokenizer: str) -> str | None:
    """A warning when tokens still carry punctuation at an edge (raw text read without a tokeniser)."""
    if not stats.punctuated:
        return None
    remedy = "drop --tokenizer none (syntok splits them)" if tokenizer == "none" else "is the text tokenised?"
    return (
        f"warning: {stats.punctuated:,} token(s) still carry punctuation (e.g. {stats.punctuated_example!r}); "
        f"the model was trained on tokens with punctuation split off: {remedy}"
    )


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


def tag_run(
    run,
    blocks: Iterable[Block],
    write: Callable[[str], object],
    log: Callable[[str], None],
    keep_columns: bool = False,
    tokenizer: str | None = None,
    progress: Callable[[TaggingStats], None] | None = None,
) -> TaggingStats:
    """Tag `blocks` with the best model of `run`, handing each chunk's CoNLL-U to `write` as it
    is done; `progress` sees the running totals after each chunk; notes and rates go to `log`."""
    from convatt.inference.loading import load_run

    start = time.perf_counter()
    trained = load_run(run)
    load_seconds = time.perf_counter() - start
    total, start = TaggingStats(0, 0, 0.0, 0, 0), time.perf_counter()
    for text, stats in tag_stream(
        trained.model, trained.vocab, trained.tagger_config, trained.tag_column, blocks, keep_columns, tokenizer
    ):
        write(text)
        # the rate counts reading, tokenising and writing too, not only the model
        total = replace(total + stats, seconds=time.perf_counter() - start)
        if progress:
            progress(total)
    for note in notes(total, trained.tagger_config):
        log(f"note: {note}")
    warning = punctuation_note(total, tokenizer)
    if warning:
        log(warning)
    config = trained.run_config
    log(f"{total.summary(load_seconds)}; {trained.tag_column.upper()} from {config.variant} ({config.preset} run)")
    return total
