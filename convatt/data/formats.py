"""The data formats (presets): one reader and one row of `FORMATS` each.

A preset names a corpus format and everything that follows from it: the reader
and the files it reads, the embedded corpus used when no `--data` is given, the
word vocabulary's rule and the tagger's word embedding (Table 1b), the CoNLL-U
column its tags belong in, and how the results name and group its runs.
`load_corpus`, `build_vocabularies`, `make_config`, `convatt tag` and the result
tables read these attributes; none of them compares a preset's name.

A new format: write its reader (`path -> Corpus`, a ConvattError naming the file
on bad input), then `register(DataFormat(...))` here (or in your own code, before
`load_corpus` is called).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from convatt.data.char_text import read_char_text
from convatt.data.corpus import EMBEDDED_DATA_DIR, Corpus
from convatt.data.find_block import read_find_block
from convatt.data.ptb import _directory_files, read_ptb
from convatt.data.ud import SPLITS, find_split_file, read_ud
from convatt.errors import check_known


@dataclass(frozen=True)
class DataFormat:
    """One corpus format and the preset named after it.

    Attributes:
        name: the preset's name (`--preset`, config.json's "preset").
        label: how tables and figures name its runs ("PTB").
        read: the reader: a path -> `Corpus`.
        files: the files `read` read from a path (for the data fingerprint).
        default_data: the embedded corpus `convatt train` reads without `--data`.
        tag_column: the CoNLL-U column its tags belong in ("xpos", "upos").
        word_dim, pretrained_words: the tagger's word embedding (Table 1b).
        vocab_size, vocab_fraction: the word vocabulary: the `vocab_size` most frequent
            forms, or the most frequent `vocab_fraction` of the distinct forms.
        treebanks: each corpus is one treebank of several, and results are averaged
            over treebanks (UD) rather than reported per corpus (PTB).
        paper_tables: the names of the paper's tables of its results (`convatt tables`).
        paper_sizes: the paper's vocabulary sizes (words, chars, labels), for `convatt params`.
        bench_sizes: the synthetic data of `convatt bench`: words, chars and labels (PAD and
            OOV included) and the number of distinct surface forms.
        task: "tagging" (the paper's tagger), or a causal sequence task trained by
            `convatt.sequence` ("find-block", "char-lm"): its reader gives (symbol, next
            symbol or "") pairs, and the tagger's attributes above do not apply.
        max_epochs: the epochs a run trains at most by default (early stopping may end it sooner).
    """

    name: str
    label: str
    read: Callable[[Path], Corpus]
    files: Callable[[Path], list[Path]]
    default_data: Path | None
    tag_column: str
    word_dim: int
    pretrained_words: bool
    vocab_size: int | None = None
    vocab_fraction: float | None = None
    treebanks: bool = False
    paper_tables: tuple[str, ...] = ()
    paper_sizes: tuple[int, int, int] | None = None
    bench_sizes: tuple[int, int, int, int] = (10_000, 100, 20, 20_000)
    task: str = "tagging"
    max_epochs: int = 100

    @property
    def is_sequence_task(self) -> bool:
        return self.task != "tagging"


FORMATS: dict[str, DataFormat] = {}
"""The registered formats by preset name, in registration order."""


def register(data_format: DataFormat) -> DataFormat:
    """Add (or replace) a format; it is known to every command from then on."""
    FORMATS[data_format.name] = data_format
    return data_format


def data_format(preset: str) -> DataFormat:
    """The format of `preset`; an unknown name is a ConvattError with a suggestion."""
    check_known("preset", preset, FORMATS)
    return FORMATS[preset]


def preset_label(preset: str) -> str:
    """How tables and figures name a preset's runs: its format's label, or the name itself."""
    return FORMATS[preset].label if preset in FORMATS else preset


def has_treebanks(preset: str) -> bool:
    """Whether a preset's corpora are treebanks of a collection, averaged over in the results (UD)."""
    return preset in FORMATS and FORMATS[preset].treebanks


def _ptb_files(path: Path) -> list[Path]:
    """A PTB archive itself, or the .mrg files of a directory."""
    return [path] if path.is_file() else [where for where, _ in _directory_files(path).values()]


def _ud_files(path: Path) -> list[Path]:
    """A treebank's three .conllu files."""
    return [find_split_file(path, split) for split in SPLITS]


PTB = register(
    DataFormat(
        "ptb",
        "PTB",
        read=read_ptb,
        files=_ptb_files,
        default_data=EMBEDDED_DATA_DIR / "ptb-sample.tar.gz",
        tag_column="xpos",
        word_dim=300,
        pretrained_words=True,  # fastText, frozen
        vocab_size=20_000,
        paper_tables=("table2b_ptb",),
        paper_sizes=(20_002, 84, 47),  # REFERENCE.md
        bench_sizes=(20_002, 84, 47, 45_000),
    )
)
UD = register(
    DataFormat(
        "ud",
        "UD",
        read=read_ud,
        files=_ud_files,
        default_data=EMBEDDED_DATA_DIR / "ud-2.2" / "UD_English-LinES",
        tag_column="upos",
        word_dim=128,
        pretrained_words=False,  # random, trained
        vocab_fraction=0.5,
        treebanks=True,
        paper_tables=("table2c_ud_macro", "table2d_ud_per_treebank"),
        bench_sizes=(10_000, 100, 19, 20_000),
    )
)

# Beyond tagging: causal sequence tasks (`convatt.sequence`), their runs in the same run directories.


def sequence_task(name: str, label: str, read, files, default_data: Path, task: str, max_epochs: int) -> DataFormat:
    """A causal sequence task's format: the tagger's attributes (tag column, word embedding) do not apply."""
    return DataFormat(
        name,
        label,
        read,
        files,
        default_data,
        tag_column="",
        word_dim=0,
        pretrained_words=False,
        task=task,
        max_epochs=max_epochs,
    )


TOY = register(
    sequence_task(
        "toy",
        "Find-the-block",
        read_find_block,
        lambda path: [path],
        EMBEDDED_DATA_DIR / "find-block" / "n5-l2.json",
        "find-block",
        max_epochs=3,  # 1,875 batches: minutes on a 2-core CPU (docs/results/toy_task.md)
    )
)
CHAR_LM = register(
    sequence_task(
        "charlm",
        "Char LM",
        read_char_text,
        _ud_files,
        EMBEDDED_DATA_DIR / "ud-2.2" / "UD_English-GUM",
        "char-lm",
        max_epochs=6,  # 414 batches (docs/results/char_lm.md)
    )
)


def is_sequence_preset(preset: str) -> bool:
    """Whether a preset's runs are a causal sequence task's (`convatt.sequence`), not the tagger's."""
    return preset in FORMATS and FORMATS[preset].is_sequence_task
