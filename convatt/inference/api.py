"""The Python API for tagging: `convatt.load_tagger(run_dir)`, then `tag(text)` or `tag_tokens(sentences)`.

    >>> tagger = convatt.load_tagger("runs/ud/UD_English-LinES/san-pe-add/seed1")
    >>> doc = tagger.tag("Raw text. Two sentences.")
    >>> [[(w.form, w.tag) for w in s.words] for s in doc.sentences]
    [[("Raw", "ADJ"), ("text", "NOUN"), (".", "PUNCT")], [("Two", "NUM"), ...]]  # the tags: the model's
    >>> doc.to_conllu()  # what `convatt tag --format text` writes

Tagging is `convatt tag`'s: the same tokeniser, encoding and model, so the API and the CLI agree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from convatt.data.tokenize import TokenizedSentence, sentences_of
from convatt.data.untagged import text_block
from convatt.inference.loading import TrainedRun, load_run
from convatt.inference.tagging import tag_sentences


@dataclass(frozen=True)
class TaggedWord:
    form: str
    tag: str  # UPOS for a UD run, the PTB tag (XPOS) for a PTB run
    space_after: bool = True


@dataclass(frozen=True)
class TaggedSentence:
    words: tuple[TaggedWord, ...]
    text: str

    def pairs(self) -> list[tuple[str, str]]:
        """(form, tag) of each word."""
        return [(w.form, w.tag) for w in self.words]


@dataclass(frozen=True)
class TaggedDocument:
    sentences: tuple[TaggedSentence, ...]
    column: str  # "upos" or "xpos": where `to_conllu` writes the tags

    def __iter__(self) -> Iterator[TaggedSentence]:
        return iter(self.sentences)

    def __len__(self) -> int:
        return len(self.sentences)

    def to_conllu(self) -> str:
        """The sentences as CoNLL-U, tags in `column`, `SpaceAfter=No` where no space followed."""
        out = []
        for number, s in enumerate(self.sentences, start=1):
            tokenized = TokenizedSentence([w.form for w in s.words], [w.space_after for w in s.words], s.text)
            block = text_block(tokenized, number, number)
            out.append("\n".join(block.tagged([w.tag for w in s.words], self.column)) + "\n\n")
        return "".join(out)


class Tagger:
    """A finished run's best model, ready to tag; see the module docstring."""

    def __init__(self, trained: TrainedRun):
        self.trained = trained

    @property
    def column(self) -> str:
        return self.trained.tag_column

    def tag(self, text: str, tokenizer: str = "syntok") -> TaggedDocument:
        """Raw text, tokenised and split into sentences (tokenizer "none": a sentence per line,
        whitespace tokens), tagged."""
        return self._tag(list(sentences_of(text, tokenizer)))

    def tag_tokens(self, sentences: Iterable[Sequence[str]]) -> TaggedDocument:
        """Sentences that are already lists of tokens, tagged."""
        forms = [[str(f) for f in s] for s in sentences]
        return self._tag([TokenizedSentence(f, [True] * len(f), " ".join(f)) for f in forms if f])

    def _tag(self, sentences: list[TokenizedSentence]) -> TaggedDocument:
        t = self.trained
        tags = tag_sentences(t.model, t.vocab, t.tagger_config, [s.forms for s in sentences])
        tagged = (
            TaggedSentence(tuple(map(TaggedWord, s.forms, ts, s.space_after)), s.text) for s, ts in zip(sentences, tags)
        )
        return TaggedDocument(tuple(tagged), self.column)


def load_tagger(run_dir: str | os.PathLike) -> Tagger:
    """The tagger of a finished run directory (its best model, configuration and vocabularies)."""
    return Tagger(load_run(run_dir))
