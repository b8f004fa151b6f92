"""`convatt score`: tagged CoNLL-U against gold, also where the tokenisations differ."""

from __future__ import annotations

import json
from dataclasses import asdict


def cmd_score(args) -> None:
    from convatt.results.scoring import score_files

    report = score_files(args.gold, args.system, args.column)
    if args.json:
        print(json.dumps({**asdict(report), "same_tokenisation": report.same_tokenisation}, indent=1))
    else:
        print("\n".join(report.lines()))


def add_command(sub) -> None:
    p = sub.add_parser(
        "score",
        help="score tagged CoNLL-U against gold: accuracy, or the CoNLL 2018 aligned F1 where tokenisations differ",
    )
    p.add_argument("gold", help="gold CoNLL-U file (.gz allowed)")
    p.add_argument("system", help="tagged CoNLL-U file of the same text, e.g. `convatt tag` output")
    p.add_argument("--column", choices=["upos", "xpos"], default="upos", help="the tag scored (default upos)")
    p.add_argument("--json", action="store_true", help="counts as JSON")
    p.set_defaults(func=cmd_score)
