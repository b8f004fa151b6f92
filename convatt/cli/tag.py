"""`convatt tag`: tag text with a finished run."""

from __future__ import annotations

import sys
from pathlib import Path

from convatt.cli._common import load_backend
from convatt.errors import ConvattError


def cmd_tag(args) -> None:
    from convatt.data.untagged import iter_blocks
    from convatt.inference.loading import check_run_dir

    check_run_dir(args.run)  # bad arguments and bad input fail before Keras is loaded
    if args.output not in (None, "-") and Path(args.output).is_dir():
        raise ConvattError(f"--output {args.output} is a directory, expected a file")
    source = None if args.input in (None, "-") else args.input
    tokenizer = args.tokenizer if args.format == "text" else None
    blocks = iter_blocks(source, args.format, sys.stdin.buffer if source is None else None, tokenizer or "none")
    first = next(blocks, None)  # reads (and checks) the first sentence before Keras is loaded
    load_backend(args.debug)
    import itertools

    from convatt.inference.tagging import tag_run
    from convatt.rundir.storage import write_atomically

    blocks = itertools.chain([first] if first else [], blocks)
    log = lambda line: print(("\r\033[K" if sys.stderr.isatty() else "") + line, file=sys.stderr)
    progress = _show_progress if sys.stderr.isatty() else None
    tag = lambda write: tag_run(args.run, blocks, write, log, args.keep_columns, tokenizer, progress)
    if args.output in (None, "-"):
        tag(sys.stdout.write)
    else:

        def to_file(tmp: Path) -> None:
            with open(tmp, "w", encoding="utf-8") as f:
                tag(f.write)

        write_atomically(Path(args.output), to_file)


def _show_progress(stats) -> None:
    rate = stats.tokens / max(stats.seconds, 1e-9)
    print(
        f"\r\033[Ktagged {stats.sentences:,} sentences, {stats.tokens:,} tokens ({rate:,.0f} tokens/s)",
        end="",
        file=sys.stderr,
        flush=True,
    )


def add_command(sub) -> None:
    p = sub.add_parser("tag", help="tag CoNLL-U, raw text or vertical text with a finished run's model; CoNLL-U out")
    p.add_argument("run", help="run directory")
    p.add_argument("--input", help="file to tag, .gz allowed (default, or -: standard input)")
    p.add_argument("--output", help="CoNLL-U file to write (default, or -: standard output)")
    p.add_argument(
        "--format",
        choices=["conllu", "text", "vertical"],
        default="conllu",
        help="input format: conllu (FORM is read); text (raw text: tokenised and split into sentences, "
        "blank lines separate paragraphs); vertical (a token per line, a blank line after each sentence, "
        "an optional second column ignored); default conllu",
    )
    p.add_argument(
        "--tokenizer",
        choices=["syntok", "none"],
        default="syntok",
        help="--format text: syntok (rule-based, UD English clitic splits: don't -> do n't) or none "
        "(a sentence per line, tokens split on whitespace); default syntok",
    )
    p.add_argument(
        "--keep-columns",
        action="store_true",
        help="CoNLL-U input: keep LEMMA, the other tag, FEATS, HEAD, DEPREL and DEPS as read "
        "(default: emptied to _, the model did not predict them)",
    )
    p.set_defaults(func=cmd_tag)
