"""`convatt bench`: training throughput of the tagger against a straightforward port.

Both models train on the same synthetic PTB-like batches in one process, one
`train_on_batch` per batch as `convatt train` does, each model's input preparation
included in the timed step (the tagger's char packing `make_inputs`; plain arrays
for the baseline of `convatt.baseline`). Warm-up steps and one step per new input
shape (tracing, compilation) are not timed; the timed steps of the two models are
interleaved and their medians reported. tokens/s counts non-PAD tokens. The last
line is `speedup N.NNx` (baseline step time / tagger step time).

With `precision` other than float32 the two models are instead the tagger in
float32 and the tagger in that dtype policy (same weights, same batches), and the
last line is `speedup N.NNx (<precision> over float32)`.
"""
from __future__ import annotations

import time
from typing import Callable

import keras
import numpy as np

from convatt import interrupt
from convatt.baseline import baseline_inputs, build_baseline
from convatt.batching import make_inputs
from convatt.model import PRECISIONS, build_tagger
from convatt.variants import make_config

# words, chars, labels (PAD and OOV included) and the number of distinct surface forms.
SIZES = {"ptb": (20_002, 84, 47, 45_000), "ud": (10_000, 100, 19, 20_000)}


def synthetic_batches(n_batches: int, n_words: int, n_chars: int, n_labels: int, n_forms: int,
                      batch_size: int = 32, max_len: int = 60, max_word_len: int = 20, seed: int = 0):
    """PTB-like encoded batches [(words, chars, tags, sample_weight)].

    Sentence lengths ~ Gamma(mean 25, sd 12), at most `max_len`, padded to it.
    Tokens are surface forms drawn Zipf-Mandelbrot (p ~ (rank + 2.7)^-1.1); forms of
    rank >= n_words - 2 map to OOV (id 1) but keep their own spelling. Each form
    has a fixed spelling whose length grows with its rank (about 4.5 chars per
    token), so the distinct char rows per batch are realistic (~450 for PTB sizes).
    """
    rng = np.random.default_rng(seed)
    ranks = np.arange(n_forms)
    p = (ranks + 2.7) ** -1.1
    p /= p.sum()
    form_word = np.where(ranks < n_words - 2, ranks + 2, 1).astype(np.int32)
    lengths = np.clip(1 + rng.poisson(0.3 + 0.7 * np.log1p(ranks)), 1, max_word_len)
    spelling = rng.integers(2, n_chars, (n_forms, max_word_len)).astype(np.int32)
    spelling[np.arange(max_word_len) >= lengths[:, None]] = 0
    form_tag = rng.integers(2, n_labels, n_forms).astype(np.int32)
    batches = []
    for _ in range(n_batches):
        n_tokens = np.clip(np.rint(rng.gamma(4.3, 25 / 4.3, batch_size)), 1, max_len).astype(int)
        real = np.arange(max_len) < n_tokens[:, None]
        forms = rng.choice(n_forms, size=(batch_size, max_len), p=p)
        words = np.where(real, form_word[forms], 0).astype(np.int32)
        chars = np.where(real[..., None], spelling[forms], 0).astype(np.int32)
        tags = np.where(real, form_tag[forms], 0).astype(np.int32)
        batches.append((words, chars, tags, real.astype(np.float32)))
    return batches


def _step(model, prepare: Callable, batch) -> tuple[float, float]:
    """One training step as `convatt train` does it: (seconds in all, seconds preparing inputs)."""
    words, chars, tags, weights = batch
    start = time.perf_counter()
    x = prepare(words, chars)
    prepared = time.perf_counter()
    model.train_on_batch(x, tags, sample_weight=weights)
    return time.perf_counter() - start, prepared - start


def _time_steps(models: dict, warmup: list, timed: list) -> dict[str, np.ndarray]:
    """Per model, rows (step seconds, input seconds) of one step per `timed` batch.

    Untimed first: the `warmup` batches, then one batch of each input shape of the
    timed ones not seen yet. The timed steps of the models alternate, so a change
    in the machine's load hits both alike."""
    for model, prepare in models.values():
        seen = set()
        for i, batch in enumerate(warmup + timed):
            shapes = tuple(v.shape for v in prepare(*batch[:2]).values())
            if i < len(warmup) or shapes not in seen:
                _step(model, prepare, batch)
            seen.add(shapes)
    rows = {name: [] for name in models}
    for i, batch in enumerate(timed):
        for name in sorted(models, reverse=i % 2 == 1):
            rows[name].append(_step(*models[name], batch))
            interrupt.check()
    return {name: np.array(r) for name, r in rows.items()}


def _models(config, sizes: tuple, vectors, precision: str, seed: int) -> dict:
    """name -> (model, input preparation): baseline and tagger, or the tagger in float32 and in `precision`."""
    n_words, n_chars, n_labels = sizes

    def tagger(policy: str):
        keras.utils.set_random_seed(seed)  # the same initial weights in every precision
        model = build_tagger(config, n_words, n_chars, n_labels, vectors, dtype_policy=policy)
        return model, lambda words, chars: make_inputs(words, chars, few_shapes=bool(model.jit_compile))

    if precision == "float32":
        keras.utils.set_random_seed(seed)
        return {"baseline": (build_baseline(config, n_words, n_chars, n_labels, vectors), baseline_inputs),
                "tagger": tagger("float32")}
    return {"float32": tagger("float32"), precision: tagger(precision)}


def run_benchmark(preset: str = "ptb", variant: str = "san-pe-add", quick: bool = False,
                  steps: int | None = None, warmup: int = 3, batch_size: int = 32, sizes=None,
                  seed: int = 0, log: Callable[[str], None] = print, precision: str = "float32",
                  **config_changes) -> dict:
    """Time training steps of two models on the same batches; log and return the figures.

    The models are the baseline and `build_tagger`'s tagger (`precision="float32"`), or
    the tagger in float32 and in the mixed `precision` ("mixed_bfloat16", "mixed_float16").
    `steps` timed steps per model (default 20 with `quick`, else 60) after `warmup`
    untimed ones; `sizes` = (n_words, n_chars, n_labels, n_forms) replaces the
    preset's; `config_changes` change the architecture (tiny models in tests).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}; received {precision!r}.")
    steps = steps or (20 if quick else 60)
    config = make_config(preset, variant, **config_changes)
    n_words, n_chars, n_labels, n_forms = sizes or SIZES[preset]
    batches = synthetic_batches(warmup + steps, n_words, n_chars, n_labels, n_forms, batch_size,
                                config.max_len, config.max_word_len, seed)
    vectors = np.random.default_rng(seed).uniform(-0.05, 0.05, (n_words, config.word_dim)) \
        if config.pretrained_words else None
    models = _models(config, (n_words, n_chars, n_labels), vectors, precision, seed)
    timed = batches[warmup:]
    tokens = np.mean([w.sum() for *_, w in timed])
    rows = np.mean([len(np.unique(make_inputs(w, c)["char_index"])) for w, c, *_ in timed])
    log(f"convatt bench: preset {preset}, variant {variant}, batch {batch_size}, backend {keras.backend.backend()}, "
        f"precision {precision}, {steps} timed steps per model (medians), after {warmup} untimed")
    log(f"synthetic batches: {tokens:.0f} tokens ({tokens / batch_size:.1f} per sentence, padded to "
        f"{config.max_len}), {rows:.0f} distinct char rows of {batch_size * config.max_len} positions")
    result = {}
    for name, times in _time_steps(models, batches[:warmup], timed).items():
        step, inputs = np.median(times, axis=0)
        result[name] = dict(step_s=step, steps_per_s=1 / step, tokens_per_s=tokens / step, inputs_ms=1e3 * inputs)
        what = "straightforward port" if name == "baseline" else \
            "build_tagger" if name == "tagger" else f"build_tagger, {name}"
        log(f"{name:8s} ({what}, jit_compile={models[name][0].jit_compile}): {1 / step:6.2f} steps/s "
            f"{tokens / step:8.0f} tokens/s  ({1e3 * step:.1f} ms/step, inputs {1e3 * inputs:.2f} ms of it)")
    if precision == "float32":
        result["speedup"] = result["baseline"]["step_s"] / result["tagger"]["step_s"]
        log(f"speedup {result['speedup']:.2f}x")
    else:
        result["speedup"] = result["float32"]["step_s"] / result[precision]["step_s"]
        log(f"speedup {result['speedup']:.2f}x ({precision} over float32)")
    return result
