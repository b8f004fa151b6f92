"""A run that starts from a finished run's weights (`convatt train --from RUN`).

The new run builds its own variant's model, takes every weight of RUN's model (model.keras,
its best epoch) by its path, and starts each modification RUN's model does not have at
identity (`convatt.layers.conversion.start_as_identity`: identity convolution kernels,
unit temperatures, identity talking heads, zero position biases), so that before any
training it computes what RUN's model computes. Then it trains as any run: a new
optimizer, its own epochs, early stopping, checkpoints; a resumed run continues from its
own checkpoint and never reads RUN again.

Where that cannot hold it is refused before anything is written (`read_source`,
`check_vocabularies`, `copy_source_weights`): RUN unfinished or not a run, another preset,
another vocabulary, an architecture that differs in more than modifications with a start at
identity (another position method, attention layer or protocol), a modification RUN has
that the variant drops, or one with no identity start (ALiBi's fixed biases).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from convatt.errors import ConvattError
from convatt.model.variants import VARIANTS, Variant
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import CONFIG_FILE, FINGERPRINT_KEY, RESULT_FILE, VOCAB_FILE
from convatt.rundir.storage import read_json

IDENTITY_STARTS = ("temperature", "attention_conv", "talking_heads", "position_interaction", "relative_bias", "shaw")
"""`Variant` fields of modifications that start at identity: a variant may add them to RUN's."""
CONV_DETAILS = ("conv_before_softmax", "conv_kernel")  # free where RUN has no convolution, else equal
NO_IDENTITY_START = {"alibi": "ALiBi's biases are fixed slopes, not weights: they cannot start at identity"}


@dataclass(frozen=True)
class SourceRun:
    """The finished run a run started from: result.json's `started_from`."""

    path: str  # the source run's directory (absolute)
    variant: str
    seed: int
    corpus: str
    epochs_run: int
    best_epoch: int  # whose weights the run starts from (the source's model.keras)
    dev: float | None  # the source's dev score (result.json's dev.all)
    dev_bits_per_symbol: float | None  # a causal sequence task's
    source_commit: str
    backend: str
    machine: str
    same_data: bool = False  # the same data fingerprint (and batch size) as the source
    start_step: int | None = None  # the source's batches up to its best epoch, where same_data
    dev_at_start: float | None = None  # this run's dev score before training (the source's, converted)
    dev_bits_at_start: float | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def of(cls, path: Path, result: RunResult) -> SourceRun:
        return cls(
            path=str(path),
            variant=result.variant,
            seed=result.seed,
            corpus=result.corpus,
            epochs_run=result.epochs_run,
            best_epoch=result.best_epoch,
            dev=result.dev.get("all"),
            dev_bits_per_symbol=result.dev.get("bits_per_symbol"),
            source_commit=result.source_commit,
            backend=result.backend,
            machine=result.machine,
        )


def read_source(run: RunConfig) -> SourceRun:
    """The finished run `run.start_from` names; a ConvattError naming
    `--from` where the run cannot start from it (unfinished, another preset or architecture)."""
    path = Path(run.start_from)
    if not (path / CONFIG_FILE).is_file():
        what = "not found" if not path.exists() else "not a convatt run directory (no config.json)"
        raise ConvattError(f"--from: {what}", path)
    if not (path / RESULT_FILE).is_file():
        raise ConvattError(
            "--from: this run has not finished (no result.json): finish it first (rerun its command, "
            "it resumes), then start from it",
            path,
        )
    source = RunConfig.load(path)
    if source.preset != run.preset:
        raise ConvattError(f"--from: a run of another preset ({source.preset}, not {run.preset})", path)
    refusal = variant_refusal(VARIANTS[source.variant], VARIANTS[run.variant])
    if refusal:
        raise ConvattError(f"--from: {run.variant} cannot start from a {source.variant} run: {refusal}", path)
    _check_same_network(source, run, path)
    return SourceRun.of(path.resolve(), RunResult.load(path))


def variant_refusal(source: Variant, target: Variant) -> str | None:
    """Why a model of `target` cannot start as `source`'s model at identity; None where it can:
    `target` has `source`'s modifications and more, each of them with an identity start."""
    for field in dataclasses.fields(Variant):
        old, new = getattr(source, field.name), getattr(target, field.name)
        if field.name in ("name", "label") or old == new:
            continue
        if field.name in NO_IDENTITY_START:
            return NO_IDENTITY_START[field.name] if new else f"{target.name} drops {source.label}'s ALiBi"
        if field.name in IDENTITY_STARTS and not old:
            continue
        if field.name in CONV_DETAILS and not source.attention_conv:
            continue
        if field.name in IDENTITY_STARTS or field.name in CONV_DETAILS:
            return f"it changes {field.name} ({old!r} -> {new!r}), which the source run has trained"
        return (
            f"the architecture differs in {field.name} ({old!r} -> {new!r}); only modifications with a "
            f"start at identity ({', '.join(IDENTITY_STARTS)}) can be added"
        )
    return None


def _check_same_network(source: RunConfig, run: RunConfig, where: Path) -> None:
    """What shapes the network beyond the variant (the protocol's residual, initialisers, masking)
    is the source's; the precision and training options may differ."""
    from convatt.data.formats import is_sequence_preset

    if is_sequence_preset(run.preset):
        return  # the causal model's architecture is its variant's and its data's (checked by the weights)
    theirs = source.tagger_config().replace(variant=run.variant)
    differ = [
        f"{f.name} ({getattr(theirs, f.name)!r} -> {getattr(run.tagger_config(), f.name)!r})"
        for f in dataclasses.fields(theirs)
        if getattr(theirs, f.name) != getattr(run.tagger_config(), f.name)
    ]
    if differ:
        raise ConvattError(f"--from: the network differs from this run's in {', '.join(differ)}", where)


def check_vocabularies(source_dir: str | Path, vocabularies: dict) -> None:
    """The run's vocabularies (vocab.json's content) are the source run's: an embedding row
    means the same symbol in both."""
    path = Path(source_dir) / VOCAB_FILE
    theirs = read_json(path)
    differ = [name for name in sorted(set(theirs) | set(vocabularies)) if theirs.get(name) != vocabularies.get(name)]
    if differ:
        raise ConvattError(
            f"--from: this run's data give other vocabularies ({', '.join(differ)}) than the run it starts "
            "from was trained with; start from a run of the same data",
            path,
        )


def same_data(source_dir: str | Path, fingerprint: dict, batch_size: int) -> bool:
    """Whether the run trains on the data (and batches) the source run trained on."""
    config = read_json(Path(source_dir) / CONFIG_FILE)
    as_read = json.loads(json.dumps(fingerprint))  # the form config.json holds it in
    return config.get(FINGERPRINT_KEY) == as_read and config.get("batch_size") == batch_size


def copy_source_weights(model, source_model, causal: bool) -> None:
    """`model`'s modifications at identity, then every weight of `source_model` copied by its
    path; a ConvattError where a weight has no place or another shape, or where `model` has a
    weight that is neither `source_model`'s nor a modification's."""
    from convatt.layers._keras_compat import sublayers
    from convatt.layers.conversion import start_as_identity
    from convatt.layers.core.modified_attention import ModifiedAttention

    attention = [layer for layer in sublayers(model) if isinstance(layer, ModifiedAttention)]
    for layer in attention:
        start_as_identity(layer, causal=causal)
    ours = {variable.path: variable for variable in model.weights}
    modification = {id(w) for layer in attention for w in layer._modification_variables()}
    theirs = {variable.path: variable for variable in source_model.weights}
    problems = [f"{p} has no place in this model" for p in theirs if p not in ours]
    problems += [
        f"{p} is {tuple(v.shape)} there, {tuple(ours[p].shape)} here"
        for p, v in theirs.items()
        if p in ours and tuple(v.shape) != tuple(ours[p].shape)
    ]
    new = [p for p, v in ours.items() if p not in theirs and id(v) not in modification]
    problems += [f"{p} is new and not a modification's" for p in new]
    if problems:
        shown = "; ".join(problems[:4]) + (f"; and {len(problems) - 4} more" if len(problems) > 4 else "")
        raise ConvattError(f"--from: the source run's model does not fit this run's architecture: {shown}")
    for path, variable in theirs.items():
        ours[path].assign(variable.value)
