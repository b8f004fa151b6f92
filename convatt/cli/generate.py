"""`convatt generate`: text from a causal run's model, a symbol at a time."""

from __future__ import annotations

import argparse
import math
import sys
import time

from convatt.cli._common import load_backend
from convatt.errors import ConvattError

PROGRESS_AFTER = 1.0  # seconds: a generation that ends sooner prints no progress line
PROGRESS_EVERY = 0.25  # seconds between updates of the line


def cmd_generate(args) -> None:
    from convatt.inference.generation import Sampling, check_request

    check_options(args)
    request = check_request(args.run, args.prompt, args.length)  # before Keras is loaded
    sampling = Sampling(args.greedy, args.temperature, args.top_k, args.seed)
    load_backend(args.debug)
    from convatt.inference.generation import CausalSteps, check_fits_positions, generate
    from convatt.inference.loading import load_model

    steps = CausalSteps(load_model(request.run))
    check_fits_positions(steps, request.prompt_ids, args.length)
    tracing = time.perf_counter()  # a first short generation traces the steps: the rate below is decoding's
    generate(steps, request.prompt_ids, min(2, args.length), sampling, not args.no_cache)
    tracing = time.perf_counter() - tracing
    progress = ProgressLine() if sys.stderr.isatty() else None
    made = generate(steps, request.prompt_ids, args.length, sampling, not args.no_cache, progress)
    if progress is not None:
        progress.close()
    print(args.prompt + "".join(request.symbols[i] for i in made.ids))
    how = "whole prefix" if args.no_cache else "cached"
    rate = f"{made.symbols_per_second:.1f} symbols/s ({how})"
    print(f"{len(made.ids)} symbols in {made.seconds:.2f} s: {rate}, after {tracing:.2f} s tracing", file=sys.stderr)


def check_options(args: argparse.Namespace) -> None:
    """A ConvattError naming the first sampling option out of its range (before Keras is loaded)."""
    if not math.isfinite(args.temperature) or args.temperature <= 0:
        raise ConvattError(f"--temperature takes a finite number > 0; received {args.temperature}")
    if args.top_k < 0:
        raise ConvattError(f"--top-k takes a whole number >= 0 (0: every symbol); received {args.top_k}")
    if args.seed < 0:
        raise ConvattError(f"--seed takes a whole number >= 0; received {args.seed}")


class ProgressLine:
    """One line on standard error, rewritten as symbols are made: shown once the generation has
    taken PROGRESS_AFTER seconds (a short one prints none), then every PROGRESS_EVERY seconds."""

    def __init__(self) -> None:
        self.shown_at: float | None = None

    def __call__(self, done: int, seconds: float) -> None:
        due = PROGRESS_AFTER if self.shown_at is None else self.shown_at + PROGRESS_EVERY
        if seconds >= due:
            rate = done / max(seconds, 1e-9)
            print(f"\r\033[Kgenerated {done:,} symbols ({rate:.1f}/s)", end="", file=sys.stderr, flush=True)
            self.shown_at = seconds

    def close(self) -> None:
        if self.shown_at is not None:
            print(file=sys.stderr)


def add_command(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="generate text with a finished causal run (charlm; toy: the blocks and the query in, the answer out)",
        description="Generate text after --prompt with a finished causal run's model: a symbol at a time, "
        "with each attention layer's cache (every modification, exactly) or, with --no-cache, by re-running "
        "the whole prefix (the reference). The text goes to standard output, the speed to standard error.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("run", help="run directory of a causal preset (charlm, toy)")
    p.add_argument("--prompt", required=True, help="the text to continue (characters the run saw in training)")
    p.add_argument("--length", type=int, default=100, help="symbols to generate")
    p.add_argument("--greedy", action="store_true", help="always the likeliest symbol (no sampling)")
    p.add_argument(
        "--temperature", type=float, default=1.0, help="sampling: divide the logits by this (a finite number > 0)"
    )
    p.add_argument("--top-k", type=int, default=0, help="sampling: among the k likeliest symbols only (0: all)")
    p.add_argument("--seed", type=int, default=0, help="sampling: the random seed (>= 0)")
    p.add_argument("--no-cache", action="store_true", help="re-run the whole prefix for each symbol (the reference)")
    p.set_defaults(func=cmd_generate)
