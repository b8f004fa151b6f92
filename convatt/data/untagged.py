"""Text to tag: CoNLL-U (the FORM column is read) or plain text (a sentence per line).

Both become `Block`s of CoNLL-U lines, so the tagger writes one format: a block is
a sentence (comments, word lines, multiword-token and empty-node lines) whose
word lines get their tag column filled; every other line and column is written
back byte for byte. CoNLL-U is checked line by line and parsed with `conllu`
(as `convatt.data.ud` does), so that every error names its file and line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import conllu
from conllu.parser import DEFAULT_FIELDS

from convatt.data._io import decode_text, read_text
from convatt.data.ud import _CONLLU_ERRORS, _WORD_ID, N_FIELDS, _blocks, _failing_line, check_fields, is_next_word
from convatt.errors import ConvattError

FORMATS = ("conllu", "text")
TAG_FIELD = {"upos": 3, "xpos": 4}  # 0-based column of each tag in a word line
STDIN = "<stdin>"


@dataclass(frozen=True)
class Block:
    """One sentence (or a comment-only block) as CoNLL-U lines.

    lines: the block's lines as read (or, for plain text, as made).
    word_lines: the index in `lines` of each word line, in order.
    forms: the FORM of each word line.
    first_line: the input line the block starts on.
    """

    lines: list[str]
    word_lines: list[int]
    forms: list[str]
    first_line: int

    def tagged(self, tags: list[str], column: str) -> list[str]:
        """The block's lines with `tags` in `column` ("upos" or "xpos") of its word lines."""
        if len(tags) != len(self.word_lines):
            raise ValueError(f"{len(tags)} tags for {len(self.word_lines)} words")
        lines = list(self.lines)
        for index, tag in zip(self.word_lines, tags):
            fields = lines[index].split("\t")
            fields[TAG_FIELD[column]] = tag
            lines[index] = "\t".join(fields)
        return lines


def read_untagged(source: str | os.PathLike | None, fmt: str, stdin_bytes: bytes | None = None) -> list[Block]:
    """Blocks of a file (`source`) or of standard input (`source` None: `stdin_bytes`)."""
    if fmt not in FORMATS:
        raise ConvattError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    name = STDIN if source is None else os.fspath(source)
    text = decode_text(stdin_bytes or b"", STDIN) if source is None else read_text(source)
    blocks = parse_conllu(text, name) if fmt == "conllu" else parse_text(text, name)
    if not any(b.forms for b in blocks):
        raise ConvattError(f"no sentences to tag (expected {fmt}{'' if fmt == 'text' else ' sentences'})", name, 1)
    return blocks


def parse_text(text: str, name: str) -> list[Block]:
    """One sentence per non-blank line, tokens split on whitespace, as CoNLL-U blocks."""
    blocks = []
    for number, line in enumerate(text.split("\n"), start=1):
        forms = line.split()
        if not forms:
            continue
        fields = line.split("\t")
        if len(fields) == N_FIELDS and _WORD_ID.fullmatch(fields[0]):
            raise ConvattError(
                "this line looks like CoNLL-U (10 tab-separated fields): use --format conllu", name, number
            )
        header = [f"# sent_id = {len(blocks) + 1}", f"# text = {' '.join(forms)}"]
        words = [f"{i}\t{form}" + "\t_" * (N_FIELDS - 2) for i, form in enumerate(forms, start=1)]
        blocks.append(Block(header + words, list(range(2, 2 + len(words))), forms, number))
    return blocks


def parse_conllu(text: str, name: str) -> list[Block]:
    """The blank-line-separated blocks of CoNLL-U text, checked and parsed with `conllu`."""
    return [_read_block(lines, first, name) for first, lines in _blocks(text, name)]


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
