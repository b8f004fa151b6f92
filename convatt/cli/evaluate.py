"""`convatt evaluate`: a finished run's accuracies on a split."""

from __future__ import annotations

import sys

from convatt.cli._common import load_backend


def cmd_evaluate(args) -> None:
    import json

    load_backend(args.debug)
    from convatt.trained.evaluation import evaluate_run

    warn = lambda line: print(f"convatt: {line}", file=sys.stderr)
    print(json.dumps(evaluate_run(args.run, args.data, args.split, warn=warn), indent=2))


def add_command(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a finished run's model on a corpus split")
    p.add_argument("run", help="run directory")
    p.add_argument("--data", help="corpus (default: the run's own)")
    p.add_argument("--split", default="test", choices=["train", "dev", "test"])
    p.set_defaults(func=cmd_evaluate)
