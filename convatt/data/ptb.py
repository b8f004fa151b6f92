"""Penn Treebank reader: bracketed `.mrg` trees -> (word, tag) sentences.

Split rules (see `read_ptb`):
- LDC release (`.../wsj/SS/wsj_SSNN.mrg`): by section, train 00-18, dev 19-21,
  test 22-24, as in the paper.
- NLTK sample (wsj_0001 .. wsj_0199, sections 00-01 only): by file number,
  train wsj_0001-0139, dev wsj_0140-0169, test wsj_0170-0199 (3,068 / 433 / 413
  sentences: 78 / 11 / 11 %, the proportions of the paper's full-PTB split).
"""

from __future__ import annotations

import gzip
import os
import re
import tarfile
import zlib
from collections.abc import Callable
from pathlib import Path

from convatt.data._io import decode_text, existing_dir, line_of, read_text
from convatt.data.corpus import Corpus, Sentence
from convatt.errors import ConvattError

TRACE_TAG = "-NONE-"
SECTION_SPLIT = {"train": range(0, 19), "dev": range(19, 22), "test": range(22, 25)}
SAMPLE_SPLIT = {"train": range(1, 140), "dev": range(140, 170), "test": range(170, 200)}
SAMPLE_NOTE = (
    "PTB sample (sections 00-01) with a fixed split by file number "
    "(train wsj_0001-0139, dev wsj_0140-0169, test wsj_0170-0199): "
    "results are not comparable to the paper's full-PTB numbers"
)

# A whole leaf "(TAG word)", or one of "(", ")", or a bare atom.
_TOKEN = re.compile(r"\(\s*([^\s()]+)\s+([^\s()]+)\s*\)|(\()|(\))|([^\s()]+)")
_WSJ_FILE = re.compile(r"wsj_(\d\d)(\d\d)\.mrg(?:\.gz)?")


def read_mrg(path: str | os.PathLike) -> list[Sentence]:
    """Read every tree of a `.mrg` file (plain or `.gz`) as a sentence of (word, tag).

    Leaves are `(TAG word)`; leaves tagged -NONE- (traces) are dropped, and a tree
    left without words is skipped. Malformed brackets raise ConvattError with
    file and line.
    """
    return parse_mrg(read_text(path), Path(path))


def parse_mrg(text: str, path: Path) -> list[Sentence]:
    """The sentences of `.mrg` text read from `path` (named in errors)."""
    if not text.strip():
        raise ConvattError("empty file: expected bracketed trees like ( (S (NN word) ) )", path, 1)
    return _parse_trees(text, path)


def _parse_trees(text: str, path: Path) -> list[Sentence]:
    scanner = _TreeScanner(text, path)
    for m in _TOKEN.finditer(text):
        tag, word, opening, closing, atom = m.groups()
        if tag is not None:
            scanner.leaf(word, tag)
        elif opening:
            scanner.open_bracket(m.start())
        elif closing:
            scanner.close_bracket(m.start())
        else:
            scanner.label(atom, m.start())
    return scanner.sentences()


class _TreeScanner:
    """The sentences of bracketed trees, read token by token; every error names its line."""

    def __init__(self, text: str, path: Path):
        self.text, self.path = text, path
        self.done: list[Sentence] = []
        self.current: Sentence = []
        self.stack: list[list] = []  # open brackets: [label or None, number of children, offset]
        self.new_tree_inside: int | None = None  # a "(" at a line start while a tree is still open

    def fail(self, message: str, offset: int) -> ConvattError:
        return ConvattError(message, self.path, line_of(self.text, offset))

    def leaf(self, word: str, tag: str) -> None:
        if self.stack:
            self.stack[-1][1] += 1
            if tag != TRACE_TAG:
                self.current.append((word, tag))
        elif tag != TRACE_TAG:  # a tree that is a single leaf
            self.done.append([(word, tag)])

    def open_bracket(self, start: int) -> None:
        at_line_start = start == 0 or self.text[start - 1] == "\n"
        if self.stack and self.new_tree_inside is None and at_line_start:
            self.new_tree_inside = start
        self.stack.append([None, 0, start])

    def close_bracket(self, offset: int) -> None:
        if not self.stack:
            raise self.fail(
                "unbalanced brackets: ')' without a matching '(' (one ')' too many here or earlier)", offset
            )
        label, n_children, start = self.stack.pop()
        if n_children == 0:
            if label is None:
                raise self.fail("empty brackets '()': expected a label and a word or subtrees", start)
            raise self.fail(f"leaf ({label}) has no word: expected (TAG word)", start)
        if self.stack:
            self.stack[-1][1] += 1
            return
        if self.current:
            self.done.append(self.current)
        self.current, self.new_tree_inside = [], None

    def label(self, atom: str, offset: int) -> None:
        if not self.stack:
            raise self.fail(f"text {atom!r} outside any tree: expected '('", offset)
        top = self.stack[-1]
        if top[0] is not None or top[1] != 0:
            raise self.fail(
                f"word {atom!r} in '({top[0] or ''} ...' is not a (TAG word) leaf: a leaf "
                "holds exactly one word, other brackets only subtrees",
                offset,
            )
        top[0] = atom

    def sentences(self) -> list[Sentence]:
        """The sentences read; an error if a tree is still open or no word was read."""
        if self.stack:
            hint = ""
            if self.new_tree_inside is not None:
                hint = f"; a new tree starts at line {line_of(self.text, self.new_tree_inside)} while it is open"
            raise self.fail(
                f"unbalanced brackets: the tree opened here is never closed "
                f"({len(self.stack)} ')' missing at the end of the file{hint})",
                self.stack[0][2],
            )
        if not self.done:
            raise ConvattError("no words: every tree holds only -NONE- leaves", self.path, 1)
        return self.done


ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz")
WsjFiles = dict[int, tuple[Path, Callable[[], list[Sentence]]]]
"""File number SSNN (e.g. 1901) -> (where it is, for messages; how to read its sentences)."""


def _add_wsj_file(files: WsjFiles, name: str, where: Path, read, root: Path) -> None:
    m = _WSJ_FILE.fullmatch(name)
    if not m:
        return
    number = int(m.group(1) + m.group(2))
    if number in files:
        raise ConvattError(f"wsj_{number:04d} found twice: {files[number][0]} and {where}", root)
    files[number] = (where, read)


def _directory_files(directory: Path) -> WsjFiles:
    files: WsjFiles = {}
    for p in sorted(directory.rglob("wsj_*")):
        if p.is_file():
            _add_wsj_file(files, p.name, p, lambda p=p: read_mrg(p), directory)
        elif _WSJ_FILE.fullmatch(p.name):  # skipping it would silently lose its sentences
            _not_a_file(p, "a directory" if p.is_dir() else "not a regular file (a broken link?)")
    return files


def _not_a_file(where: Path, found: str) -> None:
    raise ConvattError(f"named like a PTB file (wsj_SSNN.mrg) but {found}: expected the file of its trees", where)


def _archive_files(archive: Path) -> WsjFiles:
    """The wsj_*.mrg members of a tar archive (plain or gzipped), read into memory."""
    files: WsjFiles = {}
    try:
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                name = Path(member.name).name
                if _WSJ_FILE.fullmatch(name) and not member.isfile():
                    _not_a_file(archive / member.name, "a directory" if member.isdir() else "not a regular file")
                if member.isfile() and _WSJ_FILE.fullmatch(name):
                    raw = tar.extractfile(member).read()
                    raw = gzip.decompress(raw) if name.endswith(".gz") else raw  # as read_mrg reads it
                    text = decode_text(raw, archive / member.name)
                    where = archive / member.name
                    _add_wsj_file(files, name, where, lambda t=text, w=where: parse_mrg(t, w), archive)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as e:
        raise ConvattError(f"not a readable tar archive: {e}", archive) from e
    return files


def read_ptb(directory: str | os.PathLike) -> Corpus:
    """Read WSJ `.mrg` files found recursively under `directory` (or in a tar archive,
    `.tar`, `.tar.gz` or `.tgz`, such as the embedded sample) and split them.

    Files are recognised by name, `wsj_SSNN.mrg` (or `.mrg.gz`), section SS:
    - if every file is in sections 00-01, this is the NLTK sample (wsj_0001 ..
      wsj_0199): fixed split by file number, train 0001-0139, dev 0140-0169,
      test 0170-0199 (3,068 / 433 / 413 sentences, the paper's 78/11/11 %);
      `Corpus.note` warns that results are not comparable to the paper's;
    - otherwise the paper's split by section: train 00-18, dev 19-21, test 22-24.
    A split without files is a ConvattError listing the sections found.
    """
    directory = Path(directory)
    if directory.name.endswith(ARCHIVE_SUFFIXES) and directory.is_file():
        files = _archive_files(directory)
    else:
        files = _directory_files(existing_dir(directory, "PTB directory"))
    if not files:
        raise ConvattError("no wsj_SSNN.mrg files found (searched recursively)", directory)
    sections = sorted({n // 100 for n in files})
    sample = sections[-1] <= 1
    rule = SAMPLE_SPLIT if sample else SECTION_SPLIT
    key = (lambda n: n) if sample else (lambda n: n // 100)
    splits: dict[str, list[Sentence]] = {}
    for split, allowed in rule.items():
        chosen = [read for n, (_, read) in sorted(files.items()) if key(n) in allowed]
        if not chosen:
            found = ", ".join(f"{s:02d}" for s in sections)
            what = (
                f"files wsj_{allowed[0]:04d}-{allowed[-1]:04d} (NLTK sample split)"
                if sample
                else f"sections {allowed[0]:02d}-{allowed[-1]:02d}"
            )
            raise ConvattError(
                f"no {split} data: expected {what}; found {len(files)} files in sections {found}",
                directory,
            )
        splits[split] = [s for read in chosen for s in read()]
    note = SAMPLE_NOTE if sample else _missing_sections_note(sections)
    return Corpus("PTB-sample" if sample else "PTB", note=note, **splits)


def _missing_sections_note(sections: list[int]) -> str:
    missing = sorted(set(range(25)) - set(sections))
    if not missing:
        return ""
    listed = ", ".join(f"{s:02d}" for s in missing)
    return f"sections {listed} are missing: the paper uses all of sections 00-24"
