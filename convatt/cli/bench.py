"""`convatt bench`: training throughput against a straightforward port."""

from __future__ import annotations

from convatt.cli._common import load_backend, precisions


def cmd_bench(args) -> None:
    load_backend(args.debug)
    from convatt.speed.bench import run_benchmark

    run_benchmark(
        preset=args.preset,
        variant=args.variant,
        quick=args.quick,
        precision=args.precision,
        memory=args.memory,
        reference=args.reference,
    )


def add_command(sub) -> None:
    p = sub.add_parser("bench", help="training throughput against a straightforward port")
    p.add_argument("--preset", default="ptb", help="model sizes of this data format, on synthetic batches")
    p.add_argument("--variant", default="san-pe-add", help="the variant timed")
    p.add_argument("--quick", action="store_true", help="a short run (under 5 minutes on 2 cores)")
    p.add_argument(
        "--precision",
        choices=precisions(),
        default="float32",
        help="float32: the tagger against the port; mixed_*: the tagger in that dtype policy "
        "against the tagger in float32 (speedup of mixed precision)",
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
    p.set_defaults(func=cmd_bench)
