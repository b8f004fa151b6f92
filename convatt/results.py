"""Run directories -> the paper's Tables 2b, 2c and 2d, with the paper's numbers beside ours.

A finished run is a directory holding `result.json` (written last by `convatt train`),
with `config.json`, `history.csv` and `curve.csv` beside it. Runs are found by
scanning for result.json anywhere under a root, and described by its content,
never by the path, so any layout works (the Makefile's is
`ptb/<variant>/seed<S>/` and `ud/UD_<Treebank>/<variant>/seed<S>/`).

    load_runs(root)       one row per finished run (accuracies as fractions)
    load_histories(root)  one row per run and epoch (history.csv)
    load_curves(root)     one row per run and 100 training batches (curve.csv)
    build_tables(runs)    the tables as `Table`s (a DataFrame, its Markdown, notes)
    write_tables(root, out)  Markdown and CSV files in `out` (`make tables`)

Tables show percent with two decimals, as the paper. Over seeds: the mean and the
standard deviation (numpy's default, ddof=0, the spread of the seeds themselves;
shown only with two seeds or more). Table 2c, as the paper: per treebank the mean
and standard deviation over seeds, then the mean over treebanks of both ("subscript
is average standard deviation"). A metric with no tokens (no OOV token, say) is
null in result.json and left out of its means.
"""
from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from convatt.data.corpus import EMBEDDED_DATA_DIR
from convatt.errors import ConvattError
from convatt.rundir import read_json, write_text
from convatt.runs import RunConfig, RunResult, Setting
from convatt.variants import PAPER_VARIANTS, UD_VARIANTS, VARIANTS

REFERENCE_DIR = Path(os.environ.get("CONVATT_REFERENCE", EMBEDDED_DATA_DIR / "paper"))
METRICS = ("all", "oov", "ambiguous")
METRIC_NAMES = {"all": "All", "oov": "OOV", "ambiguous": "Ambig."}
STD_DDOF = 0
PAPER_SEEDS = 3
PAPER_EPOCHS = 100
N_PAPER_TREEBANKS = 47
RUN_KEY = ["preset", "corpus", "variant", "setting", "seed"]


# ---------------------------------------------------------------- loading runs

def find_results(root: Path) -> list[Path]:
    """Every result.json under `root` (sorted), or `root` itself if it is one."""
    root = Path(root)
    if root.is_file() and root.name == "result.json":
        return [root]
    if not root.is_dir():
        raise ConvattError("no such runs directory", root)
    return sorted(root.rglob("result.json"))


def treebank_key(name: str) -> str:
    """A UD treebank's name as Table 2d spells it: "UD_Old French-SRCMF" -> "Old_French-SRCMF"."""
    name = name.strip()
    if name.startswith("UD_"):
        name = name[3:]
    return name.replace(" ", "_")


def _run_setting(result: RunResult, config_path: Path) -> Setting:
    """The run's `Setting`, from its config.json (or, without one, from result.json)."""
    if config_path.exists():
        return RunConfig.from_json(read_json(config_path), config_path).setting
    return Setting(protocol=result.protocol, mask_padding=result.mask_padding)


def _is_masked(setting: str) -> bool:
    return "mask" in setting.split(", ")


def model_name(label: str, setting: str) -> str:
    """The display name of a variant: its paper label, then its setting if any ("SAN [mask]")."""
    return f"{label} [{setting}]" if setting else label


def _metric(split: dict, name: str) -> float:
    value = (split or {}).get(name)
    return math.nan if value is None else float(value)


def _read_run(path: Path) -> dict:
    run_result = RunResult.from_json(read_json(path), path)
    result = run_result.to_json()
    config_path = path.with_name("config.json")
    config = read_json(config_path) if config_path.exists() else {}
    variant = result["variant"]
    label = result.get("label") or label_of(variant)
    run_setting = _run_setting(run_result, config_path)
    mask, setting = run_setting.mask_padding, run_setting.label()
    row = {
        "run_dir": str(path.parent),
        "preset": result["preset"],
        "corpus": result["corpus"],
        "treebank": treebank_key(result["corpus"]) if result["preset"] == "ud" else None,
        "variant": variant,
        "label": label,
        "model": model_name(label, setting),
        "seed": int(result["seed"]),
        "mask_padding": mask,
        "setting": setting,
        "protocol": run_setting.protocol,
        "is_sample": bool(result.get("is_sample", False)),
        "corpus_note": result.get("corpus_note") or "",
        "embeddings": config.get("embeddings"),
        "limit": config.get("limit"),
        "max_epochs": config.get("epochs"),
    }
    for split in ("dev", "test"):
        for m in METRICS:
            row[f"{split}_{m}"] = _metric(result.get(split), m)
            row[f"{split}_n_{m}"] = (result.get(split) or {}).get(f"n_{m}")
    for k in ("parameters", "epochs_run", "best_epoch", "wall_seconds", "backend", "convatt_version"):
        row[k] = result.get(k)
    return row


def load_runs(root: Path) -> pd.DataFrame:
    """One row per finished run under `root`: what it is, and dev/test accuracy as fractions.

    Columns: run_dir, preset, corpus, treebank (UD), variant, label, model, seed,
    mask_padding, setting (`run_setting`), is_sample, corpus_note, embeddings, limit, max_epochs,
    {dev,test}_{all,oov,ambiguous} (NaN where the metric had no tokens),
    {dev,test}_n_{...}, parameters, epochs_run, best_epoch, wall_seconds, backend.
    Two runs of the same (preset, corpus, variant, setting, seed) would be
    counted twice in a mean: the first (by path) is kept, with a warning.
    """
    rows = [_read_run(p) for p in find_results(root)]
    if not rows:
        columns = ["run_dir", "preset", "corpus", "treebank", "variant", "label", "model", "seed",
                   "mask_padding", "setting", "protocol", "is_sample", "corpus_note", "embeddings", "limit", "max_epochs"]
        columns += [f"{s}_{m}" for s in ("dev", "test") for m in METRICS]
        return pd.DataFrame(columns=columns)
    df = pd.DataFrame(rows)
    dup = df.duplicated(RUN_KEY, keep="first")
    if dup.any():
        paths = ", ".join(df.loc[dup, "run_dir"])
        warnings.warn(f"{int(dup.sum())} runs repeat another run's preset, corpus, variant, setting and seed "
                      f"and are left out: {paths}", stacklevel=2)
        df = df.loc[~dup]
    return df.reset_index(drop=True)


def _load_csvs(root: Path, name: str, runs: pd.DataFrame | None) -> pd.DataFrame:
    runs = load_runs(root) if runs is None else runs
    meta = ["run_dir", "preset", "corpus", "treebank", "variant", "label", "model", "seed", "mask_padding", "setting", "protocol"]
    frames = []
    for _, run in runs.iterrows():
        path = Path(run["run_dir"]) / name
        if not path.exists() or path.stat().st_size == 0:
            continue
        frame = pd.read_csv(path)
        if frame.empty:
            continue
        for k in reversed(meta):
            frame.insert(0, k, run[k])
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=meta)
    return pd.concat(frames, ignore_index=True)


def load_histories(root: Path, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """history.csv of every finished run, one row per (run, epoch), with the run's metadata."""
    return _load_csvs(root, "history.csv", runs)


def load_curves(root: Path, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """curve.csv of every finished run, one row per (run, step), with the run's metadata."""
    return _load_csvs(root, "curve.csv", runs)


# ---------------------------------------------------------------- the paper's numbers

def paper_table(name: str) -> pd.DataFrame:
    """One of convatt/embedded/paper/paper_*.csv: "table2b_ptb", "table2c_ud_macro", ..."""
    path = REFERENCE_DIR / f"paper_{name}.csv"
    if not path.exists():
        raise ConvattError("the paper's reference table is missing (set CONVATT_REFERENCE to "
                           "the folder of paper_*.csv)", path)
    return pd.read_csv(path)


# ---------------------------------------------------------------- aggregation

def seed_stats(values) -> tuple[float, float, int]:
    """(mean, std, n) over seeds of the non-missing values; std is NaN below two values."""
    a = np.asarray([v for v in values if v is not None and not pd.isna(v)], dtype=float)
    if a.size == 0:
        return math.nan, math.nan, 0
    std = float(np.std(a, ddof=STD_DDOF)) if a.size >= 2 else math.nan
    return float(np.mean(a)), std, int(a.size)


def summarize(runs: pd.DataFrame, by: list[str], split: str = "test") -> pd.DataFrame:
    """Per group of `by`: seeds (count and list), and mean / std in percent for each metric."""
    rows = []
    for key, group in runs.groupby(by, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        row["n_seeds"] = len(group)
        row["seeds"] = " ".join(str(s) for s in sorted(group["seed"]))
        for m in METRICS:
            mean, std, _ = seed_stats(100 * group[f"{split}_{m}"])
            row[m], row[f"{m}_std"] = mean, std
        params = group["parameters"].dropna().unique() if "parameters" in group else []
        row["parameters"] = int(params[0]) if len(params) == 1 else None
        row["best_epoch"] = _nanmean(group["best_epoch"]) if "best_epoch" in group else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


_VARIANT_RANK = {v: i for i, v in enumerate(VARIANTS)}


def model_order(key: tuple[str, str]) -> tuple:
    """Sort key of a (setting, variant): the paper's setting ("") first, then the order of
    VARIANTS (the paper's Table 2 order), then unknown names alphabetically."""
    setting, variant = key
    return setting != "", setting, _VARIANT_RANK.get(variant, len(_VARIANT_RANK)), variant


_LABELS = {v.label for v in VARIANTS.values()}


def label_of(variant: str) -> str:
    return VARIANTS[variant].label if variant in VARIANTS else variant


# ---------------------------------------------------------------- formatting

def fmt(value, std=None, signed=False) -> str:
    """Percent with two decimals, "–" when missing; "94.62 ± 0.15" with a std."""
    if value is None or pd.isna(value):
        return "–"
    text = f"{value:+.2f}" if signed else f"{value:.2f}"
    if std is not None and not pd.isna(std):
        text += f" ± {std:.2f}"
    return text


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


@dataclass
class Table:
    """One table: `frame` is what goes to CSV, `markdown` the readable page, `notes` its caveats."""

    name: str
    title: str
    frame: pd.DataFrame
    markdown: str
    notes: list[str] = field(default_factory=list)


def _common_notes(runs: pd.DataFrame) -> list[str]:
    notes = []
    n_seeds = runs.groupby(["preset", "corpus", "variant", "setting"]).size()
    if (n_seeds < PAPER_SEEDS).any():
        notes.append(f"{int((n_seeds < PAPER_SEEDS).sum())} model(s) have fewer than {PAPER_SEEDS} seeds "
                     f"(the paper: {PAPER_SEEDS}).")
    smoke = runs["limit"].notna() | (pd.to_numeric(runs["max_epochs"], errors="coerce") < PAPER_EPOCHS)
    if smoke.any():
        notes.append(f"{int(smoke.sum())} of {len(runs)} runs are smoke runs (--limit, or --epochs below "
                     f"{PAPER_EPOCHS}), marked [limit N] / [max N epochs]: not comparable to the paper. Runs "
                     "of different settings are shown apart, never averaged together.")
    if runs["mask_padding"].any():
        notes.append("Models marked [mask] ran with --mask-padding; the paper lets pads take part in attention.")
    if (runs["protocol"] != "original").any():
        notes.append("Models marked [keras3] (or with protocol items) trained with Keras 3's optimizer and loss "
                     "rather than the paper's code's (`convatt train --protocol`, README \"Training protocol\"); "
                     "runs made before convatt had protocols count as keras3.")
    return notes


def _note_block(notes: list[str]) -> str:
    return "\n\n".join(f"> **Note:** {n}" for n in notes)


def _beside(rec: dict, ours, paper_row) -> list[str]:
    """Add ours (mean, std), the paper's and the difference of each metric to `rec`; return the
    Markdown cells (ours, paper, Δ for each metric). `ours`/`paper_row`: mappings or None."""
    cells = []
    for m in METRICS:
        mean, std = (math.nan, math.nan) if ours is None else (ours[m], ours[f"{m}_std"])
        p, p_std = (math.nan, math.nan) if paper_row is None else (paper_row[m], paper_row[f"{m}_std"])
        rec.update({m: mean, f"{m}_std": std, f"paper_{m}": p, f"paper_{m}_std": p_std, f"diff_{m}": mean - p})
        cells += [fmt(mean, std), fmt(p, p_std), fmt(mean - p, signed=True)]
    return cells


def _reference_rows(paper: pd.DataFrame, lead: int, trail: int = 0) -> list[list[str]]:
    """The paper's rows that are no variant of ours (Meta-Bi-LSTM, Uppsala...): its numbers only."""
    return [[name] + ["–"] * lead + sum((["–", fmt(p[m], p[f"{m}_std"]), "–"] for m in METRICS), []) + ["–"] * trail
            for name, p in paper.iterrows() if name not in _LABELS]


def _metric_header() -> list[str]:
    return sum(([METRIC_NAMES[m], "Paper", "Δ"] for m in METRICS), [])


def _page(title: str, intro: str, notes: list[str], *sections: str) -> str:
    return "\n\n".join(x for x in [f"# {title}", intro, _note_block(notes), *sections] if x) + "\n"


def _paper_table2d() -> pd.DataFrame:
    """Table 2d indexed by treebank_key: one column per model, and Uppsala."""
    d = paper_table("table2d_ud_per_treebank")
    return d.assign(treebank=d["treebank"].map(treebank_key)).set_index("treebank")


# ---------------------------------------------------------------- Table 2b (PTB)

def ptb_table(runs: pd.DataFrame) -> Table:
    """Table 2b: PTB test accuracy (all / OOV / ambiguous), ours beside the paper's.

    One row per variant of the paper (run or not) and per other variant that was run;
    a section per corpus and setting (`run_setting`) when the runs hold several.
    """
    runs = runs[runs["preset"] == "ptb"]
    paper = paper_table("table2b_ptb").set_index("model")
    notes = []
    if runs.empty:
        notes.append("No finished PTB runs: only the paper's numbers are shown.")
    else:
        if runs["is_sample"].any():
            how = " ".join(n for n in runs.loc[runs["is_sample"], "corpus_note"].unique() if n)
            notes.append("Results are on the PTB sample, not the paper's full WSJ (train 00-18, dev 19-21, "
                         f"test 22-24): NOT comparable to the paper. {how}".rstrip())
        partial = runs.loc[~runs["is_sample"], "corpus_note"].unique()
        notes += [f"PTB: {n}" for n in partial if n]
        if runs["embeddings"].isna().any():
            notes.append(f"{int(runs['embeddings'].isna().sum())} PTB runs trained without pretrained word "
                         "vectors (the paper: fastText wiki-news-300d-1M-subword.vec, frozen).")
        notes += _common_notes(runs)
    ours = summarize(runs, ["corpus", "setting", "variant"]) if not runs.empty else pd.DataFrame()
    groups = list(ours.groupby(["corpus", "setting"], sort=False)) if not ours.empty else [((None, ""), ours)]

    records, sections = [], []
    for (corpus, setting), group in groups:
        by_variant = {r["variant"]: r for _, r in group.iterrows()}
        md_rows = []
        for variant in sorted(set(by_variant) | set(PAPER_VARIANTS), key=lambda v: model_order(("", v))):
            label, row = label_of(variant), by_variant.get(variant)
            rec = {"corpus": corpus, "setting": setting, "mask_padding": _is_masked(setting),
                   "model": model_name(label, setting),
                   "variant": variant,
                   "n_seeds": 0 if row is None else int(row["n_seeds"]), "seeds": "" if row is None else row["seeds"]}
            cells = _beside(rec, row, paper.loc[label] if label in paper.index else None)
            rec["parameters"] = None if row is None else row["parameters"]
            rec["best_epoch"] = math.nan if row is None else row["best_epoch"]
            records.append(rec)
            md_rows.append([label, str(rec["n_seeds"])] + cells)  # the section heading names the setting
        md_rows += _reference_rows(paper, lead=1)
        heading = f"### {corpus}{f' [{setting}]' if setting else ''}\n\n" if len(groups) > 1 or setting else ""
        sections.append(heading + markdown_table(["Model", "Seeds"] + _metric_header(), md_rows))

    title = "Table 2b: PTB test accuracy (%)"
    intro = (f"Ours: mean ± standard deviation over seeds (ddof={STD_DDOF}) of {len(runs)} finished "
             "PTB run(s); Paper: Dufter, Schmitt & Schütze (2020), Table 2b; Δ = ours − paper.")
    return Table("table2b_ptb", title, pd.DataFrame(records), _page(title, intro, notes, *sections), notes)


# ---------------------------------------------------------------- Tables 2c, 2d (UD)

def ud_per_treebank(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (setting, variant, treebank): mean / std over seeds in percent."""
    runs = runs[runs["preset"] == "ud"]
    if runs.empty:
        return pd.DataFrame(columns=["setting", "variant", "treebank", "n_seeds", "seeds"])
    return summarize(runs, ["setting", "variant", "treebank"])


def _ud_notes(runs: pd.DataFrame, per_tb: pd.DataFrame, paper_tbs) -> list[str]:
    runs = runs[runs["preset"] == "ud"]
    if runs.empty:
        return ["No finished UD runs: only the paper's numbers are shown."]
    notes = []
    tbs = sorted(runs["treebank"].unique())
    inside = [t for t in tbs if t in paper_tbs]
    if len(inside) < N_PAPER_TREEBANKS:
        notes.append(f"UD results cover {len(inside)} of the paper's {N_PAPER_TREEBANKS} treebanks: the macro "
                     "means are NOT comparable to the paper's Table 2c. \"Paper All (same treebanks)\" is the "
                     "paper's Table 2d averaged over the same treebanks, for comparison.")
    outside = [t for t in tbs if t not in paper_tbs]
    if outside:
        notes.append(f"Treebanks not in the paper (left out of macro means): {', '.join(outside)}.")
    sets = per_tb[per_tb["treebank"].isin(paper_tbs)].groupby(["setting", "variant"])["treebank"].apply(frozenset)
    if sets.nunique() > 1:
        notes.append("The models cover different sets of treebanks, so their macro means differ in what "
                     "they average; compare each with its own \"Paper All (same treebanks)\".")
    return notes + _common_notes(runs)


def ud_macro_table(runs: pd.DataFrame) -> Table:
    """Table 2c: the mean over treebanks (those of the paper's 47 that were run) of the
    per-treebank mean over seeds; its ± is the mean over treebanks of the per-treebank std."""
    paper = paper_table("table2c_ud_macro").set_index("model")
    paper_d = _paper_table2d()
    per_tb = ud_per_treebank(runs)
    notes = _ud_notes(runs, per_tb, paper_d.index)
    per_tb = per_tb[per_tb["treebank"].isin(paper_d.index)]
    groups = {k: g for k, g in per_tb.groupby(["setting", "variant"], sort=False)}

    records, md_rows = [], []
    for setting, variant in sorted(set(groups) | {("", v) for v in UD_VARIANTS}, key=model_order):
        label, g = label_of(variant), groups.get((setting, variant))
        rec = {"setting": setting, "mask_padding": _is_masked(setting),
               "model": model_name(label, setting), "variant": variant,
               "n_treebanks": 0 if g is None else len(g),
               "seeds_per_treebank": "" if g is None else _range_text(g["n_seeds"])}
        macro = None if g is None else {c: _nanmean(g[c]) for m in METRICS for c in (m, f"{m}_std")}
        cells = _beside(rec, macro, paper.loc[label] if label in paper.index else None)
        same = paper_d.loc[list(g["treebank"]), label] if g is not None and label in paper_d.columns else None
        rec["paper_all_same_treebanks"] = math.nan if same is None else float(same.mean())
        rec["diff_all_same_treebanks"] = rec["all"] - rec["paper_all_same_treebanks"]
        records.append(rec)
        md_rows.append([rec["model"], str(rec["n_treebanks"]), rec["seeds_per_treebank"] or "–"] + cells
                       + [fmt(rec["paper_all_same_treebanks"]), fmt(rec["diff_all_same_treebanks"], signed=True)])
    md_rows += _reference_rows(paper, lead=2, trail=2)
    header = ["Model", "Treebanks", "Seeds"] + _metric_header() + ["Paper All (same treebanks)", "Δ"]
    title = "Table 2c: UD test accuracy (%), macro mean over treebanks"
    intro = (f"Ours: per treebank the mean and standard deviation over seeds (ddof={STD_DDOF}), then the mean "
             "over treebanks of both (± is the average standard deviation, as the paper). Paper: Table 2c "
             "(47 treebanks). Δ = ours − paper.")
    return Table("table2c_ud_macro", title, pd.DataFrame(records),
                 _page(title, intro, notes, markdown_table(header, md_rows)), notes)


def ud_treebank_table(runs: pd.DataFrame) -> Table:
    """Table 2d: test accuracy (all words) per treebank and variant, beside the paper's."""
    paper_d = _paper_table2d()
    per_tb = ud_per_treebank(runs)
    notes = _ud_notes(runs, per_tb, paper_d.index)
    title = "Table 2d: UD test accuracy (%) per treebank, all words"
    if per_tb.empty:
        return Table("table2d_ud_per_treebank", title, pd.DataFrame(), _page(title, "", notes), notes)
    present = set(zip(per_tb["setting"], per_tb["variant"]))
    models = sorted(present | {("", v) for v in UD_VARIANTS}, key=model_order)
    treebanks = sorted(per_tb["treebank"].unique())
    index = {(r["setting"], r["variant"], r["treebank"]): r for _, r in per_tb.iterrows()}

    records, md_rows = [], []
    for tb in treebanks:
        cells = [tb.replace("_", " ")]
        for setting, variant in models:
            label, r = label_of(variant), index.get((setting, variant, tb))
            paper_all = paper_d.at[tb, label] if tb in paper_d.index and label in paper_d.columns else math.nan
            rec = {"treebank": tb, "setting": setting, "mask_padding": _is_masked(setting),
                   "model": model_name(label, setting), "variant": variant,
                   "n_seeds": 0 if r is None else int(r["n_seeds"]), "seeds": "" if r is None else r["seeds"]}
            for c in (c for m in METRICS for c in (m, f"{m}_std")):
                rec[c] = math.nan if r is None else r[c]
            rec["paper_all"] = paper_all
            rec["diff_all"] = rec["all"] - paper_all
            records.append(rec)
            cells.append(f"{fmt(rec['all'], rec['all_std'])} / {fmt(paper_all)} / {fmt(rec['diff_all'], signed=True)}")
        cells.append(fmt(paper_d.at[tb, "Uppsala"]) if tb in paper_d.index else "–")
        md_rows.append(cells)
    frame = pd.DataFrame(records)
    frame["paper_uppsala"] = frame["treebank"].map(paper_d["Uppsala"])
    # per model, the mean over the treebanks above that are the paper's and that it ran on
    mean_cells = ["**Mean (paper's treebanks above)**"]
    for setting, variant in models:
        sub = frame[(frame["setting"] == setting) & (frame["variant"] == variant)
                    & frame["treebank"].isin(paper_d.index) & frame["all"].notna()]
        ours, theirs = _nanmean(sub["all"]), _nanmean(sub["paper_all"])
        mean_cells.append(f"{fmt(ours)} / {fmt(theirs)} / {fmt(ours - theirs, signed=True)}")
    mean_cells.append(fmt(_nanmean(paper_d.loc[[t for t in treebanks if t in paper_d.index], "Uppsala"])))
    md_rows.append(mean_cells)
    header = ["Treebank"] + [model_name(label_of(v), s) for s, v in models] + ["Uppsala (paper)"]
    intro = (f"Each cell: ours (mean ± standard deviation over seeds, ddof={STD_DDOF}) / paper (Table 2d) / "
             "Δ = ours − paper. Uppsala: Smith et al. (2018), as the paper quotes it.")
    return Table("table2d_ud_per_treebank", title, frame,
                 _page(title, intro, notes, markdown_table(header, md_rows)), notes)


def _nanmean(values) -> float:
    a = pd.to_numeric(pd.Series(values), errors="coerce").dropna()
    return float(a.mean()) if len(a) else math.nan


def _range_text(values) -> str:
    lo, hi = int(min(values)), int(max(values))
    return str(lo) if lo == hi else f"{lo}-{hi}"


# ---------------------------------------------------------------- all tables

def build_tables(runs: pd.DataFrame) -> list[Table]:
    """The tables the runs allow: 2b when there are PTB runs, 2c and 2d when there are UD runs."""
    tables = []
    if (runs["preset"] == "ptb").any():
        tables.append(ptb_table(runs))
    if (runs["preset"] == "ud").any():
        tables += [ud_macro_table(runs), ud_treebank_table(runs)]
    return tables


def write_tables(runs: Path, out: Path) -> list[Path]:
    """Tables 2b, 2c, 2d from the finished runs under `runs`, as Markdown and CSV in `out`.

    Prints each table's caveats (sample data, subset of treebanks, smoke runs...) on
    stdout, as the Markdown also does. Returns the files written.
    """
    frame = load_runs(Path(runs))
    if frame.empty:
        raise ConvattError("no finished runs (result.json) under this directory", runs)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written, said = [], set()
    tables = build_tables(frame)
    for table in tables:
        md, csv = out / f"{table.name}.md", out / f"{table.name}.csv"
        write_text(md, table.markdown)
        write_text(csv, table.frame.to_csv(index=False, float_format="%.4f"))
        written += [md, csv]
        for note in table.notes:
            if note not in said:
                print(f"note: {note}")
                said.add(note)
    if not (frame["preset"] == "ud").any():
        print("note: no finished UD runs, so Tables 2c and 2d were not written")
    if not (frame["preset"] == "ptb").any():
        print("note: no finished PTB runs, so Table 2b was not written")
    return written
