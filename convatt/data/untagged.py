"""Text to tag: CoNLL-U (the FORM column is read), raw text, or vertical text (a token per line).

All become `Block`s of CoNLL-U lines, so the tagger writes one format: a block is a
sentence (comments, word lines, multiword-token and empty-node lines) whose word lines
get their tag column filled. On CoNLL-U input the columns the model does not predict
(LEMMA, the other tag, FEATS, HEAD, DEPREL, DEPS) are emptied unless kept on request;
IDs, FORM, MISC and comment lines are written back byte for byte. CoNLL-U is checked
line by line and parsed with `conllu` (as `convatt.data.ud` does), so that every error
names its file and line.

Input is read lazily, a line at a time, and blocks are yielded as they are complete: the
memory a tagging run needs does not grow with the size of its input.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import conllu
from conllu.parser import DEFAULT_FIELDS

from convatt.data._io import existing_file
from convatt.data.tokenize import TOKENIZERS, TokenizedSentence, sentences_of
from convatt.data.ud import _CONLLU_ERRORS, _WORD_ID, N_FIELDS, _failing_line, check_fields, is_next_word
from convatt.errors import ConvattError

FORMATS = ("conllu", "text", "vertical")
TAG_FIELD = {"upos": 3, "xpos": 4}  # 0-based column of each tag in a word line
ANALYSIS_FIELDS = range(2, 9)  # LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS: emptied unless kept
STDIN = "<stdin>"
MAX_PARAGRAPH = 1 << 16  # characters of raw text tokenised at once (a paragraph without blank lines is cut)


@dataclass(frozen=True)
class Block:
    """One sentence (or a comment-only block) as CoNLL-U lines.

    lines: the block's lines as read (or, for text, as made).
    word_lines: the index in `lines` of each word line, in order.
    forms: the FORM of each word line.
    first_line: the input line the block starts on.
    """

    lines: list[str]
    word_lines: list[int]
    forms: list[str]
    first_line: int

    def tagged(self, tags: list[str], column: str, keep_columns: bool = True) -> list[str]:
        """The block's lines with `tags` in `column` ("upos" or "xpos") of its word lines;
        with `keep_columns` False the other analysis columns of every token line are `_`."""
        if len(tags) != len(self.word_lines):
            raise ValueError(f"{len(tags)} tags for {len(self.word_lines)} words")
        lines = list(self.lines) if keep_columns else [_emptied(line) for line in self.lines]
        for index, tag in zip(self.word_lines, tags):
            fields = lines[index].split("\t")
            fields[TAG_FIELD[column]] = tag
            lines[index] = "\t".join(fields)
        return lines


def _emptied(line: str) -> str:
    if line.startswith("#"):
        return line
    fields = line.split("\t")
    return "\t".join("_" if i in ANALYSIS_FIELDS else f for i, f in enumerate(fields))


def read_untagged(
    source: str | os.PathLike | None, fmt: str, stdin_bytes: bytes | None = None, tokenizer: str = "none"
) -> list[Block]:
    """All blocks of a file (`source`) or of standard input (`source` None: `stdin_bytes`)."""
    return list(iter_blocks(source, fmt, stdin_bytes, tokenizer))


def iter_blocks(
    source: str | os.PathLike | None,
    fmt: str,
    stdin: bytes | BinaryIO | None = None,
    tokenizer: str = "syntok",
) -> Iterator[Block]:
    """The blocks of a file (`source`) or of standard input (`source` None: `stdin`, bytes
    or a binary stream), read lazily; checked first, before a line is read."""
    if fmt not in FORMATS:
        raise ConvattError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if tokenizer not in TOKENIZERS:
        raise ConvattError(f"unknown tokenizer {tokenizer!r}: expected one of {', '.join(TOKENIZERS)}")
    name = STDIN if source is None else os.fspath(source)
    if source is not None:
        existing_file(source)
    return _nonempty(_parse(fmt, iter_lines(source, stdin), name, tokenizer), fmt, name)


def _parse(fmt: str, lines: Iterator[str], name: str, tokenizer: str) -> Iterator[Block]:
    if fmt == "conllu":
        return (_read_block(block, first, name) for first, block in _groups(lines, name))
    if fmt == "vertical":
        return (_vertical_block(b, first, name, n) for n, (first, b) in enumerate(_groups(lines, name), start=1))
    return parse_text_lines(lines, name, tokenizer)


def _nonempty(blocks: Iterator[Block], fmt: str, name: str) -> Iterator[Block]:
    seen = False
    for block in blocks:
        seen = seen or bool(block.forms)
        yield block
    if not seen:
        raise ConvattError(f"no sentences to tag (expected {fmt}{'' if fmt == 'text' else ' sentences'})", name, 1)


def iter_lines(source: str | os.PathLike | None, stdin: bytes | BinaryIO | None = None) -> Iterator[str]:
    """The lines of a UTF-8 file (gzip-compressed if named .gz) or of `stdin`, one at a time,
    without their newline; a leading byte-order mark dropped, "\\r\\n" and "\\r" read as "\\n"."""
    name = STDIN if source is None else os.fspath(source)
    try:
        if source is None:
            raw_lines = iter(stdin.splitlines(keepends=True)) if isinstance(stdin, bytes) else (stdin or iter(()))
            yield from _decoded(raw_lines, name)
        else:
            opener = gzip.open if name.endswith(".gz") else open
            with opener(source, "rb") as f:
                yield from _decoded(f, name)
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError
        raise ConvattError(f"cannot read file: {e}", name) from e


def _decoded(raw_lines: Iterable[bytes], name: str) -> Iterator[str]:
    number = 0
    for raw in raw_lines:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConvattError(
                f"not valid UTF-8 (byte 0x{raw[e.start]:02x}); expected a UTF-8 text file", name, number + 1
            ) from e
        if number == 0 and line.startswith("\ufeff"):
            line = line[1:]
        for piece in line.rstrip("\n").removesuffix("\r").split("\r"):
            number += 1
            yield piece


def _groups(lines: Iterable[str], name: str = STDIN) -> Iterator[tuple[int, list[str]]]:
    """(line number of the first line, lines) for each blank-line-separated group of lines.

    A line of only spaces or tabs separates groups only where an empty line would do no
    harm (before an empty line or the end); followed by a word line it is an error, not a
    silent split of a sentence in two. Reads `lines` lazily, one line ahead at most."""
    group: list[str] = []
    start, whitespace_line = 0, None
    for number, line in enumerate(lines, start=1):
        if line.strip():
            if whitespace_line is not None:
                raise ConvattError(
                    f"a line of only whitespace ({whitespace_line[1]!r}): CoNLL-U separates sentences by empty "
                    "lines and a word line has 10 tab-separated fields",
                    name,
                    whitespace_line[0],
                )
            if not group:
                start = number
            group.append(line)
            continue
        whitespace_line = (number, line) if line else None
        if group:
            yield start, group
            group = []
    if group:
        yield start, group


def parse_text_lines(lines: Iterable[str], name: str, tokenizer: str) -> Iterator[Block]:
    """Raw text as CoNLL-U blocks. With a tokeniser, blank lines separate paragraphs and the
    tokeniser splits sentences; with tokenizer "none", a line is a sentence of whitespace tokens."""
    count = 0
    for first, paragraph in _paragraphs(lines, name, tokenizer):
        for i, sentence in enumerate(sentences_of(paragraph, tokenizer)):
            count += 1
            yield text_block(sentence, count, first, newpar=tokenizer != "none" and i == 0)


def _paragraphs(lines: Iterable[str], name: str, tokenizer: str) -> Iterator[tuple[int, str]]:
    group: list[str] = []
    size, start = 0, 1
    for number, line in enumerate(lines, start=1):
        _check_not_conllu(line, name, number)
        if line.strip():
            start = start if group else number
            group.append(line)
            size += len(line)
        if group and (not line.strip() or tokenizer == "none" or size > MAX_PARAGRAPH):
            yield start, "\n".join(group)
            group, size = [], 0
    if group:
        yield start, "\n".join(group)


def _check_not_conllu(line: str, name: str, number: int) -> None:
    fields = line.split("\t")
    if len(fields) == N_FIELDS and _WORD_ID.fullmatch(fields[0]):
        raise ConvattError("this line looks like CoNLL-U (10 tab-separated fields): use --format conllu", name, number)


def text_block(sentence: TokenizedSentence, sent_id: int, first_line: int, newpar: bool = False) -> Block:
    """A tokenised sentence as CoNLL-U lines, `SpaceAfter=No` where no space followed a token."""
    header = (["# newpar"] if newpar else []) + [f"# sent_id = {sent_id}", f"# text = {sentence.text}"]
    words = [
        f"{i}\t{form}" + "\t_" * (N_FIELDS - 3) + ("\t_" if space else "\tSpaceAfter=No")
        for i, (form, space) in enumerate(zip(sentence.forms, sentence.space_after), start=1)
    ]
    return Block(header + words, list(range(len(header), len(header) + len(words))), list(sentence.forms), first_line)


def _vertical_block(lines: list[str], first_line: int, name: str, sent_id: int) -> Block:
    """One token per line; a second column (e.g. a gold tag) is allowed and ignored."""
    forms = []
    for number, line in enumerate(lines, start=first_line):
        _check_not_conllu(line, name, number)
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) > 2:
            raise ConvattError(
                f"expected a token and at most one more column (vertical format), found {len(fields)} columns",
                name,
                number,
            )
        if not fields[0].strip():
            raise ConvattError("empty token (first column)", name, number)
        forms.append(fields[0].strip())
    sentence = TokenizedSentence(forms, [True] * len(forms), " ".join(forms))
    return text_block(sentence, sent_id, first_line)


def _word_form(line: str, number: int, n_words: int, name: str) -> str | None:
    """FORM of a word line, None for a multiword token or empty node; else an error."""
    fields = line.split("\t")
    if len(fields) != N_FIELDS:
        hint = " (plain text? use --format text)" if len(fields) == 1 else ""
        raise ConvattError(
            f"expected {N_FIELDS} tab-separated fields (ID FORM LEMMA UPOS XPOS FEATS HEAD "
            f"DEPREL DEPS MISC), found {len(fields)}{hint}",
            name,
            number,
        )
    check_fields(fields, name, number)
    word_id, form = fields[0], fields[1]
    if not is_next_word(word_id, n_words, name, number):
        return None
    if not form:
        raise ConvattError("empty FORM (field 2)", name, number)
    return form


def _read_block(lines: list[str], first_line: int, name: str) -> Block:
    word_lines, forms = [], []
    for index, line in enumerate(lines):
        if line.startswith("#"):
            continue
        form = _word_form(line, first_line + index, len(forms), name)
        if form is not None:
            word_lines.append(index)
            forms.append(form)
    if not forms and any(not line.startswith("#") for line in lines):
        raise ConvattError("sentence without word lines (only multiword tokens or empty nodes)", name, first_line)
    try:
        parsed = conllu.parse("\n".join(lines), fields=DEFAULT_FIELDS)
        got = [t["form"] for s in parsed for t in s if isinstance(t["id"], int)]
    except _CONLLU_ERRORS as e:
        raise ConvattError(f"malformed CoNLL-U line (conllu: {e})", name, _failing_line(lines, first_line)) from e
    if got != forms:  # conllu also splits on two spaces, and obeys '# global.columns'
        i = next((i for i, (a, b) in enumerate(zip(got, forms)) if a != b), min(len(got), len(forms) - 1))
        raise ConvattError(
            f"conllu reads FORM {got[i] if i < len(got) else None!r}, the tab-separated "
            f"fields say {forms[i]!r} (two consecutive spaces in a field, or a "
            "'# global.columns' comment?)",
            name,
            first_line + word_lines[i],
        )
    return Block(lines, word_lines, forms, first_line)
