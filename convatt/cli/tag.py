"""`convatt tag`: tag text with a finished run."""

from __future__ import annotations

import sys
from pathlib import Path

from convatt.cli._common import load_backend
from convatt.errors import ConvattError


def cmd_tag(args) -> None:
    from convatt.data.untagged import read_untagged
    from convatt.trained.loading import check_run_dir

    check_run_dir(args.run)  # bad arguments and bad input fail before Keras is loaded
    if args.output not in (None, "-") and Path(args.output).is_dir():
        raise ConvattError(f"--output {args.output} is a directory, expected a file")
    stdin = sys.stdin.buffer.read() if args.input in (None, "-") else None
    blocks = read_untagged(None if stdin is not None else args.input, args.format, stdin)
    from convatt.run.storage import write_text

    load_backend(args.debug)
    from convatt.trained.tagging import tag_run

    text = tag_run(args.run, blocks, log=lambda line: print(line, file=sys.stderr))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        write_text(Path(args.output), text)


def add_command(sub) -> None:
    p = sub.add_parser("tag", help="tag CoNLL-U or plain text with a finished run's model; CoNLL-U out")
    p.add_argument("run", help="run directory")
    p.add_argument("--input", help="file to tag (default, or -: standard input)")
    p.add_argument("--output", help="CoNLL-U file to write (default, or -: standard output)")
    p.add_argument(
        "--format",
        choices=["conllu", "text"],
        default="conllu",
        help="input format: CoNLL-U (FORM is read) or text (a sentence per line, "
        "tokens split on whitespace); default conllu",
    )
    p.set_defaults(func=cmd_tag)
