"""What produced the tables: per preset, setting and variant, the finished runs, their wall
time, and the code and machines that trained them (result.json's `source_commit`, `machine`).

    summary_frame(runs)   the numbers, one row per preset, setting and variant
    summary_table(runs)   as a `Table` ("runs"; `convatt tables` writes it)
"""

from __future__ import annotations

import pandas as pd

from convatt.data.formats import has_treebanks
from convatt.results.frames import in_model_order
from convatt.results.markdown import Table, markdown_table, page

NOT_RECORDED = "not recorded"  # runs trained before result.json had source_commit / machine
COLUMNS = [
    "preset",
    "setting",
    "variant",
    "model",
    "runs",
    "corpora",
    "seeds",
    "epochs_run",
    "wall_seconds",
    "wall_seconds_min",
    "wall_seconds_max",
    "backends",
    "commits",
    "machines",
]


def _values(column: pd.Series) -> str:
    """The distinct values, sorted, comma-separated; NOT_RECORDED for the empty ones."""
    return ", ".join(sorted({v if isinstance(v, str) and v else NOT_RECORDED for v in column}))


def summary_frame(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (preset, setting, variant), group in runs.groupby(["preset", "setting", "variant"], sort=False):
        corpora = group["treebank"] if has_treebanks(preset) else group["corpus"]
        rows.append(
            {
                "preset": preset,
                "setting": setting,
                "variant": variant,
                "model": group["model"].iloc[0],
                "runs": len(group),
                "corpora": corpora.nunique(),
                "seeds": " ".join(map(str, sorted(group["seed"].unique()))),
                "epochs_run": int(group["epochs_run"].sum()),
                "wall_seconds": float(group["wall_seconds"].sum()),
                "wall_seconds_min": float(group["wall_seconds"].min()),
                "wall_seconds_max": float(group["wall_seconds"].max()),
                "backends": _values(group["backend"]),
                "commits": _values(group["source_commit"]),
                "machines": _values(group["machine"]),
            }
        )
    return in_model_order(pd.DataFrame(rows, columns=COLUMNS), ["preset"])


def _rows(frame: pd.DataFrame) -> list[list[str]]:
    rows = [
        [
            r["preset"],
            r["model"],
            str(r["runs"]),
            str(r["corpora"]),
            r["seeds"],
            f"{r['epochs_run']:,}",
            f"{r['wall_seconds']:,.0f}",
            f"{r['wall_seconds_min']:,.0f}-{r['wall_seconds_max']:,.0f}",
            r["backends"],
            r["commits"],
            r["machines"],
        ]
        for _, r in frame.iterrows()
    ]
    total = [
        "**all**",
        "",
        str(frame["runs"].sum()),
        "",
        "",
        f"{frame['epochs_run'].sum():,}",
        f"{frame['wall_seconds'].sum():,.0f}",
        "",
        "",
        "",
        "",
    ]
    return rows + [total]


def summary_table(runs: pd.DataFrame) -> Table:
    title = "The runs behind these tables"
    frame = summary_frame(runs)
    intro = (
        "Per preset and model (setting): the finished runs, the corpora (treebanks) and seeds they "
        "cover, their epochs and training wall time in seconds (result.json's `wall_seconds`: "
        "training and evaluation, not the start-up), the backends, the git commits of the code "
        "that trained them (\"+changes\": with uncommitted changes to convatt/) and the machines "
        f"(architecture, CPUs, the device Keras computed on); \"{NOT_RECORDED}\": runs trained before "
        "result.json kept these."
    )
    header = [
        "Preset",
        "Model",
        "Runs",
        "Corpora",
        "Seeds",
        "Epochs",
        "Wall time (s)",
        "Per run (s)",
        "Backends",
        "Commits",
        "Machines",
    ]
    return Table("runs", title, frame, page(title, intro, [], markdown_table(header, _rows(frame))))
