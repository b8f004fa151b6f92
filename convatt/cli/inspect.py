"""`convatt inspect`: what a finished run's attention learned."""

from __future__ import annotations

from pathlib import Path

from convatt.cli._common import check_out_dir, load_backend
from convatt.errors import ConvattError
from convatt.rundir.run_config import check_at_least


def cmd_inspect(args) -> None:
    from convatt.inference.loading import check_run_dir

    check_run_dir(args.run)
    check_at_least("--dev-index", args.dev_index, minimum=0)
    check_out_dir("--out", args.out)
    if args.sentence is not None and not args.sentence.split():
        raise ConvattError("--sentence has no words")
    load_backend(args.debug)
    from convatt.inference.inspection import inspect_run

    out = Path(args.out) if args.out else Path(args.run) / "inspect"
    written = inspect_run(args.run, out, sentence=args.sentence, dev_index=args.dev_index, log=print, data=args.data)
    for path in written:
        print(f"wrote {path}")


def add_command(sub) -> None:
    p = sub.add_parser("inspect", help="figures and a CSV of what a finished run's attention learned")
    p.add_argument("run", help="run directory")
    p.add_argument("--out", help="where the figures and CSV go (default: RUN/inspect)")
    p.add_argument("--data", help="the run's corpus, where it is now (default: where its config.json says)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--sentence", help="the sentence whose attention maps are drawn (tokens split on whitespace)")
    which.add_argument(
        "--dev-index", type=int, default=0, help="... or the N-th sentence of the run's dev split (from 0; default 0)"
    )
    p.set_defaults(func=cmd_inspect)
