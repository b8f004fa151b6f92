"""Train one tagger with the paper's protocol and write a complete run directory.

Protocol (REFERENCE.md): RMSprop with Keras defaults, batch 32, up to 100 epochs,
early stopping with patience 3 on dev accuracy over non-PAD tokens, then the best
epoch's weights are restored and evaluated on dev and test.

Run directory:
    config.json     the options of the run
    vocab.json      the vocabularies (to re-evaluate the model)
    history.csv     epoch, loss, train_accuracy, dev_accuracy, seconds
    curve.csv       step, epoch, dev_accuracy: every `curve_every` batches
    model.keras     the best epoch's model
    result.json     written last: dev/test accuracy (all, OOV, ambiguous, per tag), ...
    checkpoint/     while training: the last finished epoch, to resume from

A rerun with the same options resumes from the last finished epoch; a run that is
killed loses at most the epoch in progress.
"""
from __future__ import annotations

import dataclasses
import math
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import keras
import numpy as np

from convatt import __version__, interrupt
from convatt.batching import iterate_batches
from convatt.data import EncodedSplit, build_vocabularies, encode_split, load_corpus, load_word_vectors
from convatt.errors import ConvattError
from convatt.metrics import accuracy_report, token_accuracy
from convatt.model import build_tagger, count_parameters
from convatt.rundir import read_json, read_json_or_none, run_lock, write_atomically, write_csv, write_json
from convatt.variants import make_config

HISTORY_COLUMNS = ["epoch", "loss", "train_accuracy", "dev_accuracy", "seconds"]
CURVE_COLUMNS = ["step", "epoch", "dev_accuracy"]


@dataclass(frozen=True)
class TrainOptions:
    """What `convatt train` takes. Fields below `out` have the paper's defaults."""

    preset: str
    variant: str
    seed: int
    data: str
    out: str
    embeddings: str | None = None
    embeddings_limit: int | None = 100_000
    epochs: int = 100
    patience: int = 3
    batch_size: int = 32
    limit: int | None = None  # at most this many sentences per split (smoke runs)
    mask_padding: bool = False
    curve_every: int = 100
    curve_until: int = 2000  # record the curve up to this global step (-1: always)
    eval_batch_size: int = 256
    jit_compile: bool | str = "auto"

    # Options that may change between a run and its resumption.
    RESUMABLE_CHANGES = ("epochs", "out", "eval_batch_size", "jit_compile")


@dataclass
class PreparedData:
    vocab: object
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit
    corpus_name: str
    note: str
    is_sample: bool
    word_vectors: np.ndarray | None
    vectors_note: str


def prepare_data(opts: TrainOptions, log: Callable[[str], None] = print) -> PreparedData:
    """Read the corpus, build vocabularies, encode, and load word vectors."""
    config = make_config(opts.preset, opts.variant)
    corpus = load_corpus(opts.preset, opts.data)
    if opts.limit:
        corpus = dataclasses.replace(corpus, train=corpus.train[: opts.limit], dev=corpus.dev[: opts.limit],
                                     test=corpus.test[: opts.limit])
    vocab = build_vocabularies(corpus, opts.preset)
    enc = lambda sents: encode_split(sents, vocab.words, vocab.chars, vocab.tags, vocab.ambiguous,
                                     config.max_len, config.max_word_len)
    vectors, vectors_note = None, ""
    if config.pretrained_words:
        if opts.embeddings:
            vectors, found = load_word_vectors(opts.embeddings, vocab.words, config.word_dim,
                                               limit=opts.embeddings_limit, seed=opts.seed)
            vectors_note = f"pretrained vectors for {found:,} of {len(vocab.words):,} words from {opts.embeddings}"
        else:
            vectors_note = ("no --embeddings given: frozen random uniform(-0.05, 0.05) word vectors are used, "
                            "so the numbers are not comparable to the paper's fastText runs")
    note = " ".join(s for s in [corpus.note, "(--limit %d)" % opts.limit if opts.limit else ""] if s)
    return PreparedData(vocab, enc(corpus.train), enc(corpus.dev), enc(corpus.test), corpus.name, note,
                        corpus.name == "PTB-sample", vectors, vectors_note)


def predict_tags(model: keras.Model, split: EncodedSplit, batch_size: int = 256) -> np.ndarray:
    """Predicted tag ids (n, t) for an encoded split."""
    batches = iterate_batches(split, batch_size, few_shapes=bool(model.jit_compile))
    out = [np.argmax(model.predict_on_batch(x), axis=-1) for x, _, _ in batches]
    return np.concatenate(out) if out else np.zeros_like(split.tags)


def evaluate(model: keras.Model, split: EncodedSplit, tag_names, batch_size: int = 256) -> dict:
    return accuracy_report(predict_tags(model, split, batch_size), split.tags, split.oov, split.ambiguous,
                           tag_names)


class Progress:
    """One line per ~10% of an epoch (or a live line on a terminal)."""

    def __init__(self, log: Callable[[str], None], epoch: int, epochs: int, n_batches: int):
        self.log, self.epoch, self.epochs, self.n = log, epoch, epochs, n_batches
        self.tty = sys.stdout.isatty() and log is print
        self.start = time.perf_counter()
        self.every = 1 if self.tty else max(1, n_batches // 10)

    def update(self, i: int, loss: float, acc: float) -> None:
        if i % self.every and i != self.n:
            return
        rate = i / max(time.perf_counter() - self.start, 1e-9)
        line = (f"epoch {self.epoch}/{self.epochs}  batch {i}/{self.n}  loss {loss:.4f}  "
                f"train acc {100 * acc:.2f}%  {rate:.1f} batches/s")
        if self.tty:
            print("\r" + line, end="\n" if i == self.n else "", flush=True)
        else:
            self.log(line)


def _check_config(out: Path, opts: TrainOptions) -> None:
    """Refuse to resume into a directory that holds a different run."""
    path = out / "config.json"
    if not path.exists():
        return
    old = read_json(path)
    new = dataclasses.asdict(opts)
    differ = [k for k in new if k not in TrainOptions.RESUMABLE_CHANGES and old.get(k) != new[k]]
    if differ:
        details = ", ".join(f"{k}: {old.get(k)!r} -> {new[k]!r}" for k in differ)
        raise ConvattError(f"this run directory holds a different run ({details}); "
                           "use another --out or delete the directory", path)


def train_run(opts: TrainOptions, log: Callable[[str], None] = print) -> dict:
    """Train (or resume, or skip if complete) one run; return its result.json content."""
    make_config(opts.preset, opts.variant)  # unknown names fail before anything is written
    out = Path(opts.out)
    _check_config(out, opts)
    if (out / "result.json").exists():
        log(f"{out}: complete (result.json exists); nothing to do")
        return read_json(out / "result.json")
    out.mkdir(parents=True, exist_ok=True)
    with run_lock(out):
        if (out / "result.json").exists():  # finished by another process meanwhile
            return read_json(out / "result.json")
        return _train_locked(opts, out, log)


def _train_locked(opts: TrainOptions, out: Path, log: Callable[[str], None]) -> dict:
    config = make_config(opts.preset, opts.variant, mask_padding=opts.mask_padding)
    data = prepare_data(opts, log)  # bad input fails here, before the directory is claimed
    write_json(out / "config.json", dataclasses.asdict(opts))
    for note in (data.note, data.vectors_note):
        if note:
            log(f"note: {note}")
    data.vocab.save(out / "vocab.json")
    tag_names = list(data.vocab.tags.tokens)
    log(f"{data.corpus_name}: {len(data.train):,} / {len(data.dev):,} / {len(data.test):,} "
        f"train/dev/test sequences; {len(data.vocab.words):,} words, {len(data.vocab.chars):,} chars, "
        f"{len(data.vocab.tags):,} labels")

    ckpt = out / "checkpoint"
    state = read_json_or_none(ckpt / "state.json")  # None: no epoch finished (or a torn write)
    if state:
        model = keras.saving.load_model(ckpt / f"epoch-{state['epoch']}.keras")
        for variable, value in zip(_seed_states(model), state["seed_states"]):
            variable.assign(np.asarray(value, dtype=variable.dtype))
        log(f"resuming from epoch {state['epoch']} (best dev {100 * state['best_dev']:.2f}% "
            f"at epoch {state['best_epoch']})")
    else:
        keras.utils.set_random_seed(opts.seed)
        model = build_tagger(config, len(data.vocab.words), len(data.vocab.chars), len(data.vocab.tags),
                             data.word_vectors, jit_compile=opts.jit_compile)
        state = dict(epoch=0, step=0, best_dev=-1.0, best_epoch=0, bad_epochs=0, seconds=0.0,
                     history=[], curve=[])
    n_params = count_parameters(model)
    log(f"{config.variant} ({config.spec.label}), {n_params:,} parameters, seed {opts.seed}")

    while state["epoch"] < opts.epochs and state["bad_epochs"] < opts.patience:
        state = _train_epoch(model, data, opts, state, out, log)
        _save_checkpoint(model, state, ckpt)
        write_csv(out / "history.csv", state["history"], HISTORY_COLUMNS)
        write_csv(out / "curve.csv", state["curve"], CURVE_COLUMNS)

    if state["bad_epochs"] >= opts.patience:
        log(f"early stopping: no dev improvement for {opts.patience} epochs")
    model.load_weights(ckpt / f"best-{state['best_epoch']}.weights.h5")
    result = {
        "preset": opts.preset, "variant": opts.variant, "label": config.spec.label, "seed": opts.seed,
        "corpus": data.corpus_name, "is_sample": data.is_sample, "corpus_note": data.note,
        "vectors_note": data.vectors_note, "mask_padding": opts.mask_padding,
        "dev": evaluate(model, data.dev, tag_names, opts.eval_batch_size),
        "test": evaluate(model, data.test, tag_names, opts.eval_batch_size),
        "parameters": n_params, "epochs_run": state["epoch"], "best_epoch": state["best_epoch"],
        "wall_seconds": round(state["seconds"], 1), "backend": keras.backend.backend(),
        "convatt_version": __version__,
    }
    write_atomically(out / "model.keras", model.save)
    write_json(out / "result.json", result)
    shutil.rmtree(ckpt, ignore_errors=True)
    t = result["test"]
    fmt = lambda v: "n/a" if v is None else f"{100 * v:.2f}"
    log(f"done: test accuracy all {fmt(t['all'])}  OOV {fmt(t['oov'])}  ambiguous {fmt(t['ambiguous'])}  "
        f"(best epoch {state['best_epoch']} of {state['epoch']}, {state['seconds']:.0f} s) -> {out}")
    return result


def _train_epoch(model, data: PreparedData, opts: TrainOptions, state: dict, out: Path, log) -> dict:
    state = {**state, "history": list(state["history"]), "curve": list(state["curve"])}
    epoch = state["epoch"] + 1
    start = time.perf_counter()
    shuffle_seed = int(np.random.SeedSequence([opts.seed, epoch]).generate_state(1)[0])
    n_batches = math.ceil(len(data.train) / opts.batch_size)
    progress = Progress(log, epoch, opts.epochs, n_batches)
    loss_sum = correct = tokens = 0.0
    batches = iterate_batches(data.train, opts.batch_size, shuffle_seed, few_shapes=bool(model.jit_compile))
    for i, (x, y, w) in enumerate(batches, start=1):
        try:
            logs = model.train_on_batch(x, y, sample_weight=w, return_dict=True)
            loss = float(logs["loss"])
        except Exception:  # a backend can fail inside the update once values are NaN
            if _weights_finite(model):
                raise
            loss = float("nan")
        if not math.isfinite(loss):
            raise ConvattError(f"the loss became {loss} at epoch {epoch}, batch {i}: training diverged. "
                               f"Epoch {epoch - 1} and earlier are kept; check the data and settings",
                               out)
        n = float(w.sum())
        loss_sum += loss
        correct += float(logs["sparse_categorical_accuracy"]) * n
        tokens += n
        state["step"] += 1
        if opts.curve_every and state["step"] % opts.curve_every == 0 and (
                opts.curve_until < 0 or state["step"] <= opts.curve_until):
            dev = token_accuracy(predict_tags(model, data.dev, opts.eval_batch_size), data.dev.tags)
            state["curve"].append({"step": state["step"], "epoch": epoch, "dev_accuracy": round(dev, 6)})
        progress.update(i, loss_sum / i, correct / max(tokens, 1))
        interrupt.check()

    dev = token_accuracy(predict_tags(model, data.dev, opts.eval_batch_size), data.dev.tags)
    seconds = time.perf_counter() - start
    state["seconds"] += seconds
    state["history"].append({"epoch": epoch, "loss": round(loss_sum / max(n_batches, 1), 6),
                             "train_accuracy": round(correct / max(tokens, 1), 6),
                             "dev_accuracy": round(dev, 6), "seconds": round(seconds, 2)})
    improved = dev > state["best_dev"]
    state.update(epoch=epoch, best_dev=max(dev, state["best_dev"]),
                 best_epoch=epoch if improved else state["best_epoch"],
                 bad_epochs=0 if improved else state["bad_epochs"] + 1)
    state["improved"] = improved
    log(f"epoch {epoch}: dev accuracy {100 * dev:.2f}%{' (best)' if improved else ''}  {seconds:.1f} s")
    return state


def _seed_states(model: keras.Model) -> list:
    """The dropout RNG states: `.keras` files don't keep them, the checkpoint must."""
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _weights_finite(model: keras.Model) -> bool:
    return all(np.isfinite(keras.ops.convert_to_numpy(w)).all() for w in model.trainable_weights)


def _save_checkpoint(model: keras.Model, state: dict, ckpt: Path) -> None:
    """Write the epoch's files under new names, then state.json naming them, then
    delete the older files: a kill at any point leaves a consistent checkpoint."""
    ckpt.mkdir(exist_ok=True)
    epoch = state["epoch"]
    if state.pop("improved"):
        write_atomically(ckpt / f"best-{epoch}.weights.h5", model.save_weights)
    write_atomically(ckpt / f"epoch-{epoch}.keras", model.save)
    state["seed_states"] = [keras.ops.convert_to_numpy(v).tolist() for v in _seed_states(model)]
    write_json(ckpt / "state.json", state)
    keep = {f"best-{state['best_epoch']}.weights.h5", f"epoch-{epoch}.keras", "state.json"}
    for f in ckpt.iterdir():
        if f.name not in keep:
            f.unlink(missing_ok=True)
