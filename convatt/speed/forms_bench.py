"""`convatt bench --forms`: the tagger's attention forms against the rewritten ones, per variant.

The tagger's `SelfAttention` computes the operations its published results came from (commit
7af1535's; tests/test_layers_tagger_computation.py holds every variant to them, bit for bit).
`MultiHeadAttention` takes forms rewritten for speed and memory (`convatt.layers.forms.drop_in_forms`:
+Conv2d as shifted multiply-adds with their own gradient, the talking heads' mixing as one
batched product, Shaw's skews under XLA, the lean softmax, the queries scaled first); at commit
b825de3 the tagger took the first three too. This benchmark trains each variant's tagger both
ways in one process, on the same synthetic batches (`convatt.speed.bench.synthetic_batches`):
`repeats` fresh pairs of models (the same initial weights), each trained `epochs` epochs of
`steps` batches, one `train_on_batch` a batch as `convatt train` feeds them, the two models'
epochs alternating (the order swapped every repeat), so that the machine's load hits both alike.
The first epoch includes tracing the training step (and its retracings for new input shapes);
the later epochs are steady. It logs, per variant, the medians over the repeats of the first
epoch and of the later epochs of each model and the ratio rewritten / tagger: above 1 the
tagger's own forms are the faster.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from convatt.layers._keras_compat import sublayers
from convatt.layers.core.modified_attention import ModifiedAttention
from convatt.layers.forms import drop_in_forms
from convatt.model.variants import VARIANTS
from convatt.speed.bench import _step, _synthetic_setup, _tagger
from convatt.training import interrupt

FORMS = ("tagger", "rewritten")
"""The two models of a pair: the tagger as built, and the same with the rewritten forms."""


def forms_variants() -> list[str]:
    """The variants whose attention is a `SelfAttention` (+Denser's is not: nothing to compare)."""
    return [name for name, variant in VARIANTS.items() if variant.attention != "denser"]


def with_rewritten_forms(model) -> int:
    """Switch every modified attention layer of `model` (before its first step) to the rewritten
    forms (`drop_in_forms`, `MultiHeadAttention`'s); the number of layers switched."""
    layers = [layer for top in model.layers for layer in [top, *sublayers(top)] if isinstance(layer, ModifiedAttention)]
    for layer in layers:
        layer.choose_forms = drop_in_forms
    return len(layers)


def _epoch(model, prepare: Callable, batches: list) -> float:
    """Seconds to train `model` one step on each of `batches`."""
    start = time.perf_counter()
    for batch in batches:
        _step(model, prepare, batch)
        interrupt.check()
    return time.perf_counter() - start


def _pair(config, sizes, vectors, seed: int) -> dict:
    """{form: (model, prepare)}: the tagger and its rewritten twin, the same initial weights."""
    models = {form: _tagger(config, sizes, vectors, seed=seed) for form in FORMS}
    if with_rewritten_forms(models["rewritten"][0]) == 0:
        raise ValueError(f"{config.variant} has no SelfAttention: its forms are not the tagger's to choose")
    return models


def time_forms(
    variant: str,
    preset: str = "ptb",
    steps: int = 20,
    epochs: int = 3,
    repeats: int = 3,
    batch_size: int = 32,
    sizes=None,
    seed: int = 0,
    **config_changes,
) -> dict[str, dict[str, float]]:
    """{form: {"first_epoch_s", "epoch_s"}}: the medians over `repeats` of the first epoch
    (tracing included) and of the later epochs (all of them, every repeat)."""
    config, batches, vectors, shapes = _synthetic_setup(preset, variant, steps, batch_size, sizes, seed, config_changes)
    first = {form: [] for form in FORMS}
    later = {form: [] for form in FORMS}
    for repeat in range(repeats):
        models = _pair(config, shapes, vectors, seed)
        for epoch in range(epochs):
            for form in sorted(FORMS, reverse=(repeat + epoch) % 2 == 1):
                (first if epoch == 0 else later)[form].append(_epoch(*models[form], batches))
    return {f: {"first_epoch_s": float(np.median(first[f])), "epoch_s": float(np.median(later[f]))} for f in FORMS}


def run_forms_benchmark(
    variants: list[str] | None = None,
    preset: str = "ptb",
    quick: bool = False,
    log: Callable[[str], None] = print,
    **options,
) -> dict[str, dict]:
    """`time_forms` of each of `variants` (default: `forms_variants()`), logged as one line each;
    `quick`: 2 repeats of 2 epochs of 8 steps (else `time_forms`' defaults)."""
    import keras

    variants = variants or forms_variants()
    if quick:
        options = {"steps": 8, "epochs": 2, "repeats": 2, **options}
    log(
        f"convatt bench --forms: preset {preset}, backend {keras.backend.backend()}, {options or 'defaults'}; "
        "seconds an epoch, medians; ratio rewritten / tagger (> 1: the tagger's forms are faster)"
    )
    results = {}
    for variant in variants:
        result = time_forms(variant, preset, **options)
        tagger, rewritten = result["tagger"], result["rewritten"]
        result["first_epoch_ratio"] = rewritten["first_epoch_s"] / tagger["first_epoch_s"]
        result["epoch_ratio"] = rewritten["epoch_s"] / tagger["epoch_s"]
        log(
            f"{variant:24s} first epoch {tagger['first_epoch_s']:7.2f} s tagger {rewritten['first_epoch_s']:7.2f} s "
            f"rewritten {result['first_epoch_ratio']:5.2f}x | later epochs {tagger['epoch_s']:7.2f} s tagger "
            f"{rewritten['epoch_s']:7.2f} s rewritten {result['epoch_ratio']:5.2f}x"
        )
        results[variant] = result
    return results
