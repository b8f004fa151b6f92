"""`convatt score GOLD SYSTEM`: tagged CoNLL-U scored as the CoNLL 2018 shared task scored it.

Where the two files tokenise the text alike, the UPOS score is plain accuracy. Where they do
not (a system that tokenised raw text itself), words are aligned as the shared task's
evaluation script (conll18_ud_eval.py) aligns them: both files must spell the same text once
whitespace is removed; every word gets the character span of its token in that text (the
words of a multiword token share the token's span); words with the same span are aligned,
and inside a stretch covered by multiword tokens words are aligned by the longest common
subsequence of their lower-cased forms. UPOS precision is the share of system words aligned
to a gold word with the same tag, recall the share of gold words, F1 their harmonic mean.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass

from convatt.data._io import existing_file
from convatt.data.untagged import TAG_FIELD, _groups, _read_block, iter_lines
from convatt.errors import ConvattError


@dataclass(frozen=True)
class Word:
    form: str
    tag: str
    start: int  # character span of the word's token in the whitespace-free text
    end: int
    multiword: bool  # part of a multiword token (then the span is the whole token's)


@dataclass(frozen=True)
class Document:
    """What scoring needs of a CoNLL-U file."""

    text: str  # the FORMs of all tokens, whitespace removed, concatenated
    words: list[Word]
    tokens: list[tuple[int, int]]  # spans of the tokens (a multiword token is one)
    sentences: list[tuple[int, int]]


@dataclass(frozen=True)
class Score:
    gold: int
    system: int
    correct: int
    aligned: int | None = None

    @property
    def precision(self) -> float:
        return self.correct / self.system if self.system else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.gold if self.gold else 0.0

    @property
    def f1(self) -> float:
        return 2 * self.correct / (self.gold + self.system) if self.gold + self.system else 0.0

    @property
    def aligned_accuracy(self) -> float | None:
        return None if self.aligned is None else self.correct / self.aligned if self.aligned else 0.0


@dataclass(frozen=True)
class ScoreReport:
    tokens: Score
    sentences: Score
    words: Score
    tags: Score  # `column`'s tag (UPOS by default) on aligned words
    column: str

    @property
    def same_tokenisation(self) -> bool:
        """Whether every word is aligned: then the tag score is plain accuracy."""
        return self.words.correct == self.words.gold == self.words.system

    def lines(self) -> list[str]:
        name = self.column.upper()
        rows = [("Tokens", self.tokens), ("Sentences", self.sentences), ("Words", self.words), (name, self.tags)]
        out = [f"{'Metric':<10} {'Precision':>9} {'Recall':>9} {'F1':>9} {'AligndAcc':>9}"]
        for label, s in rows:
            acc = "" if s.aligned is None else f"{100 * s.aligned_accuracy:9.2f}"
            out.append(f"{label:<10} {100 * s.precision:9.2f} {100 * s.recall:9.2f} {100 * s.f1:9.2f} {acc:>9}")
        if self.same_tokenisation:
            out.append(f"same tokenisation: {name} accuracy {100 * self.tags.recall:.2f}% of {self.words.gold:,} words")
        else:
            out.append(f"tokenisations differ: {name} F1 {100 * self.tags.f1:.2f} (CoNLL 2018 alignment)")
        return out


def read_document(path: str | os.PathLike, column: str = "upos") -> Document:
    """A CoNLL-U file, checked as `convatt tag` checks its input, as spans of its words and tokens."""
    name, field = os.fspath(existing_file(path)), TAG_FIELD[column]
    pieces: list[str] = []
    words: list[Word] = []
    tokens: list[tuple[int, int]] = []
    sentences: list[tuple[int, int]] = []
    at = 0
    for first, lines in _groups(iter_lines(path)):
        block = _read_block(lines, first, name)
        if not block.forms:
            continue
        begin, multiword_last, multiword_span = at, 0, (0, 0)
        for line in (line for line in lines if not line.startswith("#")):
            fields = line.split("\t")
            word_id, chars = fields[0], _without_spaces(fields[1])
            if "." in word_id:  # an empty node is no word of the text
                continue
            if "-" not in word_id and int(word_id) <= multiword_last:
                words.append(Word(fields[1], fields[field], *multiword_span, multiword=True))
                continue
            span = (at, at + len(chars))
            pieces.append(chars)
            tokens.append(span)
            at = span[1]
            if "-" in word_id:
                multiword_last, multiword_span = int(word_id.split("-")[1]), span
            else:
                words.append(Word(fields[1], fields[field], *span, multiword=False))
        sentences.append((begin, at))
    return Document("".join(pieces), words, tokens, sentences)


def _without_spaces(form: str) -> str:
    """FORM without its space characters (Unicode category Zs), as the shared task compared texts."""
    return "".join(c for c in form if unicodedata.category(c) != "Zs")


def span_score(gold: list[tuple[int, int]], system: list[tuple[int, int]]) -> Score:
    return Score(len(gold), len(system), len(set(gold) & set(system)))


def _beyond(words: list[Word], i: int, end: int) -> bool:
    """Whether words[i] lies past a multiword stretch ending at character `end`."""
    if i >= len(words):
        return True
    return words[i].start >= end if words[i].multiword else words[i].end > end


def _extend(word: Word, end: int) -> int:
    return max(end, word.end) if word.multiword else end


def multiword_stretch(gold: list[Word], system: list[Word], gi: int, si: int) -> tuple[int, int, int, int]:
    """(gold start, system start, gold end, system end) indices of the shortest stretch of words
    that covers the multiword token at gold[gi] or system[si] and every token overlapping it."""
    if gold[gi].multiword:
        end = gold[gi].end
        si += not system[si].multiword and system[si].start < gold[gi].start
    else:
        end = system[si].end
        gi += not gold[gi].multiword and gold[gi].start < system[si].start
    gs, ss = gi, si
    while not _beyond(gold, gi, end) or not _beyond(system, si, end):
        if gi < len(gold) and (si >= len(system) or gold[gi].start <= system[si].start):
            end, gi = _extend(gold[gi], end), gi + 1
        else:
            end, si = _extend(system[si], end), si + 1
    return gs, ss, gi, si


def align_by_forms(gold: list[Word], system: list[Word]) -> list[tuple[Word, Word]]:
    """The pairs of a longest common subsequence of the lower-cased forms (first match kept)."""
    g_forms, s_forms = [w.form.lower() for w in gold], [w.form.lower() for w in system]
    n, m = len(gold), len(system)
    longest = [[0] * (m + 1) for _ in range(n + 1)]  # of gold[g:] and system[s:]
    for g in reversed(range(n)):
        for s in reversed(range(m)):
            same = longest[g + 1][s + 1] + 1 if g_forms[g] == s_forms[s] else 0
            longest[g][s] = max(same, longest[g + 1][s], longest[g][s + 1])
    pairs, g, s = [], 0, 0
    while g < n and s < m:
        if g_forms[g] == s_forms[s]:
            pairs.append((gold[g], system[s]))
            g, s = g + 1, s + 1
        elif longest[g][s] == longest[g + 1][s]:
            g += 1
        else:
            s += 1
    return pairs


def align_words(gold: list[Word], system: list[Word]) -> list[tuple[Word, Word]]:
    """Gold and system words aligned: on equal spans, and by form inside multiword stretches."""
    pairs, gi, si = [], 0, 0
    while gi < len(gold) and si < len(system):
        if gold[gi].multiword or system[si].multiword:
            gs, ss, gi, si = multiword_stretch(gold, system, gi, si)
            pairs += align_by_forms(gold[gs:gi], system[ss:si])
        elif (gold[gi].start, gold[gi].end) == (system[si].start, system[si].end):
            pairs.append((gold[gi], system[si]))
            gi, si = gi + 1, si + 1
        elif gold[gi].start <= system[si].start:
            gi += 1
        else:
            si += 1
    return pairs


def check_same_text(gold: Document, system: Document, gold_name: str, system_name: str) -> None:
    if gold.text == system.text:
        return
    i = next(
        (i for i, (a, b) in enumerate(zip(gold.text, system.text)) if a != b), min(map(len, (gold.text, system.text)))
    )
    raise ConvattError(
        f"the system file spells another text than the gold file {gold_name} (whitespace removed, they differ "
        f"at character {i:,}: gold {gold.text[i : i + 20]!r}, system {system.text[i : i + 20]!r})",
        system_name,
    )


def score_documents(gold: Document, system: Document, column: str = "upos") -> ScoreReport:
    pairs = align_words(gold.words, system.words)
    n_gold, n_system = len(gold.words), len(system.words)
    return ScoreReport(
        tokens=span_score(gold.tokens, system.tokens),
        sentences=span_score(gold.sentences, system.sentences),
        words=Score(n_gold, n_system, len(pairs)),
        tags=Score(n_gold, n_system, sum(g.tag == s.tag for g, s in pairs), aligned=len(pairs)),
        column=column,
    )


def score_files(gold: str | os.PathLike, system: str | os.PathLike, column: str = "upos") -> ScoreReport:
    """`system` (CoNLL-U, any tokenisation of the same text) scored against `gold`."""
    gold_doc, system_doc = read_document(gold, column), read_document(system, column)
    check_same_text(gold_doc, system_doc, os.fspath(gold), os.fspath(system))
    return score_documents(gold_doc, system_doc, column)


def raw_text(path: str | os.PathLike) -> str:
    """The running text of a CoNLL-U file, as a tokeniser would get it: each sentence's `# text`
    (else its tokens, a space after those without SpaceAfter=No), sentences joined by a space,
    a line per document (`# newdoc`) and a blank line at each `# newpar`."""
    out: list[str] = []
    for _first, lines in _groups(iter_lines(path)):
        comments = [line for line in lines if line.startswith("#")]
        if any(c.startswith(("# newdoc", "# newpar")) for c in comments) and out:
            out.append("\n\n" if any(c.startswith("# newpar") for c in comments) else "\n")
        text = next((c.split("=", 1)[1].strip() for c in comments if c.startswith("# text =")), None)
        if text is None:
            text = _joined_tokens([line.split("\t") for line in lines if not line.startswith("#")])
        if text:
            out.append(text if not out or out[-1].endswith("\n") else " " + text)
    return "".join(out) + "\n"


def _joined_tokens(rows: list[list[str]]) -> str:
    text, skip_to = "", 0
    for fields in rows:
        if "." in fields[0] or ("-" not in fields[0] and int(fields[0]) <= skip_to):
            continue
        if "-" in fields[0]:
            skip_to = int(fields[0].split("-")[1])
        text += fields[1] + ("" if "SpaceAfter=No" in fields[-1] else " ")
    return text.strip()
