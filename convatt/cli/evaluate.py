"""`convatt evaluate`: a finished run's accuracies on a split, or its per-sentence scores."""

from __future__ import annotations

import sys

from convatt.cli._common import load_backend
from convatt.errors import ConvattError


def cmd_evaluate(args) -> None:
    import json

    load_backend(args.debug)
    from convatt.inference.evaluation import evaluate_run, write_run_sentence_scores

    if args.sentences:
        if args.data is not None:
            raise ConvattError("--sentences scores the run's own corpus, as it trained: leave out --data")
        for path in write_run_sentence_scores(args.run):
            print(f"wrote {path}")
        return
    warn = lambda line: print(f"convatt: {line}", file=sys.stderr)
    print(json.dumps(evaluate_run(args.run, args.data, args.split, warn=warn), indent=2))


def add_command(sub) -> None:
    p = sub.add_parser("evaluate", help="evaluate a finished run's model on a corpus split")
    p.add_argument("run", help="run directory")
    p.add_argument(
        "--data", help="corpus to score (default: the run's own, where its config.json says; moved: its new place)"
    )
    p.add_argument("--split", default="test", choices=["train", "dev", "test"], help="the split scored")
    p.add_argument(
        "--sentences",
        action="store_true",
        help="(re)write the run's per-sentence scores (test_sentences.csv, dev_sentences.csv) from its saved "
        "model, for the significance tables of `convatt tables`",
    )
    p.set_defaults(func=cmd_evaluate)
