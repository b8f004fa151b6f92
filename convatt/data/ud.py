"""Universal Dependencies reader: CoNLL-U (`.conllu` or `.conllu.gz`) -> (FORM, UPOS) sentences.

The file is checked line by line first (10 tab-separated fields, a valid ID,
consecutive word IDs, FORM and UPOS present) so that every error names its line;
each sentence is then parsed with `conllu`, whose exceptions are reported with
the sentence's lines too. Multiword-token lines (ID "3-4") and empty nodes
(ID "3.1") are skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import conllu
from conllu.exceptions import ParseException
from conllu.parser import DEFAULT_FIELDS

from convatt.data._io import existing_dir, read_text
from convatt.data.corpus import Corpus, Sentence
from convatt.errors import ConvattError

SPLITS = ("train", "dev", "test")
N_FIELDS = len(DEFAULT_FIELDS)  # 10: ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC
_WORD_ID = re.compile(r"[1-9][0-9]*")
_OTHER_ID = re.compile(r"[1-9][0-9]*-[1-9][0-9]*|[0-9]+\.[1-9][0-9]*")
FIELD_NAMES = ("ID", "FORM", "LEMMA", "UPOS", "XPOS", "FEATS", "HEAD", "DEPREL", "DEPS", "MISC")
_CONLLU_ERRORS = (ParseException, ValueError, IndexError, KeyError, TypeError)


def read_conllu(path: str | os.PathLike) -> list[Sentence]:
    """Read a CoNLL-U file as sentences of (FORM, UPOS), one per sentence block."""
    text = read_text(path)
    if not text.strip():
        raise ConvattError("empty file: expected CoNLL-U sentences", path, 1)
    sentences: list[Sentence] = []
    for first_line, lines in _blocks(text, path):
        sentence = _read_block(lines, first_line, path)
        if sentence is not None:
            sentences.append(sentence)
    if not sentences:
        raise ConvattError("no sentences: the file holds only comment lines", path, 1)
    if all(form == "_" for s in sentences for form, _ in s):
        raise ConvattError(
            "every FORM is '_': this treebank is distributed without its words "
            "(restore them first, as its README explains)",
            path,
            1,
        )
    return sentences


def _blocks(text: str, path) -> Iterator[tuple[int, list[str]]]:
    """Yield (line number of the first line, lines) for each blank-line-separated block.

    A line of only spaces or tabs ends a block only where an empty line would do no harm
    (before an empty line or the end); between two lines it is an error, not a silent
    split of a sentence in two."""
    block: list[str] = []
    start = 0
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if line.strip():
            if not block:
                start = number
            block.append(line)
            continue
        if line and number < len(lines) and lines[number].strip():
            raise ConvattError(
                f"a line of only whitespace ({line!r}): CoNLL-U separates sentences by empty lines "
                "and a word line has 10 tab-separated fields",
                path,
                number,
            )
        if block:
            yield start, block
            block = []
    if block:
        yield start, block


def check_fields(fields: list[str], path, number: int) -> None:
    """Two consecutive spaces in a field: CoNLL-U parsers (conllu among them) split fields there."""
    for name, field in zip(FIELD_NAMES, fields):
        if "  " in field:
            raise ConvattError(
                f"{name} {field!r} holds two consecutive spaces, which CoNLL-U readers take for a field "
                "separator: write one space (or none)",
                path,
                number,
            )


def is_next_word(word_id: str, n_words: int, path, number: int) -> bool:
    """Whether ID `word_id` is the sentence's next word (`n_words` + 1); False for a multiword
    token ("3-4") or an empty node ("3.1"); an error naming the line for any other ID."""
    if _OTHER_ID.fullmatch(word_id):
        return False
    if not _WORD_ID.fullmatch(word_id):
        raise ConvattError(
            f"ID {word_id!r} is not a positive integer, a range like '3-4' or a decimal like '3.1'", path, number
        )
    if int(word_id) != n_words + 1:
        raise ConvattError(f"word IDs must count 1, 2, 3, ...: expected {n_words + 1}, found {word_id}", path, number)
    return True


def _check_line(line: str, number: int, n_words: int, path) -> tuple[str, str] | None:
    """(FORM, UPOS) of a word line, None for a multiword token or empty node; else an error."""
    fields = line.split("\t")
    if len(fields) != N_FIELDS:
        if len(fields) == 1 and " " in line.strip():
            found = "no tab: the fields seem separated by spaces, not tabs"
        else:
            found = f"found {len(fields)}"
        raise ConvattError(
            f"expected {N_FIELDS} tab-separated fields (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC), {found}",
            path,
            number,
        )
    check_fields(fields, path, number)
    word_id, form, upos = fields[0], fields[1], fields[3]
    if not is_next_word(word_id, n_words, path, number):
        return None
    if not form:
        raise ConvattError("empty FORM (field 2)", path, number)
    if upos in ("", "_"):
        raise ConvattError(f"missing UPOS (field 4) for {form!r}", path, number)
    return form, upos


def _read_block(lines: list[str], first_line: int, path) -> Sentence | None:
    """Check one sentence block, parse it with conllu; None for a comment-only block."""
    numbers: list[int] = []  # line number of each word
    words: Sentence = []
    token_lines = [(n, s) for n, s in enumerate(lines, first_line) if not s.startswith("#")]
    if not token_lines:
        return None
    for number, line in token_lines:
        word = _check_line(line, number, len(words), path)
        if word is not None:
            numbers.append(number)
            words.append(word)
    if not words:
        raise ConvattError("sentence without word lines (only multiword tokens or empty nodes)", path, first_line)
    try:
        parsed = conllu.parse("\n".join(lines), fields=DEFAULT_FIELDS)
        got = [(t["form"], t["upos"]) for s in parsed for t in s if isinstance(t["id"], int)]
    except _CONLLU_ERRORS as e:
        number = _failing_line(lines, first_line)
        raise ConvattError(f"malformed CoNLL-U line (conllu: {e})", path, number) from e
    if got != words:  # conllu also splits on two spaces, and obeys '# global.columns'
        i = next((i for i, (a, b) in enumerate(zip(got, words)) if a != b), len(got) - 1)
        raise ConvattError(
            f"conllu reads FORM/UPOS {got[i] if got else None!r}, the tab-separated fields say "
            f"{words[min(i, len(words) - 1)]!r} (two consecutive spaces in a field, or a "
            "'# global.columns' comment?)",
            path,
            numbers[min(i, len(numbers) - 1)],
        )
    return words


def _failing_line(lines: list[str], first_line: int) -> int:
    """The first line of a block that conllu cannot parse on its own (else the block's first)."""
    for number, line in enumerate(lines, start=first_line):
        if not line.startswith("#"):
            try:
                conllu.parse(line, fields=DEFAULT_FIELDS)
            except _CONLLU_ERRORS:
                return number
    return first_line


def find_split_file(treebank_dir: str | os.PathLike, split: str) -> Path:
    """The `*-ud-{split}.conllu` (or `.conllu.gz`) file of a treebank directory."""
    directory = existing_dir(treebank_dir, "treebank directory")
    matches = sorted(directory.glob(f"*-ud-{split}.conllu")) + sorted(directory.glob(f"*-ud-{split}.conllu.gz"))
    if len(matches) == 1:
        return matches[0]
    if matches:
        names = ", ".join(p.name for p in matches)
        raise ConvattError(f"several {split} files ({names}): expected one", directory)
    found = sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir())
    hint = ""
    if any(name.startswith("UD_") for name in found):
        hint = " (this looks like a folder of treebanks: give one UD_* directory)"
    raise ConvattError(
        f"no *-ud-{split}.conllu[.gz] file{hint}; found: {', '.join(found) or 'nothing'}",
        directory,
    )


def read_ud(treebank_dir: str | os.PathLike) -> Corpus:
    """Read a UD treebank directory (train, dev and test files) as a Corpus."""
    files = {split: find_split_file(treebank_dir, split) for split in SPLITS}
    return Corpus(treebank_name(treebank_dir), **{s: read_conllu(p) for s, p in files.items()})


def treebank_key(name: str) -> str:
    """A UD treebank's name as Table 2d spells it: "UD_Old French-SRCMF" -> "Old_French-SRCMF"."""
    name = name.strip()
    if name.startswith("UD_"):
        name = name[3:]
    return name.replace(" ", "_")


def treebank_name(treebank_dir: str | os.PathLike) -> str:
    """The paper's name of a treebank directory: ".../UD_English-LinES" -> "English-LinES"."""
    return treebank_key(Path(treebank_dir).resolve().name)
