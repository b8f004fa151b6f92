"""The paper's numbers: Tables 2b, 2c and 2d of Dufter, Schmitt & Schütze (2020), as data.

    paper_table(name)   one of convatt/embedded/paper/paper_*.csv as a DataFrame
    paper_table2d()     Table 2d indexed by treebank (spelt as `treebank_key` spells it)

`CONVATT_REFERENCE` names another folder of paper_*.csv (the tests' copy, say).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from convatt.data.corpus import EMBEDDED_DATA_DIR
from convatt.data.ud import treebank_key
from convatt.errors import ConvattError
from convatt.model.variants import VARIANTS
from convatt.rundir.schema import PAPER_EPOCHS  # noqa: F401 (the paper's 100, one source)

REFERENCE_DIR = Path(os.environ.get("CONVATT_REFERENCE", EMBEDDED_DATA_DIR / "paper"))
PAPER_SEEDS = 3
N_PAPER_TREEBANKS = 47
OUR_LABELS = frozenset(
    v.label for v in VARIANTS.values()
)  # rows of the paper that are no variant of ours: its baselines


def paper_table(name: str) -> pd.DataFrame:
    """One of convatt/embedded/paper/paper_*.csv: "table2b_ptb", "table2c_ud_macro", ..."""
    path = REFERENCE_DIR / f"paper_{name}.csv"
    if not path.exists():
        raise ConvattError(
            "the paper's reference table is missing (set CONVATT_REFERENCE to the folder of paper_*.csv)", path
        )
    return pd.read_csv(path)


def paper_table2d() -> pd.DataFrame:
    """Table 2d indexed by `treebank_key`: one column per model, and Uppsala."""
    table = paper_table("table2d_ud_per_treebank")
    return table.assign(treebank=table["treebank"].map(treebank_key)).set_index("treebank")
