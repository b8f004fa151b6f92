#!/usr/bin/env python3
"""The experiment grid's lists, read from their single sources, for the Makefile.

    python3 experiments/grid.py
    paper:san,san-pe-con,... ud:san-pe-add,... positions:... attention:... treebanks:Afrikaans-AfriBooms,...

- The variant lists are `PAPER_VARIANTS`, `UD_VARIANTS`, `POSITION_VARIANTS`,
  `ATTENTION_VARIANTS`, `TOY_VARIANTS` and `CHARLM_VARIANTS` of
  `convatt/model/variants.py`. They are read with `ast`, not imported: the Makefile calls
  this with the system Python before the virtual environment exists (and under
  `make -n`), and importing the package could pull in Keras.
- The treebanks are the rows of the paper's Table 2d,
  `convatt/embedded/paper/paper_table2d_ud_per_treebank.csv` (47 of them).

One line, `key:a,b,c` groups separated by spaces, so that one `$(shell ...)` call
gives the Makefile everything (a Python start costs ~0.1 s through pyenv shims).
"""

from __future__ import annotations

import ast
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS_PY = ROOT / "convatt" / "model" / "variants.py"
TABLE_2D = ROOT / "convatt" / "embedded" / "paper" / "paper_table2d_ud_per_treebank.csv"
LISTS = {
    "paper": "PAPER_VARIANTS",
    "ud": "UD_VARIANTS",
    "positions": "POSITION_VARIANTS",
    "attention": "ATTENTION_VARIANTS",
    "toy": "TOY_VARIANTS",
    "charlm": "CHARLM_VARIANTS",
}
CONTINUE_LISTS = {"continue_charlm": "CONTINUE_CHARLM_VARIANTS", "continue_ud": "CONTINUE_UD_VARIANTS"}
"""The continuation experiment's (make lm-continue, ud-continue): the first is the runs' own variant."""


def variant_lists(path: Path = VARIANTS_PY, lists: dict[str, str] = LISTS) -> dict[str, list[str]]:
    """{"paper": [...], "ud": [...], "positions": [...], "attention": [...]} from the module's list
    literals (`lists`: key -> the list's name in the module)."""
    found = {}
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    values = {}
    for key, name in lists.items():
        if name not in found:
            raise SystemExit(f"grid.py: {path} has no {name} list")
        values[key] = list(ast.literal_eval(found[name]))
    return values


def paper_treebanks(path: Path = TABLE_2D) -> list[str]:
    """The paper's 47 UD treebanks, as Table 2d names them (e.g. "Ancient_Greek-PROIEL")."""
    with path.open(newline="") as f:
        return [row["treebank"] for row in csv.DictReader(f)]


def main() -> int:
    groups = {**variant_lists(), **variant_lists(lists=CONTINUE_LISTS), "treebanks": paper_treebanks()}
    for key, values in groups.items():
        bad = [v for v in values if not v or any(c in v for c in " ,:$#%")]
        if bad:
            raise SystemExit(f"grid.py: {key} has names make cannot carry: {bad}")
    print(" ".join(f"{key}:{','.join(values)}" for key, values in groups.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
