"""`convatt.train(...)`: train one run from Python, as `convatt train` does from the shell."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from convatt.errors import ConvattError
from convatt.rundir.run_config import RunConfig, option_default, preset_epochs
from convatt.rundir.run_result import RunResult

JIT = {"auto": "auto", "on": True, "off": False, True: True, False: False}


def _absolute(path: str | Path | None) -> str | None:
    return None if path is None else str(Path(path).expanduser().resolve())


def run_config(
    *,
    preset: str,
    variant: str,
    out: str | Path,
    seed: int = 1,
    data: str | Path | None = None,
    embeddings: str | Path | None = None,
    embeddings_limit: int | None = option_default("embeddings_limit"),
    epochs: int | None = None,
    limit: int | None = None,
    mask_padding: bool = False,
    curve_every: int = option_default("curve_every"),
    curve_until: int = option_default("curve_until"),
    jit_compile: bool | str = "auto",
    precision: str = option_default("precision"),
    protocol: str = "original",
    start_from: str | Path | None = None,
    **protocol_items: str | None,
) -> RunConfig:
    """The `RunConfig` of `convatt train`'s options (`train`'s keywords), unchecked (`RunConfig.check`)."""
    _check_options(protocol_items, jit_compile)
    return RunConfig(
        preset=preset,
        variant=variant,
        seed=seed,
        data=_absolute(data or _default_data(preset)),
        out=str(out),
        embeddings=_absolute(embeddings),
        embeddings_limit=embeddings_limit or None,
        epochs=preset_epochs(preset) if epochs is None else epochs,  # the paper's 100 for the tagger
        limit=limit,
        mask_padding=mask_padding,
        curve_every=curve_every,
        curve_until=curve_until,
        jit_compile=JIT[jit_compile],
        protocol=_protocol(protocol, protocol_items),
        precision=precision,
        start_from=_absolute(start_from),
    )


def _default_data(preset: str) -> Path | None:
    """The embedded corpus a run of `preset` reads without `data` (None: the preset has none)."""
    from convatt.data.formats import data_format

    return data_format(preset).default_data


def _protocol(name: str, items: dict[str, str | None]):
    """The protocol named `name` ("original" or "keras3") with `items` replacing its choices."""
    from convatt.protocol import TrainingProtocol

    return TrainingProtocol.named(name).with_overrides(**items)


def _check_options(protocol_items: dict, jit_compile) -> None:
    """The options that `RunConfig.check` cannot see: the protocol items' names and `jit_compile`."""
    from convatt.protocol import TrainingProtocol

    items = {f.name for f in TrainingProtocol.items()}
    unknown = sorted(set(protocol_items) - items)
    if unknown:
        raise ConvattError(f"unknown option(s) {', '.join(unknown)}; protocol items are {', '.join(sorted(items))}")
    if jit_compile not in JIT:
        raise ConvattError(f"jit_compile must be 'auto', 'on', 'off', True or False, not {jit_compile!r}")


def train(
    *,
    callbacks: Sequence = (),
    tensorboard: str | Path | None = None,
    log: Callable[[str], None] = print,
    **options,
) -> RunResult:
    """Train (or resume, or read back if finished) one run, as `convatt train`; return its result.

    Keyword arguments are `convatt train`'s options with underscores: `preset=` ("ptb" or
    "ud"), `variant=` (e.g. "san-pe-add-temp"; `convatt params` lists them), `out=` (the run
    directory), and optionally `seed=`, `data=`, `embeddings=`, `embeddings_limit=`, `epochs=`,
    `limit=`, `mask_padding=`, `curve_every=`, `curve_until=`, `jit_compile=` ("auto", "on",
    "off"), `precision=`, `protocol=` ("original" or "keras3") and its items (`optimizer=`,
    `loss=`, ...; see `convatt train --help`), and `start_from=` (a finished run directory:
    start from its weights, the variant's further modifications at identity; `--from`).

    callbacks:   Keras callbacks, called after the run's own (early stopping, checkpoints, ...)
                 with `fit`'s logs: loss, sparse_categorical_accuracy, and at each epoch's end
                 val_sparse_categorical_accuracy (dev) and val_batch_mean_accuracy. A resumed
                 run calls them from the epoch it resumes at.
    tensorboard: a directory for TensorBoard logs (`convatt train --tensorboard DIR`).
    log:         where the run's lines go (default: printed).

    Returns the run's `RunResult` (result.json): dev and test accuracies, epochs, ...
    Bad options or data raise `convatt.errors.ConvattError`.
    """
    from convatt.training.trainer import train_result

    run = run_config(**options)
    run.check()  # bad options fail before Keras is loaded
    return train_result(run, log, list(callbacks), tensorboard)
