"""`convatt tables` and `convatt plot`: the paper's tables and figures from finished runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from convatt.cli._common import check_out_dir, load_backend
from convatt.errors import ConvattError


def cmd_tables(args) -> None:
    check_out_dir("--out", args.out)
    load_backend(args.debug)  # deepsig (the significance tables) imports TensorFlow: its start-up lines hidden
    from convatt.results.tables import write_tables

    _report(_warning_runs(write_tables, Path(args.runs), Path(args.out), args.settings))


def cmd_plot(args) -> None:
    from convatt.results.plots import write_plots

    check_out_dir("--out", args.out)
    runs, out = Path(args.runs), Path(args.out)
    _report(_warning_runs(write_plots, runs, out, args.band, args.settings, args.include_running))


def _warning_runs(write, *args):
    """`write(*args)`, printing each run it left out (damaged, repeated) as one line on stderr,
    also when nothing could be written: an error then says how many runs were skipped and why."""
    import warnings

    from convatt.rundir.reading import RunWarning

    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RunWarning)
            return write(*args)
    except ConvattError as e:
        raise ConvattError(e.message + _skipped(caught), e.path, e.line) from e
    finally:
        for w in caught:
            if issubclass(w.category, RunWarning):
                print(f"convatt: warning: {w.message}", file=sys.stderr)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)


DAMAGED = "left out a damaged run: "  # how `convatt.results.frames` words a damaged run's warning


def _skipped(caught) -> str:
    """ "; 1 run skipped as damaged: FILE: WHY" for the damaged-run warnings in `caught`."""
    damaged = [str(w.message)[len(DAMAGED) :] for w in caught if str(w.message).startswith(DAMAGED)]
    if not damaged:
        return ""
    runs = "1 run" if len(damaged) == 1 else f"{len(damaged)} runs"
    more = f" (and {len(damaged) - 1} more, above)" if len(damaged) > 1 else ""
    return f"; {runs} skipped as damaged: {damaged[0]}{more}"


def _report(written) -> None:
    """The notes of `make tables`/`make plots` (what is not comparable, not written), then the files."""
    for note in written.notes:
        print(f"note: {note}")
    for path in written.paths:
        print(f"wrote {path}")


def _add_setting_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--setting",
        action="append",
        dest="settings",
        metavar="SETTING",
        help="only the runs of this setting, as the tables mark them (e.g. keras3, mixed_bfloat16; "
        "paper: the paper's own); repeat for several; default: all",
    )


def add_tables_command(sub) -> None:
    p = sub.add_parser("tables", help="Tables 2b-2d from run directories, beside the paper's")
    p.add_argument("--runs", default="runs", help="the runs root (RUNS/ptb/..., RUNS/ud/...)")
    p.add_argument("--out", default="results", help="where the files go (a directory)")
    _add_setting_option(p)
    p.set_defaults(func=cmd_tables)


def add_plot_command(sub) -> None:
    p = sub.add_parser("plot", help="learning curves (Table 2a, Figure 2) as PNG and PDF")
    p.add_argument("--runs", default="runs", help="the runs root (RUNS/ptb/..., RUNS/ud/...)")
    p.add_argument("--out", default="results", help="where the files go (a directory)")
    _add_setting_option(p)
    p.add_argument(
        "--band",
        choices=("minmax", "std", "ci"),
        default="ci",
        help="the band around each mean: min to max over seeds, ± their std, or the 95%% t-interval of the mean",
    )
    p.add_argument(
        "--include-running",
        action="store_true",
        help="also draw the runs still training (config.json and history.csv, no result.json yet): "
        "dashed, marked (running) in the legend",
    )
    p.set_defaults(func=cmd_plot)
