"""Copy the committed result tables (docs/results/*.md, written by `convatt tables`) into the
pages that show them (README.md, docs/results.md, the beyond-tagging pages) between markers, so that their tables are
those files' and never typed by hand:

    <!-- table: results/table2d_ud_per_treebank.md -->
    (replaced by the first Markdown table of that file)
    <!-- end table -->

`results/table2b_ptb.md#PTB-sample` takes the first table after the heading "PTB-sample"
(any level). Paths are relative to the page holding the marker.

    python experiments/readme_tables.py [PAGE ...]           rewrite the blocks (`make readme-tables`)
    python experiments/readme_tables.py --check [PAGE ...]   exit 1, naming them, if a block is stale

Without pages: `MARKED_PAGES`, relative to the repository.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKED_PAGES = (
    "README.md",
    "docs/results.md",
    "docs/results-before-fix.md",
    "docs/results/char_lm.md",
    "docs/results/toy_task.md",
)
"""The pages that hold `<!-- table: ... -->` markers."""
BLOCK = re.compile(r"(<!-- table: (?P<source>[^\n]+?) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)


class TableSourceError(Exception):
    """A marker names a file or heading that is not there, or a part without a table."""


@dataclass
class Block:
    source: str  # as the marker spells it: path[#heading]
    body: str  # what the README has between the markers
    line: int  # of the opening marker, 1-based


def find_blocks(readme: str) -> list[Block]:
    return [Block(m["source"], m["body"], readme.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(readme)]


def first_table(text: str, heading: str | None, where: str) -> str:
    """The lines of the first Markdown table in `text` (after `heading`, if given), newline-ended."""
    lines = text.splitlines()
    start = 0
    if heading is not None:
        titles = [i for i, line in enumerate(lines) if line.startswith("#") and line.lstrip("#").strip() == heading]
        if not titles:
            raise TableSourceError(f"{where}: no heading {heading!r}")
        start = titles[0] + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    if not rows:
        raise TableSourceError(f"{where}: no Markdown table" + (f" after {heading!r}" if heading else ""))
    return "\n".join(rows) + "\n"


def table_for(source: str, base: Path) -> str:
    path, _, heading = source.partition("#")
    file = base / path
    if not file.is_file():
        raise TableSourceError(f"{source}: no such file {file}")
    return first_table(file.read_text(), heading or None, source)


def refreshed(readme: str, base: Path) -> str:
    """The README with every block's body replaced by its source's table."""
    return BLOCK.sub(lambda m: m.group(1) + table_for(m["source"], base) + m.group(4), readme)


def stale_blocks(readme: str, base: Path) -> list[Block]:
    return [b for b in find_blocks(readme) if b.body != table_for(b.source, base)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help=f"default: {', '.join(MARKED_PAGES)}")
    parser.add_argument("--check", action="store_true", help="only say which blocks are stale (exit 1)")
    args = parser.parse_args(argv)
    status = 0
    for page in args.pages or [ROOT / p for p in MARKED_PAGES]:
        status = max(status, _update(page, args.check))
    return status


def _update(page: Path, check: bool) -> int:
    """Rewrite (or with `check` only name) the stale blocks of one page: 0 done, 1 stale, 2 broken."""
    try:
        text, base = page.read_text(encoding="utf-8"), page.parent
        stale = stale_blocks(text, base)
        if check:
            for b in stale:
                print(f"{page}:{b.line}: the table from {b.source} is not that file's", file=sys.stderr)
            return 1 if stale else 0
        page.write_text(refreshed(text, base))
    except TableSourceError as e:
        print(f"{page}: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # missing, a directory, unwritable: one line naming the file
        print(f"readme_tables: error: {e.filename or page}: {e.strerror or e}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print(f"readme_tables: error: {page}: not UTF-8 text ({e.reason})", file=sys.stderr)
        return 2
    print(f"{page}: {len(stale)} of {len(find_blocks(text))} tables updated from their files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
