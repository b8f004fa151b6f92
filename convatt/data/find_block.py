"""Multi-Token Attention's find-the-block task (Golovneva et al. 2025), generated from a spec file.

A sample is blocks of `block_len` distinct random letters separated by ".", then "#" and
`query_len` letters of one block (the target) in random order; the answer is the target
block. No other block holds all the query letters, so the answer is unique. Unlike MTA's
generator, every block is whole (theirs may cut the last one) and the sequence is short
enough for a CPU (`n_blocks`).

The spec (a JSON file, the preset's `--data`) fixes everything, its `seed` included: a run's
own seed changes the model's initialisation and batch order, never the samples. Samples are
unique by their input (blocks and query), so train, dev and test are disjoint.

As a `Corpus`, a sample is a causal tagging: the pair (symbol i, symbol i + 1) where symbol
i + 1 belongs to the answer, (symbol i, "") where there is nothing to predict.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from convatt.data.corpus import Corpus, Sentence
from convatt.errors import ConvattError

BLOCK_SEPARATOR, QUERY_SEPARATOR = ".", "#"
NO_TARGET = ""  # a position whose next symbol is not predicted (no loss, not scored)


@dataclass(frozen=True)
class FindBlockSpec:
    """The task's parameters (N = block_len, L = query_len) and the samples' split sizes."""

    block_len: int = 5
    query_len: int = 2
    n_blocks: int = 8
    alphabet_size: int = 26
    train: int = 20_000
    dev: int = 500
    test: int = 1_000
    seed: int = 0

    def check(self, where: Path | None = None) -> None:
        problems = []
        if not 1 <= self.query_len <= self.block_len <= self.alphabet_size <= 26:
            problems.append("expected 1 <= query_len <= block_len <= alphabet_size <= 26")
        if self.n_blocks < 2 or min(self.train, self.dev, self.test) < 1:
            problems.append("expected n_blocks >= 2 and train, dev, test >= 1")
        if problems:
            raise ConvattError(f"bad find-the-block spec: {'; '.join(problems)}", where)

    @property
    def input_len(self) -> int:
        """Symbols before the answer: the blocks, their separators, "#" and the query."""
        return self.n_blocks * (self.block_len + 1) + self.query_len

    @property
    def name(self) -> str:
        """The corpus name of its samples, e.g. "find-block-N5-L2-B4"."""
        return f"find-block-N{self.block_len}-L{self.query_len}-B{self.n_blocks}"

    @classmethod
    def load(cls, path: Path) -> FindBlockSpec:
        try:
            values = json.loads(Path(path).read_text())
        except (OSError, ValueError) as e:
            raise ConvattError(f"not a find-the-block spec (JSON): {e}", path) from None
        known = set(cls.__dataclass_fields__)
        if not isinstance(values, dict) or set(values) - known:
            unknown = sorted(set(values) - known) if isinstance(values, dict) else values
            raise ConvattError(f"bad find-the-block spec: unknown keys {unknown}; known: {sorted(known)}", path)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()):
            raise ConvattError("bad find-the-block spec: every value must be a whole number", path)
        spec = cls(**values)
        spec.check(path)
        return spec


@dataclass(frozen=True)
class Sample:
    blocks: tuple[str, ...]
    query: str
    answer: str

    @property
    def input(self) -> str:
        return BLOCK_SEPARATOR.join(self.blocks) + QUERY_SEPARATOR + self.query

    def sentence(self) -> Sentence:
        """(symbol, next symbol if it is part of the answer else NO_TARGET), over input + answer[:-1]."""
        text, start = self.input + self.answer, len(self.input)
        return [(text[i], text[i + 1] if i + 1 >= start else NO_TARGET) for i in range(len(text) - 1)]


def _sample(spec: FindBlockSpec, rng: random.Random) -> Sample:
    alphabet = [chr(ord("a") + i) for i in range(spec.alphabet_size)]
    target = rng.sample(alphabet, spec.block_len)
    query = set(rng.sample(target, spec.query_len))
    blocks = {"".join(target)}
    while len(blocks) < spec.n_blocks:
        block = rng.sample(alphabet, spec.block_len)
        if not query <= set(block):  # no second block may answer the query
            blocks.add("".join(block))
    order = sorted(blocks)
    rng.shuffle(order)
    return Sample(tuple(order), "".join(rng.sample(sorted(query), spec.query_len)), "".join(target))


def generate(spec: FindBlockSpec) -> tuple[list[Sample], list[Sample], list[Sample]]:
    """(train, dev, test): unique inputs, drawn in order from `spec.seed` (test first, then dev, train)."""
    rng, seen, samples = random.Random(spec.seed), set(), []
    total = spec.test + spec.dev + spec.train
    while len(samples) < total:
        sample = _sample(spec, rng)
        if sample.input not in seen:
            seen.add(sample.input)
            samples.append(sample)
    test, dev = samples[: spec.test], samples[spec.test : spec.test + spec.dev]
    return samples[spec.test + spec.dev :], dev, test


def read_find_block(path: Path) -> Corpus:
    """The samples of the spec file `path` as a Corpus of causal taggings (see the module's doc)."""
    spec = FindBlockSpec.load(path)
    train, dev, test = ([s.sentence() for s in split] for split in generate(spec))
    return Corpus(spec.name, train, dev, test)
