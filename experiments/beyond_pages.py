"""The beyond-tagging pages' tables where `convatt tables` cannot make them.

python experiments/beyond_pages.py committed [--out docs/results/beyond]
    the short runs' results tables (char_lm, toy_task) and their differences over seeds
    (seeds_charlm, seeds_toy) from the per-seed numbers of the committed char_lm.csv and
    toy_task.csv (the run directories of `make lm-all` / `make toy-all` are not kept), with
    each variant's parameters counted from its model and the n-gram rows computed from the
    embedded English-GUM text. With the run directories, `convatt tables` makes the same
    tables (and the per-sample significance tables, which need the runs' sample scores).
python experiments/beyond_pages.py long --runs RUNS [--out docs/results/lm-long]
    the longer character LM runs under RUNS, finished or still training
    (`convatt.results.long_runs`; `make lm-long-results`): lm_long.md/.csv and the figure.
python experiments/beyond_pages.py continued --lm-runs RUNS --ud-runs RUNS [--recorded CSV] [--out docs/results]
    efficiency or capacity: the runs of `make lm-continue` (and -scratch) under --lm-runs and of
    `make ud-continue` (and -scratch) under --ud-runs, finished or not, and with --recorded (an
    earlier page's efficiency_or_capacity.csv) the finished runs whose directories are gone
    (`convatt.results.continuation_page`; `make continue-results`): efficiency_or_capacity.md/.csv and the figure.
"""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

import pandas as pd

from convatt.results.markdown import Table
from convatt.rundir.storage import write_text

ROOT = Path(__file__).resolve().parents[1]
BEYOND = ROOT / "docs" / "results" / "beyond"


def per_run_frame(summary: pd.DataFrame, preset: str, columns: dict[str, str]) -> pd.DataFrame:
    """One row per (variant, seed) from a results table's CSV: its `<name>_per_seed` cells
    ("1: 3.617, 2: 3.588") become the runs frame's `columns[name]`."""
    rows = []
    for _, r in summary.dropna(subset=["seeds"]).iterrows():
        cells = {name: dict(c.split(": ") for c in r[f"{name}_per_seed"].split(", ")) for name in columns}
        for seed in cells[next(iter(columns))]:
            row = dict(preset=preset, corpus=r["corpus"], setting="", variant=r["variant"], model=r["model"])
            row.update(seed=int(seed), run_dir="", **{columns[n]: float(cells[n][seed]) for n in columns})
            rows.append(row)
    return pd.DataFrame(rows)


def with_parameters(runs: pd.DataFrame, preset: str, n_symbols: int) -> pd.DataFrame:
    from convatt.model.parameters import count_parameters
    from convatt.sequence.config import make_sequence_config
    from convatt.sequence.model import build_causal_model

    count = {
        v: count_parameters(build_causal_model(make_sequence_config(preset, v), n_symbols, jit_compile=False))
        for v in runs["variant"].unique()
    }
    return runs.assign(parameters=runs["variant"].map(count))


def write(table: Table, out: Path) -> None:
    write_text(out / f"{table.name}.md", table.markdown)
    write_text(out / f"{table.name}.csv", table.frame.to_csv(index=False, float_format="%.4f"))
    print(out / f"{table.name}.md")


def committed(out: Path) -> None:
    from convatt.data.char_text import read_char_text
    from convatt.data.find_block import read_find_block
    from convatt.data.formats import CHAR_LM, TOY, data_format
    from convatt.results.sequence_tables import charlm_table, seed_difference_table, toy_table
    from convatt.sequence.data import symbol_vocabulary
    from convatt.sequence.ngram import corpus_baselines

    text = read_char_text(data_format(CHAR_LM.name).default_data)
    lm = per_run_frame(
        pd.read_csv(out / "char_lm.csv"), CHAR_LM.name, {"bpc": "test_bits_per_symbol", "accuracy": "test_all"}
    )
    lm = with_parameters(lm.assign(test_all=lm["test_all"] / 100), CHAR_LM.name, len(symbol_vocabulary(text)))
    toy = per_run_frame(pd.read_csv(out / "toy_task.csv"), TOY.name, {"error": "test_all", "dev_error": "dev_all"})
    toy = toy.assign(test_all=1 - toy["test_all"] / 100, dev_all=1 - toy["dev_all"] / 100)
    toy = with_parameters(toy, TOY.name, len(symbol_vocabulary(read_find_block(data_format(TOY.name).default_data))))
    baselines = corpus_baselines(text).assign(corpus=text.name)
    for table in (charlm_table(lm, baselines), seed_difference_table(lm, CHAR_LM), toy_table(toy)):
        write(table, out)
    write(seed_difference_table(toy, TOY), out)


def long(runs: Path, out: Path) -> None:
    from convatt.results.frames import load_records
    from convatt.results.long_runs import write_progress
    from convatt.results.sequence_tables import charlm_baselines

    finished_or_not = load_records(runs, include_running=True).runs
    baselines, notes = charlm_baselines(finished_or_not)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    for path in write_progress(runs, out, when, baselines):
        print(path)
    for note in notes:
        print(note)


def continued(lm_runs: Path, ud_runs: Path, out: Path, lm_epochs: int, recorded: Path | None) -> None:
    from convatt.results.continuation_page import write_page

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    for path in write_page(lm_runs, ud_runs, out, when, lm_epochs, recorded):
        print(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("committed").add_argument("--out", type=Path, default=BEYOND)
    p = sub.add_parser("long")
    p.add_argument("--runs", type=Path, required=True)
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "lm-long")
    p = sub.add_parser("continued")
    p.add_argument("--lm-runs", type=Path, required=True, help="the RUNS of make lm-continue")
    p.add_argument("--ud-runs", type=Path, required=True, help="the RUNS of make ud-continue")
    p.add_argument("--lm-epochs", type=int, default=60, help="the EPOCHS of make lm-continue (the page's commands)")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    p.add_argument(
        "--recorded",
        type=Path,
        help="an earlier page's efficiency_or_capacity.csv: its finished runs whose directories are absent",
    )
    args = parser.parse_args()
    if args.command == "continued":
        if args.recorded and not args.recorded.is_file():
            parser.error(f"--recorded {args.recorded}: no such file")
        continued(args.lm_runs, args.ud_runs, args.out, args.lm_epochs, args.recorded)
    else:
        committed(args.out) if args.command == "committed" else long(args.runs, args.out)


if __name__ == "__main__":
    main()
