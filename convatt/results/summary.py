"""What produced the tables: per preset, setting and variant, the finished runs, their wall
time, and the code, machines and packages that trained them (result.json's `source_commit`,
`machine`, `cpu`, `cpu_features`, `onednn`, `packages`).

    summary_frame(runs)   the numbers, one row per preset, setting and variant
    summary_table(runs)   as a `Table` ("runs"; `convatt tables` writes it)
"""

from __future__ import annotations

import pandas as pd

from convatt.data.formats import has_treebanks
from convatt.results.frames import in_model_order
from convatt.results.markdown import Table, markdown_table, page

NOT_RECORDED = "not recorded"  # runs trained before result.json had source_commit / machine / cpu ...
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
    "packages",
]


def _values(column: pd.Series) -> str:
    """The distinct values, sorted, comma-separated; NOT_RECORDED for the empty ones."""
    return ", ".join(sorted({v if isinstance(v, str) and v else NOT_RECORDED for v in column}))


def machine_of(run: pd.Series) -> str:
    """One run's machine: "AMD EPYC [avx avx2 fma], oneDNN off, x86_64, 2 CPUs, cpu:0"; older
    results lack the CPU model (and then say so), the oldest the machine too ("")."""
    machine = run["machine"] if isinstance(run["machine"], str) else ""
    if not (isinstance(run["cpu"], str) and run["cpu"]):
        return f"{machine} (CPU model {NOT_RECORDED})" if machine else ""
    onednn = f", oneDNN {run['onednn']}" if run["onednn"] in ("on", "off") else ""
    return f"{run['cpu']} [{run['cpu_features'] or 'features unknown'}]{onednn}, {machine}"


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
                "machines": _values(group.apply(machine_of, axis=1)),
                "packages": _values(group["package_versions"]),
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
            r["packages"],
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
        "that trained them (\"+changes\": with uncommitted changes to convatt/), the machines "
        "(the CPU model [its instruction sets that choose kernels], TensorFlow's oneDNN on or off, "
        "the architecture, CPUs, the device Keras computed on) and the versions of the packages "
        f"that computed; \"{NOT_RECORDED}\": runs trained before result.json kept these. Runs of one "
        "machine and packages repeat bit for bit (one thread); across machines they agree up to "
        "the float order of their sums (docs/reliability.md)."
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
        "Packages",
    ]
    return Table("runs", title, frame, page(title, intro, [], markdown_table(header, _rows(frame))))
