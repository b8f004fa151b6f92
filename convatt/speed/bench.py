"""`convatt bench`: training throughput of the tagger against a straightforward port.

Both models train on the same synthetic PTB-like batches in one process, one
`train_on_batch` per batch as `convatt train` does, each model's input preparation
included in the timed step (the tagger's char packing `make_inputs`; plain arrays
for the baseline of `convatt.speed.baseline`). Warm-up steps and one step per new input
shape (tracing, compilation) are not timed; the timed steps of the two models are
interleaved and their medians reported. tokens/s counts non-PAD tokens. The last
line is `speedup N.NNx` (baseline step time / tagger step time).

The baseline covers the paper's variants only. For the others (the attention
variants, Shaw, ALiBi), or with `reference="san-pe-add"` (any variant name), the
reference is that variant built by `build_tagger` in the same process (`reference`
in the result), and the speedup is its step time over the variant's; a line before
it gives the variant's step time relative to it.

With `precision` other than float32 the two models are instead the tagger in
float32 and the tagger in that dtype policy (same weights, same batches), and the
last line is `speedup N.NNx (<precision> over float32)`.

With `memory=True` each of the two models also trains in a fresh process of its
own (`measure_memory`): peak resident memory (Linux VmHWM) of the process, and its
growth over the timed steps after the warm-up (VmHWM - VmRSS, the peak reset by
`/proc/self/clear_refs` after the warm-up): the working memory of a training step
beyond what tracing and the weights already hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np

from convatt.data.batching import make_inputs
from convatt.data.formats import data_format
from convatt.model.tagger import build_tagger
from convatt.model.variants import PRECISIONS, make_config
from convatt.speed.baseline import baseline_covers, baseline_inputs, build_baseline
from convatt.training import interrupt


def synthetic_batches(
    n_batches: int,
    n_words: int,
    n_chars: int,
    n_labels: int,
    n_forms: int,
    batch_size: int = 32,
    max_len: int = 60,
    max_word_len: int = 20,
    seed: int = 0,
):
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


def _synthetic_setup(
    preset: str, variant: str, n_batches: int, batch_size: int, sizes, seed: int, config_changes: dict
):
    """(config, batches, word vectors or None, sizes) of a benchmark; the seed set for the weights."""
    config = make_config(preset, variant, **config_changes)
    n_words, n_chars, n_labels, n_forms = sizes or data_format(preset).bench_sizes
    batches = synthetic_batches(
        n_batches, n_words, n_chars, n_labels, n_forms, batch_size, config.max_len, config.max_word_len, seed
    )
    vectors = (
        np.random.default_rng(seed).uniform(-0.05, 0.05, (n_words, config.word_dim))
        if config.pretrained_words
        else None
    )
    keras.utils.set_random_seed(seed)  # the initial weights
    return config, batches, vectors, (n_words, n_chars, n_labels)


def _tagger(config, sizes, vectors, policy: str = "float32", seed: int | None = None) -> tuple:
    if seed is not None:
        keras.utils.set_random_seed(seed)  # the same initial weights in every precision
    tagger = build_tagger(config, *sizes, vectors, dtype_policy=policy)
    return tagger, lambda words, chars: make_inputs(words, chars, few_shapes=bool(tagger.jit_compile))


def _reference_variant(config, reference: str) -> str | None:
    """The variant `build_tagger` builds as the reference, or None for the baseline port."""
    if reference != "auto":
        return reference
    return None if baseline_covers(config) else "san-pe-add"


def _models(
    config, sizes, vectors, preset: str, reference: str, config_changes: dict, precision: str, seed: int
) -> tuple[str, str, dict]:
    """(the reference's name, the compared model's name, {name: (model, prepare)}): the
    baseline port or the `_reference_variant` against the tagger, or, with a mixed
    `precision`, the tagger in float32 against the tagger in `precision`."""
    if precision != "float32":
        return (
            "float32",
            precision,
            {
                "float32": _tagger(config, sizes, vectors, "float32", seed),
                precision: _tagger(config, sizes, vectors, precision, seed),
            },
        )
    variant = _reference_variant(config, reference)
    if variant is None:
        models = {"baseline": (build_baseline(config, *sizes, vectors), baseline_inputs)}
    else:
        models = {"reference": _tagger(make_config(preset, variant, **config_changes), sizes, vectors)}
    return next(iter(models)), "tagger", {**models, "tagger": _tagger(config, sizes, vectors)}


def run_benchmark(
    preset: str = "ptb",
    variant: str = "san-pe-add",
    quick: bool = False,
    steps: int | None = None,
    warmup: int = 3,
    batch_size: int = 32,
    sizes=None,
    seed: int = 0,
    log: Callable[[str], None] = print,
    memory: bool = False,
    reference: str = "auto",
    precision: str = "float32",
    **config_changes,
) -> dict:
    """Time training steps of the reference and of `build_tagger`'s tagger; log and return the figures.

    `steps` timed steps per model (default 20 with `quick`, else 60) after `warmup` untimed ones;
    `sizes` = (n_words, n_chars, n_labels, n_forms) replaces the preset's; `config_changes` change
    the architecture (tiny models in tests); `memory` also measures each model's memory in a process
    of its own; `reference`: "auto" (the port where it covers the variant, else SAN+PE[add]) or a
    variant name. With a mixed `precision` the two models are the tagger in float32 and in that policy.
    """
    _check_precision(precision)
    steps = steps or (20 if quick else 60)
    config, batches, vectors, shapes = _synthetic_setup(
        preset, variant, warmup + steps, batch_size, sizes, seed, config_changes
    )
    reference_variant = _reference_variant(config, reference)
    reference, compared, models = _models(config, shapes, vectors, preset, reference, config_changes, precision, seed)
    timed = batches[warmup:]
    log(f"convatt bench: preset {preset}, variant {variant}, batch {batch_size}, {_setting(precision, steps, warmup)}")
    tokens = _log_batches(timed, batch_size, config.max_len, log)
    result = _timed(models, batches[:warmup], timed, tokens, _descriptions(reference_variant, precision), log)
    if memory and precision == "float32":
        options = dict(preset=preset, steps=min(steps, 20), warmup=warmup, batch_size=batch_size, sizes=sizes)
        options.update(seed=seed, config_changes=config_changes)
        _log_memory(result, reference, reference_variant or variant, variant, options, log)
    _log_speedup(result, reference, compared, reference_variant, precision, log)
    return result


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}; received {precision!r}.")


def _setting(precision: str, steps: int, warmup: int) -> str:
    """The end of the benchmark's first line: how it is measured."""
    return (
        f"backend {keras.backend.backend()}, precision {precision}, {steps} timed steps per model (medians), "
        f"after {warmup} untimed"
    )


def _descriptions(reference_variant: str | None, precision: str) -> dict[str, str]:
    """What each model of a benchmark is, by its name in the result."""
    return {
        "baseline": "straightforward port",
        "reference": f"build_tagger, {reference_variant}",
        "tagger": "build_tagger",
        "float32": "build_tagger, float32",
        precision: f"build_tagger, {precision}",
    }


def _log_speedup(result: dict, reference: str, compared: str, reference_variant: str | None, precision: str, log):
    """Set and log `result["speedup"]`: the reference's step time over the compared model's."""
    result["speedup"] = result[reference]["step_s"] / result[compared]["step_s"]
    if reference == "reference":
        log(f"step time relative to {reference_variant} {1 / result['speedup']:.2f}x")
    log(f"speedup {result['speedup']:.2f}x" + (f" ({precision} over float32)" if precision != "float32" else ""))


def _log_batches(timed: list, batch_size: int, max_len: int, log) -> float:
    """Log what the timed batches hold; return their mean number of tokens."""
    tokens = np.mean([w.sum() for *_, w in timed])
    rows = np.mean([len(np.unique(make_inputs(w, c)["char_index"])) for w, c, *_ in timed])
    log(
        f"synthetic batches: {tokens:.0f} tokens ({tokens / batch_size:.1f} per sentence, padded to "
        f"{max_len}), {rows:.0f} distinct char rows of {batch_size * max_len} positions"
    )
    return tokens


def _timed(models: dict, warmup: list, timed: list, tokens: float, what: dict, log) -> dict:
    """Each model's median step (and input) time over `timed`, logged, as figures per model."""
    result = {}
    for name, times in _time_steps(models, warmup, timed).items():
        step, inputs = np.median(times, axis=0)
        result[name] = dict(step_s=step, steps_per_s=1 / step, tokens_per_s=tokens / step, inputs_ms=1e3 * inputs)
        log(
            f"{name:8s} ({what[name]}, jit_compile={models[name][0].jit_compile}): {1 / step:6.2f} steps/s "
            f"{tokens / step:8.0f} tokens/s  ({1e3 * step:.1f} ms/step, inputs {1e3 * inputs:.2f} ms of it)"
        )
    return result


def _log_memory(result: dict, reference: str, reference_variant: str, variant: str, options: dict, log) -> None:
    """Measure both models' memory (`measure_memory`) into `result` and log it."""
    for name, which, port in ((reference, reference_variant, reference == "baseline"), ("tagger", variant, False)):
        result[name].update(measure_memory(variant=which, baseline=port, **options))
        log(
            f"{name:8s} memory: peak RSS {result[name]['peak_rss_mb']:.0f} MB, growth over the timed steps "
            f"{result[name]['step_growth_mb']:.1f} MB (a process of its own)"
        )
    ratio = result["tagger"]["peak_rss_mb"] / result[reference]["peak_rss_mb"]
    log(f"peak RSS relative to the {reference} {ratio:.2f}x")


def _proc_status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def _memory_child(
    preset: str,
    variant: str,
    baseline: bool,
    steps: int,
    warmup: int,
    batch_size: int,
    sizes,
    seed: int,
    config_changes: dict,
) -> dict:
    """In a fresh process: train `warmup` then `steps` steps; peak RSS and its growth over the latter."""
    config, batches, vectors, model_sizes = _synthetic_setup(
        preset, variant, warmup + steps, batch_size, sizes, seed, config_changes
    )
    model, prepare = (
        (build_baseline(config, *model_sizes, vectors), baseline_inputs)
        if baseline
        else _tagger(config, model_sizes, vectors)
    )
    for batch in batches[:warmup]:
        _step(model, prepare, batch)
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    before = _proc_status_mb("VmRSS")
    for batch in batches[warmup:]:
        _step(model, prepare, batch)
    peak = _proc_status_mb("VmHWM")
    return dict(peak_rss_mb=peak, step_growth_mb=peak - before)


def measure_memory(preset: str, variant: str, baseline: bool = False, **options) -> dict:
    """`_memory_child` in a new Python process (same backend): {"peak_rss_mb", "step_growth_mb"}.

    Linux only (/proc). The peak is the process's since the warm-up, so everything the
    imports, the model and its tracing hold is included."""
    args = json.dumps(dict(preset=preset, variant=variant, baseline=baseline, **options))
    code = (
        "import json, sys; from convatt.speed.bench import _memory_child; "
        "print(json.dumps(_memory_child(**json.loads(sys.argv[1]))))"
    )
    done = subprocess.run([sys.executable, "-c", code, args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
