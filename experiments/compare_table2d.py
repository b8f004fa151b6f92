#!/usr/bin/env python3
"""Two Table 2d CSVs of `convatt tables` side by side: the same treebanks and variants
before and after a change of computation (e.g. docs/results/rmsprop-per-slice/ and
docs/results/), with the difference of the means and the seeds each used.

    python experiments/compare_table2d.py BEFORE.csv AFTER.csv [--out FILE.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

KEYS = ["treebank", "variant"]
CELLS = ["model", "seeds", "all", "all_std", "paper_all"]


def paired(before: Path, after: Path) -> pd.DataFrame:
    """One row per (treebank, variant) run under both, in the paper's setting (empty `setting`)."""
    frames = []
    for path in (before, after):
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
        frame = frame[frame["setting"].isna() | (frame["setting"] == "")]
        frames.append(frame[KEYS + CELLS].set_index(KEYS))
    both = frames[0].merge(frames[1], left_index=True, right_index=True, suffixes=("_before", "_after"))
    both["diff"] = both["all_after"] - both["all_before"]
    return both.reset_index()


def markdown(both: pd.DataFrame) -> str:
    lines = [
        "| treebank | model | before (seeds) | after (seeds) | after − before | paper |",
        "|---|---|---|---|---|---|",
    ]
    cell = lambda mean, std, seeds: f"{mean:.2f} ± {std:.2f} ({seeds})" if pd.notna(std) else f"{mean:.2f} ({seeds})"
    for r in both.itertuples():
        before = cell(r.all_before, r.all_std_before, r.seeds_before)
        after = cell(r.all_after, r.all_std_after, r.seeds_after)
        lines.append(
            f"| {r.treebank} | {r.model_after} | {before} | {after} | {r.diff:+.2f} | {r.paper_all_after:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--out", type=Path, help="Markdown file to write (default: standard output)")
    args = parser.parse_args(argv)
    for path in (args.before, args.after):
        if not path.is_file():
            print(f"compare_table2d: {path}: file not found", file=sys.stderr)
            return 2
    text = markdown(paired(args.before, args.after))
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
