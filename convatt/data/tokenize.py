"""Raw text -> sentences of tokens, UD English style, with no model to download.

syntok (rule-based, pure Python, maintained as segtok's successor) splits sentences and
tokens and keeps every token's character offset, which the CoNLL-U output needs for
`SpaceAfter=No` and `# text`. It already splits clitics as UD English does (`don't` ->
`do` + `n't`, `you're` -> `you` + `'re`) and punctuation off words. Three things are
fixed here to match UD English treebanks: abbreviations keep their dot (`Mr.`, `U.S.`,
`e.g.`, where syntok writes `Mr` + `.`); hyphenated words stay whole (syntok drops the
hyphen as spacing); and `cannot`, `gonna`, `wanna`, `gotta` are split (`can` + `not`).
NLTK's Treebank tokeniser has the clitic rules but no sentence splitter without punkt's
downloaded data; pysbd splits sentences only.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

TOKENIZERS = ("syntok", "none")
_ABBREVIATION = re.compile(r"[^\W\d_]{1,4}(\.[^\W\d_]{1,4})*")  # Mr, U.S, p.m, e.g, etc
_ABBREVIATION_WITH_DOT = re.compile(r"([^\W\d_]{1,4}\.)+")
_SPLITS = {"cannot": 3, "gonna": 3, "wanna": 3, "gotta": 3}  # UD: can|not, gon|na, wan|na, got|ta


@dataclass(frozen=True)
class Token:
    """A token and where it is in the text it was cut from: text[start:end] == form."""

    form: str
    start: int
    end: int


@dataclass(frozen=True)
class TokenizedSentence:
    forms: list[str]
    space_after: list[bool]  # False: the next token follows without a space (CoNLL-U SpaceAfter=No)
    text: str  # the sentence as written, runs of whitespace made one space

    @classmethod
    def from_tokens(cls, tokens: list[Token], text: str, next_start: int | None) -> TokenizedSentence:
        starts = [t.start for t in tokens[1:]] + [next_start]
        space = [s is None or s > t.end for t, s in zip(tokens, starts)]
        pieces = [t.form + (" " if sp else "") for t, sp in zip(tokens, space)]
        return cls([t.form for t in tokens], space, "".join(pieces).rstrip())


def tokenize_paragraph(text: str) -> list[TokenizedSentence]:
    """The sentences of `text` (a paragraph or more), tokenised."""
    import syntok.segmenter as segmenter

    sentences = [_fix(list(s), text) for paragraph in segmenter.analyze(text) for s in paragraph]
    sentences = [s for s in sentences if s]
    nexts = [s[0].start for s in sentences[1:]] + [None]
    return [TokenizedSentence.from_tokens(s, text, n) for s, n in zip(sentences, nexts)]


def _fix(tokens, text: str) -> list[Token]:
    """syntok's tokens of one sentence, made UD English ones (see the module docstring)."""
    out: list[Token] = []
    for i, tok in enumerate(tokens):
        start, end = tok.offset, tok.offset + len(tok.value)
        gap = tok.spacing
        if gap.strip() and not any(c.isspace() for c in gap) and out:  # e-mail: syntok drops the hyphen
            prev = out.pop()
            out.append(Token(text[prev.start : end], prev.start, end))
            continue
        out.extend(
            Token(m.group(), start - len(gap) + m.start(), start - len(gap) + m.end()) for m in re.finditer(r"\S+", gap)
        )
        following = tokens[i + 1].value if i + 1 < len(tokens) else ""
        if tok.value == "." and not gap and out and _ABBREVIATION.fullmatch(out[-1].form) and _has_word(following):
            prev = out.pop()  # a dot inside the sentence ends an abbreviation
            out.append(Token(text[prev.start : end], prev.start, end))
            continue
        cut = _SPLITS.get(tok.value.lower())
        if cut:
            out += [Token(tok.value[:cut], start, start + cut), Token(tok.value[cut:], start + cut, end)]
        else:
            out.append(Token(tok.value, start, end))
    return out


def _has_word(form: str) -> bool:
    return any(c.isalnum() for c in form)


def is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def carries_punctuation(form: str, tokenizer: str) -> bool:
    """Whether a token still has punctuation at an edge ("dog.", "(it"), as a tokeniser would split it.

    Clitics ('s, n't) are words of their own; after syntok, abbreviations (Mr., U.S.) are kept whole."""
    if len(form) < 2 or not _has_word(form) or form[0] in "'’":
        return False
    if not (is_punctuation(form[0]) or is_punctuation(form[-1])):
        return False
    return not (tokenizer == "syntok" and _ABBREVIATION_WITH_DOT.fullmatch(form))


def whitespace_sentence(line: str) -> TokenizedSentence | None:
    """`--tokenizer none`: a line is a sentence, its tokens split on whitespace."""
    forms = line.split()
    return TokenizedSentence(forms, [True] * len(forms), " ".join(forms)) if forms else None


def sentences_of(paragraph: str, tokenizer: str) -> Iterator[TokenizedSentence]:
    if tokenizer == "syntok":
        yield from tokenize_paragraph(paragraph)
    else:
        for line in paragraph.split("\n"):
            sentence = whitespace_sentence(line)
            if sentence:
                yield sentence
