"""Generating text with a causal run's model: a symbol at a time, with or without the cache.

`check_request` reads the run's settings and symbols (no Keras) and says what is wrong with a
request; `CausalSteps` runs the trained model either on the whole prefix (the reference) or a
symbol at a time with each attention layer's cache (`convatt.layers.core.attention_cache`), by the
decode step beside the model's builder (`convatt.sequence.model.causal_step`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from convatt.data.formats import data_format
from convatt.errors import ConvattError
from convatt.inference.loading import check_run_dir
from convatt.rundir.run_config import RunConfig
from convatt.rundir.schema import VOCAB_FILE

FIRST_SYMBOL = 2  # ids 0 and 1 are PAD and OOV: never generated


@dataclass(frozen=True)
class Sampling:
    """How the next symbol is chosen: the argmax (`greedy`) or a draw from the softmax of
    `logits / temperature` over the `top_k` likeliest symbols (0: all)."""

    greedy: bool = False
    temperature: float = 1.0
    top_k: int = 0
    seed: int = 0


@dataclass(frozen=True)
class Request:
    """A checked request: the run, its symbols, the prompt's ids and how many symbols to add."""

    run: Path
    preset: str
    variant: str
    symbols: list[str]
    prompt_ids: list[int]
    length: int


def check_request(run: str | Path, prompt: str, length: int) -> Request:
    """The request, or a ConvattError saying what is wrong (before Keras is loaded)."""
    path = check_run_dir(run)
    config = RunConfig.load(path)
    if not data_format(config.preset).is_sequence_task:
        raise ConvattError(f"a {config.preset} run is a tagger, not a causal model: it cannot generate", path)
    if not prompt:
        raise ConvattError("--prompt is empty: give at least one character to start from")
    if length < 1:
        raise ConvattError(f"--length takes a whole number >= 1; received {length}")
    symbols = json.loads((path / VOCAB_FILE).read_text(encoding="utf-8"))["symbols"]
    ids = {symbol: i for i, symbol in enumerate(symbols) if i >= FIRST_SYMBOL}
    unseen = sorted({c for c in prompt if c not in ids})
    if unseen:
        raise ConvattError(f"--prompt has characters the run never saw: {' '.join(map(repr, unseen))}", path)
    return Request(path, config.preset, config.variant, symbols, [ids[c] for c in prompt], length)


def choose(logits: np.ndarray, sampling: Sampling, rng: np.random.Generator) -> int:
    """The next symbol's id from its logits (PAD and OOV never chosen)."""
    logits = np.asarray(logits, dtype=np.float64)[FIRST_SYMBOL:]
    if sampling.greedy:
        return int(np.argmax(logits)) + FIRST_SYMBOL
    scaled = logits / sampling.temperature
    if 0 < sampling.top_k < len(scaled):
        scaled[scaled < np.sort(scaled)[-sampling.top_k]] = -np.inf
    probabilities = np.exp(scaled - scaled.max())
    return int(rng.choice(len(scaled), p=probabilities / probabilities.sum())) + FIRST_SYMBOL


def compiled(function: Callable) -> Callable:
    """`function` traced once per input shape: a TensorFlow graph or a JAX program (inference:
    the weights are read as constants); as it is under other backends."""
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        return tf.function(function, reduce_retracing=True)
    if keras.backend.backend() == "jax":
        import jax

        return jax.jit(function)
    return function


class CausalSteps:
    """A trained causal model (`convatt.sequence.model.build_causal_model`), run a step at a time:
    on the whole prefix (the reference) or with each attention layer's cache, both compiled."""

    def __init__(self, model):
        from convatt.sequence.model import causal_step

        self.model = model
        self.max_len = int(model.input_shape[1])
        self.caches: tuple = ()
        self._whole = compiled(lambda tokens: model(tokens, training=False))
        self._step = compiled(lambda tokens, caches, index: causal_step(model, tokens, caches, index))

    def whole_prefix_logits(self, ids: list[int]) -> np.ndarray:
        """The next symbol's logits from a run of the whole model on `ids` (padded: it is causal)."""
        import keras

        tokens = np.zeros((1, self.max_len), "int32")
        tokens[0, : len(ids)] = ids
        return keras.ops.convert_to_numpy(self._whole(tokens))[0, len(ids) - 1]

    def cached_logits(self, new_ids: list[int], index: int) -> np.ndarray:
        """The logits after `new_ids` placed at `index`; at 0 (the prompt) the caches start empty."""
        from keras import ops

        from convatt.sequence.model import causal_step, empty_caches

        tokens = np.asarray([new_ids], "int32")
        if index == 0:  # the prompt, at a known start (no earlier rows): run as it is
            logits, self.caches = causal_step(self.model, tokens, empty_caches(self.model), 0)
        else:
            logits, self.caches = self._step(tokens, self.caches, np.asarray(index, "int32"))
        return ops.convert_to_numpy(logits)[0, -1]


@dataclass(frozen=True)
class Generated:
    """What a generation made: the new symbols' ids and the seconds it took."""

    ids: list[int]
    seconds: float

    @property
    def symbols_per_second(self) -> float:
        return len(self.ids) / max(self.seconds, 1e-9)


def check_fits_positions(steps: CausalSteps, prompt_ids: list[int], length: int) -> None:
    """A ConvattError if the prompt and `length` symbols do not fit the model's positions."""
    if len(prompt_ids) > steps.max_len:
        raise ConvattError(
            f"the prompt has {len(prompt_ids)} symbols and the model reads at most {steps.max_len}: "
            f"shorten --prompt to at most {steps.max_len} symbols"
        )
    if len(prompt_ids) + length > steps.max_len + 1:  # the last symbol is never fed back
        raise ConvattError(
            f"the prompt ({len(prompt_ids)} symbols) and --length {length} exceed the model's "
            f"{steps.max_len} positions: at most --length {steps.max_len + 1 - len(prompt_ids)}"
        )


def generate(
    steps: CausalSteps,
    prompt_ids: list[int],
    length: int,
    sampling: Sampling,
    use_cache: bool = True,
    progress: Callable[[int, float], None] | None = None,
) -> Generated:
    """`length` symbols after the prompt; `progress(done, seconds)` after each."""
    check_fits_positions(steps, prompt_ids, length)
    rng, ids, new = np.random.default_rng(sampling.seed), list(prompt_ids), []
    start = time.perf_counter()
    logits = steps.cached_logits(ids, 0) if use_cache else steps.whole_prefix_logits(ids)
    for done in range(1, length + 1):
        new.append(choose(logits, sampling, rng))
        ids.append(new[-1])
        if progress is not None:
            progress(done, time.perf_counter() - start)
        if done < length:
            logits = steps.cached_logits(ids[-1:], len(ids) - 1) if use_cache else steps.whole_prefix_logits(ids)
    return Generated(new, time.perf_counter() - start)
