"""`convatt params | train | status | evaluate | tag | score | generate | inspect | tables | plot | bench`

One module per command (`add_command` registers it, its `cmd_<name>` carries it out); `_common`
has what they share."""

from __future__ import annotations

import argparse
import signal
import sys

from convatt import __version__
from convatt.cli import bench, evaluate, generate, inspect, params, results, score, status, tag, train
from convatt.cli._common import check_backend, error_message, quiet_backend
from convatt.cli._streams import READER_GONE, closed_stdout_message, discard_stdout, open_closed_stdout, stdout_gone
from convatt.errors import ConvattError
from convatt.training import interrupt


class DefaultsFormatter(argparse.HelpFormatter):
    """Each option's help ends with its default, where it has one worth saying (not None,
    not a flag's False, not already in the text)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if default in (None, False, argparse.SUPPRESS) or "%(default)" in text or "default" in text.lower():
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class CommandParser(argparse.ArgumentParser):
    """A command's parser: help with every option's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)


# What a command writes to standard output as its product, given its options (None: its
# product is files, and standard output carries progress only), and where else it can write
# it. With standard output closed, a command whose product would go there is an error.
STDOUT_PRODUCTS = {
    "params": lambda args: "the parameter counts",
    "status": lambda args: "the runs' status",
    "evaluate": lambda args: None if args.sentences else "the scores (JSON)",
    "tag": lambda args: "the tagged CoNLL-U" if args.output in (None, "-") else None,
    "score": lambda args: "the scores",
    "bench": lambda args: None if getattr(args, "out", None) else "the benchmark's figures",
    "generate": lambda args: "the generated text",
}
INTERRUPTED_NOTES = {"train": "; finished epochs are kept: rerun the same command to resume"}
"""What an interrupted command keeps, where it keeps something (the others: nothing to resume)."""
OTHER_OUTPUTS = {"tag": " or give --output FILE", "bench": " or give --attention --out FILE"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convatt", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks on errors")
    parser.add_argument("--version", action="version", version=f"convatt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for add_command in (
        params.add_command,
        train.add_command,
        status.add_command,
        evaluate.add_command,
        tag.add_command,
        score.add_command,
        generate.add_command,
        inspect.add_command,
        results.add_tables_command,
        results.add_plot_command,
        bench.add_command,
    ):
        add_command(sub)
    return parser


def _interrupt(signum, frame):
    interrupt.request_stop()  # seen by the training loop even if the exception below is swallowed
    raise KeyboardInterrupt


def one_line(message: str) -> str:
    """`message`'s lines joined by spaces; spaces within a line kept (a quoted field may hold two)."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status. Standard output closed at the start is an error where
    the command's product would go there (`STDOUT_PRODUCTS`), else its progress is discarded;
    its reader gone (`| head`) stops the command quietly with status 141, as a shell's tools do."""
    closed = open_closed_stdout()
    try:
        try:
            return run_command(argv, closed)
        finally:
            sys.stdout.flush()  # a reader gone shows here, not as Python's complaint at exit
    except Exception as e:  # an OSError, or a ConvattError raised from one
        if not stdout_gone(e):
            raise
        discard_stdout()
        return READER_GONE


def _closed_stdout_error(product: str, command: str = "") -> int:
    print(f"convatt: error: {closed_stdout_message(product, OTHER_OUTPUTS.get(command, ''))}", file=sys.stderr)
    return 2


def run_command(argv: list[str] | None, stdout_closed: bool = False) -> int:
    """Parse the command line and run its command; every error is one line on stderr.
    `stdout_closed`: standard output was closed at the start (see `main`)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help and --version print, then exit 0; a bad option exits 2
        if e.code == 0 and stdout_closed:
            return _closed_stdout_error("the version" if "--version" in (argv or sys.argv) else "the help")
        raise
    product = STDOUT_PRODUCTS.get(args.command, lambda args: None)(args)
    if stdout_closed and product:
        return _closed_stdout_error(product, args.command)
    for signum in (signal.SIGINT, signal.SIGTERM):  # one stop path for Ctrl-C, kill and preemption
        signal.signal(signum, _interrupt)
    try:
        check_backend()
        quiet_backend()
        args.func(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"\nconvatt: interrupted{INTERRUPTED_NOTES.get(args.command, '')}", file=sys.stderr)
        return 130
    except Exception as e:  # every error ends in one line; --debug shows the traceback
        if args.debug or stdout_gone(e):
            raise
        print(f"convatt: error: {one_line(error_message(e))}", file=sys.stderr)
        return 2 if isinstance(e, (ConvattError, OSError)) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
