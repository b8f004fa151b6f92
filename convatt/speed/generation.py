"""Decoding speed: symbols per second of cached against whole-prefix decoding, in one process.

    python -m convatt.speed.generation [--lengths 128 256 512 1024] [--steps 8] [--variants ...]

For each variant (plain attention and each convolution, at the char LM's scale) and length
`L`, a causal model of `L` positions (random weights) decodes `--steps` symbols at the end of
an `L`-symbol sequence twice: a cached step each (its caches filled with the first symbols in
one call) and a run of the whole prefix each (the reference). It prints both rates and their
ratio; both compiled (a TensorFlow graph, a JAX program), as `convatt generate` runs them.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from convatt.model.variants import CHARLM_VARIANTS, VARIANTS

# Plain attention and each convolution of the char LM's grid (the variants table's names).
TIMED_VARIANTS = [name for name in CHARLM_VARIANTS if name == "san-pe-add" or VARIANTS[name].attention_conv]
N_SYMBOLS = 64


@dataclass(frozen=True)
class DecodingSpeed:
    """One (variant, length): symbols per second of each way and their ratio."""

    variant: str
    length: int
    cached: float
    whole_prefix: float

    @property
    def ratio(self) -> float:
        return self.cached / self.whole_prefix


def _steps(variant: str, length: int):
    from convatt.inference.generation import CausalSteps
    from convatt.sequence.config import make_sequence_config
    from convatt.sequence.model import build_causal_model

    config = make_sequence_config("charlm", variant, max_len=length)
    return CausalSteps(build_causal_model(config, N_SYMBOLS, jit_compile=False))


def _rate(decode, steps: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        decode(0)
    start = time.perf_counter()
    for step in range(steps):
        decode(step)
    return steps / (time.perf_counter() - start)


def measure(variant: str, length: int, steps: int) -> DecodingSpeed:
    """Symbols per second at the end of a `length`-symbol sequence, cached and whole-prefix."""
    ids = list(np.random.default_rng(0).integers(2, N_SYMBOLS, length))
    model = _steps(variant, length)
    first = length - steps
    model.cached_logits(ids[:first], 0)  # the caches hold the first symbols
    cached = _rate(lambda step: model.cached_logits([ids[first + step]], first + step), steps)
    whole = _rate(lambda step: model.whole_prefix_logits(ids[: first + step + 1]), steps)
    return DecodingSpeed(variant, length, cached, whole)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--steps", type=int, default=8, help="symbols timed per (variant, length)")
    parser.add_argument("--variants", nargs="+", default=TIMED_VARIANTS, choices=CHARLM_VARIANTS)
    args = parser.parse_args(argv)
    if args.steps < 1 or min(args.lengths) <= args.steps:
        parser.error("--steps must be >= 1 and below every length")
    print("| variant | length | cached symbols/s | whole-prefix symbols/s | cached / whole |")
    print("|---|---|---|---|---|")
    for variant in args.variants:
        for length in args.lengths:
            speed = measure(variant, length, args.steps)
            print(f"| {variant} | {length:,} | {speed.cached:.1f} | {speed.whole_prefix:.2f} | {speed.ratio:.1f}x |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
