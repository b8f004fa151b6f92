"""`convatt train`: train and evaluate one run."""

from __future__ import annotations

import argparse

from convatt.cli._common import load_backend, precisions
from convatt.rundir.run_config import option_default


def cmd_train(args) -> None:
    run = run_config_of(args)
    run.check(flags=True)  # bad arguments fail before Keras is loaded
    load_backend(args.debug)
    from convatt.training.trainer import train_run

    train_run(run, tensorboard=args.tensorboard)


def run_config_of(args: argparse.Namespace):
    """The `RunConfig` of `convatt train`'s parsed options (`convatt.train`'s, from the shell)."""
    from convatt.protocol import TrainingProtocol
    from convatt.training.api import run_config

    items = {f.name: getattr(args, f.name) for f in TrainingProtocol.items()}
    options = ("seed", "embeddings", "embeddings_limit", "epochs", "limit", "mask_padding", "curve_every")
    options += ("curve_until", "jit_compile", "precision", "protocol", "start_from")
    return run_config(
        preset=args.preset,
        variant=args.variant,
        out=args.out,
        data=args.data,
        **{name: getattr(args, name) for name in options},
        **items,
    )


def _add_protocol_options(p: argparse.ArgumentParser) -> None:
    from convatt.protocol import ORIGINAL, PROTOCOL_NAMES, TrainingProtocol

    p.add_argument(
        "--protocol",
        choices=PROTOCOL_NAMES,
        default=ORIGINAL,
        help="train as the paper's code (original, Keras 2.2.4) or with Keras 3's defaults "
        "(keras3); the options below change one item of it (ablations)",
    )
    group = p.add_argument_group("protocol items (default: the --protocol's)")
    for item in TrainingProtocol.items():
        choices = list(dict.fromkeys(item.metadata["choices"].values()))
        group.add_argument("--" + item.name.replace("_", "-"), choices=choices, help=item.metadata["help"])


def add_command(sub) -> None:
    p = sub.add_parser("train", help="train and evaluate one run (resumes an interrupted one)")
    _add_data_options(p)
    _add_training_options(p)
    _add_compute_options(p)
    p.add_argument("--out", required=True, help="run directory")
    p.add_argument(
        "--from",
        dest="start_from",
        metavar="RUN",
        help="start from the weights of the finished run RUN (same preset, vocabulary and architecture), "
        "the --variant's further modifications at identity, so that it first computes what RUN's model "
        "computes (a new optimizer; a resumed run continues from its own checkpoint)",
    )
    p.add_argument(
        "--tensorboard",
        metavar="DIR",
        help="write TensorBoard logs to DIR: loss, train and dev accuracy per epoch, the dev curve",
    )
    _add_protocol_options(p)
    p.set_defaults(func=cmd_train)


def _add_data_options(p: argparse.ArgumentParser) -> None:
    """What the run trains: the data format, the variant, its seed, the data and word vectors."""
    p.add_argument(
        "--preset",
        required=True,
        help="the data format: ptb or ud (the tagger), toy or charlm (causal sequence tasks; convatt.data.formats)",
    )
    p.add_argument("--variant", required=True, help="e.g. san-pe-add (see `convatt params`)")
    p.add_argument("--seed", type=int, default=1, help="seeds the weights, dropout and batch order (0 to 2**32 - 1)")
    p.add_argument(
        "--data",
        help="PTB: directory or tar archive of .mrg files; UD: one treebank directory "
        "(default: the embedded PTB sample / UD_English-LinES)",
    )
    p.add_argument("--embeddings", help="fastText vectors, .vec or .bin (PTB preset)")
    p.add_argument(
        "--embeddings-limit",
        type=int,
        default=option_default("embeddings_limit"),
        help="read the first N vectors of a .vec file, as the paper (0: all)",
    )


def _add_training_options(p: argparse.ArgumentParser) -> None:
    """How long it trains, on how much, PAD masking, and the dev curve."""
    p.add_argument(
        "--epochs",
        type=int,
        help=f"maximum epochs (early stopping, patience {option_default('patience')}; default: "
        f"{option_default('epochs')}, the paper's, for the tagger; the toy and charlm presets' own)",
    )
    p.add_argument("--limit", type=int, help="use at most N sentences per split (smoke runs)")
    p.add_argument("--mask-padding", action="store_true", help="mask PAD keys in attention (not in the paper)")
    p.add_argument(
        "--curve-every", type=int, default=option_default("curve_every"), help="dev accuracy every N batches (Figure 2)"
    )
    p.add_argument(
        "--curve-until",
        type=int,
        default=option_default("curve_until"),
        help="... up to this global batch (-1: always)",
    )


def _add_compute_options(p: argparse.ArgumentParser) -> None:
    """How the steps compute: XLA and the dtype policy."""
    p.add_argument(
        "--jit-compile",
        choices=["auto", "on", "off"],
        default="auto",
        help="XLA compilation; auto: on with JAX and on GPUs, off for TensorFlow on a CPU (slower there)",
    )
    p.add_argument(
        "--precision",
        choices=precisions(),
        default=option_default("precision"),
        help="Keras dtype policy (float32: the paper's; mixed_bfloat16 is ~2x faster on CPUs with "
        "AVX512-BF16 and on GPUs); weights and the optimizer stay float32",
    )
