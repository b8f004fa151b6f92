#!/usr/bin/env python3
"""Two Table 2d (UD, per treebank) or Table 2b (PTB) CSVs of `convatt tables` side by side:
the same treebanks or corpora and variants before and after a change of computation (e.g.
docs/results/rmsprop-per-slice/ and docs/results/), with the difference of the means and the
seeds each used.

    python experiments/compare_tables.py BEFORE.csv AFTER.csv [--out FILE.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

CORPUS_COLUMNS = ("treebank", "corpus")  # Table 2d's key, Table 2b's
CELLS = ["model", "seeds", "all", "all_std", "paper_all"]


class TableError(ValueError):
    """A CSV that is not a table of `convatt tables`."""


def corpus_column(frame: pd.DataFrame, path: Path) -> str:
    """The column naming each row's treebank or corpus."""
    for column in CORPUS_COLUMNS:
        if column in frame.columns:
            return column
    raise TableError(f"{path}: no 'treebank' or 'corpus' column: not a Table 2b/2d CSV of convatt tables")


def paper_setting(path: Path) -> pd.DataFrame:
    """The rows of `path` in the paper's setting (empty `setting`), indexed by (corpus, variant)."""
    try:
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise TableError(f"{path}: not a CSV table ({str(e).strip().splitlines()[-1]})") from None
    key = corpus_column(frame, path)
    missing = [c for c in ["setting", "variant", *CELLS] if c not in frame.columns]
    if missing:
        raise TableError(f"{path}: missing columns {', '.join(missing)}: not a Table 2b/2d CSV of convatt tables")
    frame = frame[(frame["setting"].isna() | (frame["setting"] == "")) & frame["all"].notna()]
    frame = frame.rename(columns={key: "corpus"})[["corpus", "variant", *CELLS]].set_index(["corpus", "variant"])
    frame.attrs["corpus_column"] = key
    return frame


def paired(before: Path, after: Path) -> pd.DataFrame:
    """One row per (corpus, variant) with runs under both, in the paper's setting."""
    first, second = paper_setting(before), paper_setting(after)
    if first.attrs["corpus_column"] != second.attrs["corpus_column"]:
        raise TableError(f"{before} and {after}: one is Table 2b (PTB), the other Table 2d (UD)")
    both = first.merge(second, left_index=True, right_index=True, suffixes=("_before", "_after"))
    both["diff"] = both["all_after"] - both["all_before"]
    both = both.reset_index()
    both.attrs["corpus_column"] = first.attrs["corpus_column"]
    return both


def markdown(both: pd.DataFrame) -> str:
    lines = [
        f"| {both.attrs['corpus_column']} | model | before (seeds) | after (seeds) | after − before | paper |",
        "|---|---|---|---|---|---|",
    ]
    cell = lambda mean, std, seeds: f"{mean:.2f} ± {std:.2f} ({seeds})" if pd.notna(std) else f"{mean:.2f} ({seeds})"
    for r in both.itertuples():
        before = cell(r.all_before, r.all_std_before, r.seeds_before)
        after = cell(r.all_after, r.all_std_after, r.seeds_after)
        lines.append(f"| {r.corpus} | {r.model_after} | {before} | {after} | {r.diff:+.2f} | {r.paper_all_after:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, help="Markdown file to write (default: standard output)")
    args = parser.parse_args(argv)
    for path in (args.before, args.after):
        if not path.is_file():
            print(f"compare_tables: {path}: file not found", file=sys.stderr)
            return 2
    try:
        text = markdown(paired(args.before, args.after))
    except TableError as e:
        print(f"compare_tables: {e}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
