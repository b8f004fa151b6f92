#!/usr/bin/env python3
"""A compact copy of UD treebanks: only what a tagger reads (FORM and UPOS), gzipped.

    python experiments/ud_compact.py UD_DIR OUT_DIR [--treebanks A,B]     (make ud-compact)

For carrying the paper's treebanks to another machine (a GPU box, a cluster node without
the data): each `UD_<Name>/` under UD_DIR becomes `OUT_DIR/UD_<Name>/` with its train, dev and
test files written as `<file>.conllu.gz` holding ID, FORM and UPOS (the other seven columns
`_`, no comment lines, no multiword-token or empty-node lines), plus the treebank's LICENSE
and README: 11-24 times smaller than the original files (seven UD 2.2 treebanks: 30.4 MB ->
1.9 MB). `convatt train --data` and
`make ud-all UD_DIR=OUT_DIR` read it as they read the original: the same sentences, words
and tags (each treebank is read back and compared before it is kept). Each treebank is
written into a hidden temporary directory and renamed into place when complete, so an
interrupted run resumes with the treebanks it had not finished.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import sys
import tempfile
from pathlib import Path

from convatt.data.corpus import Sentence
from convatt.data.ud import SPLITS, find_split_file, read_conllu
from convatt.errors import ConvattError

CARRIED_FILES = ("LICENSE*", "README*")  # the licence travels with the data


def compact_name(split_file: Path) -> str:
    """`en_lines-ud-train.conllu[.gz]` -> `en_lines-ud-train.conllu.gz`."""
    return split_file.name.removesuffix(".gz").removesuffix(".conllu") + ".conllu.gz"


def write_compact(sentences: list[Sentence], out: Path) -> None:
    """`sentences` as CoNLL-U lines ID FORM _ UPOS _ _ _ _ _ _, gzipped."""
    # mtime=0: the same input gives the same bytes, so copies compare equal
    with gzip.GzipFile(out, "wb", mtime=0) as raw:
        for sentence in sentences:
            lines = (f"{i}\t{form}\t_\t{tag}\t_\t_\t_\t_\t_\t_\n" for i, (form, tag) in enumerate(sentence, 1))
            raw.write(("".join(lines) + "\n").encode("utf-8"))


def compact_treebank(treebank: Path, out_dir: Path) -> Path:
    """Write the compact copy of one `UD_<Name>` directory into `out_dir`; its path."""
    final = out_dir / treebank.name
    temporary = Path(tempfile.mkdtemp(prefix=f".{treebank.name}.", dir=out_dir))
    try:
        for split in SPLITS:
            split_file = find_split_file(treebank, split)
            sentences, compact = read_conllu(split_file), temporary / compact_name(split_file)
            write_compact(sentences, compact)
            if read_conllu(compact) != sentences:
                raise ConvattError(f"the compact {split} split reads back differently: not kept", treebank)
        for pattern in CARRIED_FILES:
            for extra in treebank.glob(pattern):
                shutil.copyfile(extra, temporary / extra.name)
        temporary.chmod(0o755)  # mkdtemp makes it private
        temporary.rename(final)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return final


def chosen_treebanks(ud_dir: Path, names: str) -> list[Path]:
    """The `UD_*` directories under `ud_dir`, or those named (with or without `UD_`)."""
    if not ud_dir.is_dir():
        raise ConvattError("not a directory (expected one holding UD_<Name>/ treebank folders)", ud_dir)
    found = sorted(p for p in ud_dir.glob("UD_*") if p.is_dir())
    if not names:
        if not found:
            raise ConvattError("no UD_<Name>/ treebank folder here", ud_dir)
        return found
    wanted = [n if n.startswith("UD_") else f"UD_{n}" for n in names.split(",") if n]
    missing = [n for n in wanted if not (ud_dir / n).is_dir()]
    if missing:
        raise ConvattError(f"no such treebank folder: {', '.join(missing)}", ud_dir)
    return [ud_dir / n for n in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ud_dir", type=Path, help="the directory holding UD_<Name>/ folders (e.g. data/ud-2.2)")
    parser.add_argument("out_dir", type=Path, help="where the compact UD_<Name>/ folders go")
    parser.add_argument("--treebanks", default="", help="comma-separated names (default: every UD_* folder)")
    args = parser.parse_args(argv)
    try:
        treebanks = chosen_treebanks(args.ud_dir, args.treebanks)
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for treebank in treebanks:
            if (args.out_dir / treebank.name).is_dir():
                print(f"ud_compact: {treebank.name}: already there, skipped")
                continue
            final = compact_treebank(treebank, args.out_dir)
            size = sum(p.stat().st_size for p in final.iterdir())
            print(f"ud_compact: {treebank.name}: {size / 1e6:.2f} MB -> {final}", flush=True)
    except ConvattError as e:
        print(f"ud_compact: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ud_compact: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
