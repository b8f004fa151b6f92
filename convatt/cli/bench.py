"""`convatt bench`: training throughput against a straightforward port; with `--attention`,
convatt's `MultiHeadAttention` against Keras' own layer."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from convatt.cli._common import load_backend, precisions
from convatt.errors import ConvattError

TAGGER_DEFAULTS = {  # the tagger benchmark's options (`run_benchmark`'s arguments) and their defaults
    "preset": "ptb",
    "variant": "san-pe-add",
    "precision": "float32",
    "memory": False,
    "reference": "auto",
}
ATTENTION_OPTIONS = {  # option -> AttentionSettings field
    "lengths": "lengths",
    "masks": "masks",
    "cases": "cases",
    "batch_size": "batch_size",
    "heads": "num_heads",
    "key_dim": "key_dim",
    "repeats": "repeats",
    "warmup": "warmup",
    "jit_compile": "jit_compile",
    "cross_backend": "cross_backend",
}


def _check_options(args) -> None:
    """Options of the other benchmarks are refused, not ignored."""
    blocked_only = [n for n in ("block", "run_below") if getattr(args, n) is not None]
    if blocked_only:
        raise ConvattError(f"--{blocked_only[0].replace('_', '-')} is an option of --blocked")
    if args.forms is not None:
        given = [n for n, default in TAGGER_DEFAULTS.items() if n != "preset" and getattr(args, n) != default]
        given += [n for n in (*ATTENTION_OPTIONS, "out") if n != "repeats" and getattr(args, n) is not None]
        if args.attention or given:
            raise ConvattError(
                f"--{'attention' if args.attention else given[0].replace('_', '-')} is not an option of --forms"
            )
        return
    if args.attention:
        shared = ("precision",)  # the dtype policy of both benchmarks
        wrong = [n for n, default in TAGGER_DEFAULTS.items() if n not in shared and getattr(args, n) != default]
        what = "the tagger's benchmark (leave out --attention)"
    else:
        wrong = [name for name in (*ATTENTION_OPTIONS, "out") if getattr(args, name) is not None]
        what = "--attention" if wrong != ["repeats"] else "--attention and --forms"
    if wrong:
        raise ConvattError(f"--{wrong[0].replace('_', '-')} is an option of {what}")


def _attention_settings(args):
    """`AttentionSettings` of the options given; the --quick ones or the defaults for the others."""
    from convatt.speed.attention_bench import QUICK_SETTINGS, AttentionSettings, check_settings

    given = {field: getattr(args, option) for option, field in ATTENTION_OPTIONS.items()}
    given = {field: tuple(v) if isinstance(v, list) else v for field, v in given.items() if v is not None}
    if "jit_compile" in given:
        given["jit_compile"] = tuple(dict.fromkeys(value == "true" for value in given["jit_compile"]))
    given["dtype_policy"] = args.precision
    settings = dataclasses.replace(QUICK_SETTINGS if args.quick else AttentionSettings(), **given)
    try:
        check_settings(settings)
    except ValueError as e:
        raise ConvattError(str(e)) from e
    return settings


def _check_out(path: str | None) -> None:
    """A CSV path that cannot be written is refused before the benchmark runs."""
    if path is not None and (Path(path).is_dir() or not Path(path).parent.is_dir()):
        raise ConvattError(f"--out {path}: not a file in an existing directory")


def _bench_attention(args) -> None:
    _check_out(args.out)
    load_backend(args.debug)
    settings = _attention_settings(args)
    from convatt.speed.attention_bench import render_markdown, run_attention_benchmark, write_csv

    def keep(result) -> None:  # the CSV rewritten after each length and mask: an interrupted run keeps those
        try:
            write_csv(result, args.out)
        except OSError as e:
            raise ConvattError(f"{args.out}: {e.strerror}") from e

    result = run_attention_benchmark(settings, measured=keep if args.out else None)
    print()
    print(render_markdown(result), end="")
    if args.out:
        print(f"wrote {args.out}")


def _bench_forms(args) -> None:
    from convatt.model.variants import check_variant

    for variant in args.forms:
        check_variant(variant)
    load_backend(args.debug)
    from convatt.speed.forms_bench import forms_variants, run_forms_benchmark

    without = [v for v in args.forms if v not in forms_variants()]
    if without:
        raise ConvattError(f"--forms {without[0]}: its attention is no SelfAttention (no forms to compare)")
    options = {} if args.repeats is None else {"repeats": args.repeats}
    run_forms_benchmark(args.forms, args.preset, args.quick, **options)


def _bench_blocked(args) -> None:
    """`--blocked`: the attention in blocks of queries against the whole matrix and Keras' layer."""
    wrong = [n for n in ("masks", "batch_size", "heads", "key_dim", "warmup", "out") if getattr(args, n) is not None]
    if args.attention or args.forms is not None or wrong:
        given = "attention" if args.attention else "forms" if args.forms is not None else wrong[0]
        raise ConvattError(f"--{given.replace('_', '-')} is not an option of --blocked")
    load_backend(args.debug)
    from convatt.speed.blocked_bench import BlockedSettings, render_markdown, run_blocked_benchmark

    given = {"lengths": args.lengths, "cases": args.cases, "repeats": args.repeats, "block": args.block}
    if args.run_below is not None:
        given["memory_limit"] = int(args.run_below * 2**30)
    settings = dataclasses.replace(BlockedSettings(), **{k: tuple(v) if isinstance(v, list) else v
                                                         for k, v in given.items() if v is not None})  # fmt: skip
    try:
        rows = run_blocked_benchmark(settings)
    except ValueError as e:
        raise ConvattError(f"--blocked: {e}") from None
    print(render_markdown(rows, settings), end="")


def cmd_bench(args) -> None:
    if args.blocked:
        _bench_blocked(args)
        return
    _check_options(args)
    if args.attention:
        _bench_attention(args)
        return
    if args.forms is not None:
        _bench_forms(args)
        return
    load_backend(args.debug)
    from convatt.speed.bench import run_benchmark

    run_benchmark(quick=args.quick, **{name: getattr(args, name) for name in TAGGER_DEFAULTS})


def add_command(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="training throughput against a straightforward port; --attention: the attention layer against Keras'",
    )
    p.add_argument("--preset", default="ptb", help="model sizes of this data format, on synthetic batches")
    p.add_argument("--variant", default="san-pe-add", help="the variant timed")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a short run (under 5 minutes on 2 cores); with --attention, tiny lengths and one repeat (seconds)",
    )
    p.add_argument(
        "--precision",
        choices=precisions(),
        default="float32",
        help="float32: the tagger against the port; mixed_*: the tagger in that dtype policy "
        "against the tagger in float32 (speedup of mixed precision); with --attention, every layer's dtype "
        "policy (on a GPU under JAX a mixed one adds Keras' flash attention as a reference)",
    )
    p.add_argument(
        "--memory",
        action="store_true",
        help="also the peak memory of each model, each trained in a process of its own (Linux)",
    )
    p.add_argument(
        "--reference",
        default="auto",
        help="what to time against: 'auto' (the straightforward port where it has the variant, "
        "else san-pe-add built the same way) or a variant name, e.g. san-pe-add",
    )
    _add_attention_options(p)
    _add_forms_options(p)
    _add_blocked_options(p)
    p.set_defaults(func=cmd_bench)


def _switch_group(p, flag: str, description: str, help: str):
    """An argument group named after `flag`, holding that flag as its on/off switch first."""
    g = p.add_argument_group(flag, description)
    g.add_argument(flag, action="store_true", help=help)
    return g


def _add_blocked_options(p) -> None:
    g = _switch_group(
        p,
        "--blocked",
        "one training step of one layer at long context: convatt's MultiHeadAttention in blocks of queries "
        "(query_block) against the whole matrix and Keras' layer, planned memory (JAX) and time; "
        "--lengths, --cases and --repeats apply",
        help="benchmark the blocked attention",
    )
    g.add_argument(
        "--block",
        type=lambda text: text if text == "auto" else int(text),
        help="queries per block, or 'auto' (query_block='auto': blocks only past 256 MiB of attention matrix, "
        "of the size it picks) (default: 256)",
    )
    g.add_argument(
        "--run-below",
        type=float,
        metavar="GIB",
        help="run (time) only the steps whose planned memory (temporaries, arguments, outputs) is below this many "
        "GiB (default: 6; 0: plan only)",
    )


def _add_forms_options(p) -> None:
    g = p.add_argument_group(
        "--forms",
        "the tagger of each variant as it computes (the operations of its published results) against the "
        "same tagger with MultiHeadAttention's rewritten attention forms, in one process: the first epoch's "
        "seconds (tracing included) and the later epochs', ratios; --preset, --quick and --repeats apply",
    )
    g.add_argument(
        "--forms",
        nargs="*",
        metavar="VARIANT",
        help="benchmark these variants' forms (none named: every variant with a SelfAttention)",
    )


def _add_attention_options(p) -> None:
    g = _switch_group(
        p,
        "--attention",
        "forward + backward time of convatt's MultiHeadAttention with each modification against Keras' "
        "MultiHeadAttention (ratios, one process), and peak memory under JAX (the compiled step's memory "
        "analysis); a Markdown table",
        help="benchmark the attention layer instead of the tagger",
    )
    g.add_argument("--lengths", type=int, nargs="+", help="sequence lengths (default: 64 128 256 512 1024)")
    g.add_argument(
        "--masks", nargs="+", choices=("causal", "bidirectional"), help="the masks (default: causal bidirectional)"
    )
    g.add_argument(
        "--cases",
        nargs="+",
        help="the modifications by key, e.g. conv2d mta (Multi-Token Attention's convolution) (default: all; "
        "an unknown key lists them)",
    )
    g.add_argument("--batch-size", type=int, help="batch size (default: 2)")
    g.add_argument("--heads", type=int, help="number of heads (default: 4)")
    g.add_argument("--key-dim", type=int, help="size of a head (default: 32)")
    g.add_argument(
        "--repeats",
        type=int,
        help="timed steps per layer, their median reported (default: 5); with --forms, fresh pairs of "
        "models per variant (default: 3)",
    )
    g.add_argument("--warmup", type=int, help="untimed steps per layer first (default: 1)")
    _add_compilation_options(g)
    g.add_argument("--out", help="also write the figures to this CSV file")


def _add_compilation_options(g) -> None:
    """--attention's choice of compilations (TensorFlow's) and of the cross-backend table."""
    g.add_argument(
        "--jit-compile",
        nargs="+",
        choices=("true", "false"),
        help="TensorFlow: time `fit`'s step compiled with XLA (true), without (false) or both (default: true false; "
        "JAX always compiles with XLA)",
    )
    g.add_argument(
        "--cross-backend",
        action=argparse.BooleanOptionalAction,
        help="also Keras' layer under each backend, each in a process of its own, against the fastest "
        "(default: on; off with --quick)",
    )
