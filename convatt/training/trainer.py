"""Train one tagger with the paper's protocol and write a complete run directory.

Protocol (REFERENCE.md; `convatt.training.protocol` for the original code's computations and
the Keras 3 alternative): RMSprop, batch 32, up to 100 epochs, early stopping with
patience 3 on dev accuracy over non-PAD tokens (the original's per-batch mean by
default), then the best epoch's weights are restored and evaluated exactly on dev
and test.

Run directory (its JSON files typed in `convatt.run.schema`):
    config.json     the options of the run (`RunConfig`)
    vocab.json      the vocabularies (to re-evaluate the model)
    history.csv     one row per epoch (HISTORY_COLUMNS)
    curve.csv       dev accuracy every `curve_every` batches (CURVE_COLUMNS)
    model.keras     the best epoch's model
    result.json     written last: dev/test accuracy (all, OOV, ambiguous, per tag), ... (`RunResult`)
    checkpoint/     while training: the last finished epoch, to resume from

A rerun with the same options resumes from the last finished epoch; a run that is
killed loses at most the epoch in progress.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import keras
import numpy as np

from convatt import __version__
from convatt.data import (
    EncodedSplit,
    Vocabularies,
    build_vocabularies,
    corpus_files,
    encode_split,
    load_corpus,
    load_word_vectors,
)
from convatt.data.batching import iterate_batches
from convatt.errors import ConvattError
from convatt.model.prediction import evaluate, predict_tags
from convatt.model.tagger import build_tagger, count_parameters
from convatt.model.variants import TaggerConfig
from convatt.run import provenance
from convatt.run.advice import saved_run_config
from convatt.run.fingerprint import DataFingerprint
from convatt.run.modelfiles import check_weights_file, load_keras_model
from convatt.run.schema import (
    CHECKPOINT_DIR,
    CHECKPOINT_FILE,
    CONFIG_FILE,
    CURVE_COLUMNS,
    CURVE_FILE,
    FINGERPRINT_KEY,
    HISTORY_COLUMNS,
    HISTORY_FILE,
    LOCK_FILE,
    MODEL_FILE,
    RESULT_FILE,
    RUN_FILES,
    STATE_FILE,
    VOCAB_FILE,
    RunConfig,
    RunResult,
    best_weights_file,
    check_types,
    epoch_model_file,
    foreign_entries,
)
from convatt.run.storage import (
    os_error_reason,
    read_json,
    remove_temporaries,
    run_lock,
    write_atomically,
    write_csv,
    write_json,
)
from convatt.training import interrupt
from convatt.training.metrics import batch_mean_accuracy, token_accuracy
from convatt.training.protocol import Protocol
from convatt.training.sentence_scores import write_sentence_scores

TrainOptions = RunConfig  # the name the trainer's callers knew


@dataclass
class PreparedData:
    """A run's corpus, encoded with its vocabularies, and its word vectors."""

    vocab: Vocabularies
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit
    corpus_name: str
    note: str
    is_sample: bool
    word_vectors: np.ndarray | None
    vectors_note: str
    fingerprint: DataFingerprint
    unseen_tags: dict[str, int]  # tags of dev/test never seen in training -> their token count


def out_of_vocabulary(corpus, words) -> set[str]:
    """The words of every split that `words` does not hold (the original inserted them all as id 1)."""
    return {w for split in (corpus.train, corpus.dev, corpus.test) for s in split for w, _ in s} - set(words.tokens)


def prepare_data(run: RunConfig, config: TaggerConfig) -> PreparedData:
    """Read the corpus, build vocabularies, encode, and load word vectors."""
    corpus = load_corpus(run.preset, run.data)
    if run.limit:
        corpus = dataclasses.replace(
            corpus, train=corpus.train[: run.limit], dev=corpus.dev[: run.limit], test=corpus.test[: run.limit]
        )
    vocab = build_vocabularies(corpus, run.preset, run.protocol)
    vectors, vectors_note = None, ""
    if config.pretrained_words:
        if run.embeddings:
            vectors, found = load_word_vectors(
                run.embeddings,
                vocab.words,
                config.word_dim,
                limit=run.embeddings_limit,
                seed=run.seed,
                random_pad_row=run.protocol.pad_inputs == "original",
                oov_words=out_of_vocabulary(corpus, vocab.words) if run.protocol.oov_vector == "oov-word" else (),
            )
            vectors_note = f"pretrained vectors for {found:,} of {len(vocab.words):,} words from {run.embeddings}"
        else:
            vectors_note = (
                "no --embeddings given: frozen random uniform(-0.05, 0.05) word vectors are used, "
                "so the numbers are not comparable to the paper's fastText runs"
            )
    note = " ".join(s for s in [corpus.note, f"(--limit {run.limit})" if run.limit else ""] if s)
    encode = lambda sentences: encode_split(sentences, vocab, config.max_len, config.max_word_len)
    splits = {name: encode(getattr(corpus, name)) for name in ("train", "dev", "test")}
    fingerprint = DataFingerprint.measure(
        run.data,
        corpus_files(run.preset, run.data),
        {
            "words vocabulary": vocab.words.tokens,
            "chars vocabulary": vocab.chars.tokens,
            "tags vocabulary": vocab.tags.tokens,
            "ambiguous words": sorted(vocab.ambiguous),
            **{f"{name} split": list(dataclasses.astuple(split)) for name, split in splits.items()},
            "word vectors": vectors,
        },
    )
    return PreparedData(
        vocab,
        splits["train"],
        splits["dev"],
        splits["test"],
        corpus.name,
        note,
        corpus.name == "PTB-sample",
        vectors,
        vectors_note,
        fingerprint,
        unseen_tags(corpus.train, corpus.dev + corpus.test),
    )


def unseen_tags(train, evaluated) -> dict[str, int]:
    """Tags of `evaluated` sentences that no training sentence has, with their token counts:
    the model never learns them, so each of their tokens is counted wrong."""
    seen = {tag for sentence in train for _, tag in sentence}
    counts: dict[str, int] = {}
    for sentence in evaluated:
        for _, tag in sentence:
            if tag not in seen:
                counts[tag] = counts.get(tag, 0) + 1
    return dict(sorted(counts.items()))


def describe_unseen_tags(counts: dict[str, int], split: str = "dev/test") -> str:
    listed = ", ".join(f"{tag} ({n:,} token{'s' * (n != 1)})" for tag, n in counts.items())
    return f"{split} tag(s) never seen in training, so always counted wrong: {listed}"


@dataclass(frozen=True)
class DevScore:
    """Dev accuracy over non-PAD tokens: exact, and as the original's `val_true_acc`
    (per batch of `batch_size` sequences, averaged over batches)."""

    exact: float
    batch_mean: float

    @classmethod
    def measure(cls, model: keras.Model, run: RunConfig, dev: EncodedSplit) -> DevScore:
        predicted = predict_tags(model, dev, run.eval_batch_size)
        return cls(token_accuracy(predicted, dev.tags), batch_mean_accuracy(predicted, dev.tags, run.batch_size))

    def selection(self, protocol: Protocol) -> float:
        """The early-stopping metric of `protocol`."""
        return self.batch_mean if protocol.early_stopping == "batch-mean" else self.exact

    def columns(self) -> dict:
        return {"dev_accuracy": round(self.exact, 6), "dev_batch_mean_accuracy": round(self.batch_mean, 6)}


@dataclass
class TrainState:
    """Where training stands after the last finished epoch (checkpoint/state.json)."""

    epoch: int = 0
    step: int = 0
    best_dev: float = -1.0  # the best early-stopping metric so far
    best_epoch: int = 0
    bad_epochs: int = 0
    seconds: float = 0.0
    history: list[dict] = field(default_factory=list)
    curve: list[dict] = field(default_factory=list)

    def should_continue(self, run: RunConfig) -> bool:
        return self.epoch < run.epochs and self.bad_epochs < run.patience

    def end_epoch(self, row: dict, selection: float, seconds: float) -> bool:
        """Record a finished epoch; return whether it improved the early-stopping metric
        (strictly, as Keras' EarlyStopping with min_delta 0)."""
        improved = selection > self.best_dev
        self.epoch, self.seconds = row["epoch"], self.seconds + seconds
        self.history.append(row)
        if improved:
            self.best_dev, self.best_epoch, self.bad_epochs = selection, self.epoch, 0
        else:
            self.bad_epochs += 1
        return improved

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, where: Path | None = None) -> TrainState:
        """Read state.json, checking types and that its numbers agree with each other."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        check_types(cls, {k: v for k, v in values.items() if k not in ("history", "curve")}, where, "state")
        for key in ("history", "curve"):
            rows = values.get(key, [])
            if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
                raise ConvattError(f"damaged state: {key} is not a list of rows", where)
        state = cls(**values)
        consistent = (
            1 <= state.epoch == len(state.history)
            and 1 <= state.best_epoch <= state.epoch
            and 0 <= state.bad_epochs <= state.epoch
            and state.step >= 0
        )
        if not consistent:
            raise ConvattError(
                f"damaged state: epoch {state.epoch}, best epoch {state.best_epoch}, "
                f"{len(state.history)} history rows do not agree",
                where,
            )
        return state


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
        line = (
            f"epoch {self.epoch}/{self.epochs}  batch {i}/{self.n}  loss {loss:.4f}  "
            f"train acc {100 * acc:.2f}%  {rate:.1f} batches/s"
        )
        if self.tty:
            print("\r" + line, end="\n" if i == self.n else "", flush=True)
        else:
            self.log(line)


def train_run(run: RunConfig, log: Callable[[str], None] = print) -> dict:
    """Train (or resume, or skip if complete) one run; return its result.json content."""
    run.tagger_config()  # unknown names fail before anything is written
    run.check()
    out = Path(run.out)
    _check_out_dir(out, run)
    if (out / RESULT_FILE).exists():
        log(f"{out}: complete (result.json exists); nothing to do")
        return RunResult.load(out).to_json()
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with run_lock(out / LOCK_FILE):
            if (out / RESULT_FILE).exists():  # finished by another process meanwhile
                return RunResult.load(out).to_json()
            return Trainer(run, out, log).run().to_json()
    except OSError as e:  # e.g. mkdir or the lock: a read-only or full file system, a file in the way
        raise ConvattError(os_error_reason(e), e.filename or out) from e
    finally:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # failed before writing anything: leave no trace


def _check_out_dir(out: Path, run: RunConfig) -> None:
    """`out` is new, empty, a launcher's fresh directory (train.log) or this same run;
    convatt never writes into a directory holding anything else."""
    if out.exists() and not out.is_dir():
        raise ConvattError("--out names a file, not a directory", out)
    if not out.is_dir():
        return
    if (out / CONFIG_FILE).exists():
        saved_run_config(out, run)  # the same run, or an error naming the options that would resume it
        return
    foreign = foreign_entries(out)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ConvattError(
            f"--out is not empty and is not a convatt run directory (no config.json; it holds "
            f"{shown}); convatt does not write into it: use a new or empty directory",
            out,
        )


def configure_matmul_precision(protocol: Protocol) -> None:
    """Full float32 matmuls for the original protocol (TF 1.15 had no TF32), else the
    backend's default (TF32 on Ampere and later NVIDIA GPUs). No effect on a CPU."""
    full = protocol.matmul_precision == "highest"
    if keras.backend.backend() == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest" if full else None)
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(not full)


class Trainer:
    """One run's training, from its data to its result.json."""

    def __init__(self, run: RunConfig, out: Path, log: Callable[[str], None]):
        self.run_config, self.out, self.log = run, out, log
        self.config = run.tagger_config()
        self.ckpt = out / CHECKPOINT_DIR

    def run(self) -> RunResult:
        run = self.run_config
        data = prepare_data(run, self.config)  # bad input fails here, before the directory is claimed
        remove_temporaries(self.out, lambda name: name in RUN_FILES)
        remove_temporaries(self.ckpt, lambda name: bool(CHECKPOINT_FILE.fullmatch(name)))
        self._check_same_data(data)
        run.save(self.out, fingerprint=data.fingerprint.to_json())
        self._describe(data)
        configure_matmul_precision(run.protocol)
        model, state = self._restore_or_build(data)
        n_params = count_parameters(model)
        self.log(
            f"{self.config.variant} ({self.config.spec.label}), {n_params:,} parameters, seed {run.seed}, "
            f"protocol {run.protocol.label()}, {run.precision}"
        )
        while state.should_continue(run):
            improved = self._train_epoch(model, data, state)
            self._save_checkpoint(model, state, improved)
        if state.bad_epochs >= run.patience:
            self.log(f"early stopping: no dev improvement for {run.patience} epochs")
        model.load_weights(self.ckpt / best_weights_file(state.best_epoch))
        result = self._result(model, data, state, n_params)
        write_atomically(self.out / MODEL_FILE, model.save)
        write_sentence_scores(self.out, model, run, self.config.max_len, {"test": data.test, "dev": data.dev})
        result.save(self.out)
        self._remove_checkpoint()
        self._report(result, state)
        return result

    def _check_same_data(self, data: PreparedData) -> None:
        """Before resuming a checkpoint: refuse data that differ from those it was trained on."""
        if not (self.ckpt / STATE_FILE).exists():
            return  # nothing trained yet: the data may have been fixed since
        config_path = self.out / CONFIG_FILE
        recorded = read_json(config_path).get(FINGERPRINT_KEY)
        if recorded is None:
            changed = self._changed_vocabularies(data.vocab)
            self.log(
                "note: this run was started by an older convatt that kept no data fingerprint: "
                "resuming with only its vocabularies checked"
            )
        else:
            changed = DataFingerprint.from_json(recorded, config_path).differences(data.fingerprint)
        if changed:
            raise ConvattError(
                f"the data differ from those this run was trained on ({'; '.join(changed)}), so its "
                f"checkpoint cannot be resumed: restore the data, or train into another --out (or delete "
                f"{self.out}) to start over",
                self.run_config.data,
            )

    def _changed_vocabularies(self, now: Vocabularies) -> list[str]:
        """For a run without a fingerprint: which of its saved vocabularies differ from `now`."""
        path = self.out / VOCAB_FILE
        if not path.exists():
            return []
        saved = Vocabularies.load(path)
        return [
            f"{name} vocabulary changed"
            for name in ("words", "chars", "tags")
            if getattr(saved, name).tokens != getattr(now, name).tokens
        ]

    def _remove_checkpoint(self) -> None:
        """Delete the checkpoint's files (only ours) and then the directory, if nothing else is in it."""
        if not self.ckpt.is_dir():
            return
        for f in self.ckpt.iterdir():
            if CHECKPOINT_FILE.fullmatch(f.name):
                f.unlink(missing_ok=True)
        if any(self.ckpt.iterdir()):
            self.log(f"note: {self.ckpt} holds files convatt did not write; they are left there")
        else:
            self.ckpt.rmdir()

    def _describe(self, data: PreparedData) -> None:
        unseen = describe_unseen_tags(data.unseen_tags) if data.unseen_tags else ""
        for note in (data.note, data.vectors_note, unseen):
            if note:
                self.log(f"note: {note}")
        data.vocab.save(self.out / VOCAB_FILE)
        v = data.vocab
        self.log(
            f"{data.corpus_name}: {len(data.train):,} / {len(data.dev):,} / {len(data.test):,} "
            f"train/dev/test sequences; {len(v.words):,} words, {len(v.chars):,} chars, {len(v.tags):,} labels"
        )

    def _restore_or_build(self, data: PreparedData) -> tuple[keras.Model, TrainState]:
        if (self.ckpt / STATE_FILE).exists():  # written last: an epoch's checkpoint is complete
            model, state = self._restore()
            self.log(
                f"resuming from epoch {state.epoch} (best dev {100 * state.best_dev:.2f}% at epoch {state.best_epoch})"
            )
            return model, state
        keras.utils.set_random_seed(self.run_config.seed)
        v = data.vocab
        model = build_tagger(
            self.config,
            len(v.words),
            len(v.chars),
            len(v.tags),
            data.word_vectors,
            jit_compile=self.run_config.jit_compile,
            protocol=self.run_config.protocol,
            dtype_policy=self.run_config.precision,
        )
        return model, TrainState()

    def _restore(self) -> tuple[keras.Model, TrainState]:
        """The last finished epoch's model and state, every checkpoint file checked first."""
        remedy = (
            f"the checkpoint is damaged and older epochs are not kept: delete {self.ckpt} to "
            "train this run again from epoch 1"
        )
        path = self.ckpt / STATE_FILE
        saved = read_json(path, remedy)
        try:
            state = TrainState.from_json(saved, path)
        except ConvattError as e:
            raise ConvattError(f"{e.message}; {remedy}", path) from None
        model = load_keras_model(self.ckpt / epoch_model_file(state.epoch), remedy)
        seed_states, variables = saved.get("seed_states"), _seed_states(model)
        if not (isinstance(seed_states, list) and len(seed_states) == len(variables)):
            raise ConvattError(f"damaged state: seed_states do not match the model's; {remedy}", path)
        try:
            for variable, value in zip(variables, seed_states):
                variable.assign(np.asarray(value, dtype=variable.dtype).reshape(variable.shape))
        except (ValueError, TypeError) as e:
            raise ConvattError(f"damaged state: seed_states ({e}); {remedy}", path) from None
        best = self.ckpt / best_weights_file(state.best_epoch)
        try:  # now, not after the remaining epochs
            check_weights_file(best, remedy)
        except ConvattError:
            if state.best_epoch != state.epoch:
                raise
            write_atomically(best, model.save_weights)  # the best epoch is the last one: rewrite its weights
            self.log(f"note: {best.name} was damaged; rewritten from epoch-{state.epoch}.keras")
        return model, state

    def _train_epoch(self, model: keras.Model, data: PreparedData, state: TrainState) -> bool:
        """One epoch of training, its dev score and history row; whether it improved."""
        run, epoch, start = self.run_config, state.epoch + 1, time.perf_counter()
        shuffle_seed = int(np.random.SeedSequence([run.seed, epoch]).generate_state(1)[0])
        n_batches = math.ceil(len(data.train) / run.batch_size)
        progress = Progress(self.log, epoch, run.epochs, n_batches)
        loss_sum = correct = tokens = 0.0
        batches = iterate_batches(data.train, run.batch_size, shuffle_seed, few_shapes=bool(model.jit_compile))
        for i, (x, y, w) in enumerate(batches, start=1):
            logs = self._train_step(model, x, y, w, epoch, i)
            loss_sum += logs["loss"]
            correct += logs["sparse_categorical_accuracy"] * float(w.sum())
            tokens += float(w.sum())
            state.step += 1
            self._record_curve(model, data, state, epoch)
            progress.update(i, loss_sum / i, correct / max(tokens, 1))
            interrupt.check()
        dev = DevScore.measure(model, run, data.dev)
        seconds = time.perf_counter() - start
        row = {
            "epoch": epoch,
            "loss": round(loss_sum / max(n_batches, 1), 6),
            "train_accuracy": round(correct / max(tokens, 1), 6),
            **dev.columns(),
            "seconds": round(seconds, 2),
        }
        improved = state.end_epoch(row, dev.selection(run.protocol), seconds)
        shown = f"dev accuracy {100 * dev.exact:.2f}% (batch mean {100 * dev.batch_mean:.2f}%)"
        self.log(f"epoch {epoch}: {shown}{' (best)' if improved else ''}  {seconds:.1f} s")
        return improved

    def _train_step(self, model: keras.Model, x, y, w, epoch: int, batch: int) -> dict:
        try:
            logs = {k: float(v) for k, v in model.train_on_batch(x, y, sample_weight=w, return_dict=True).items()}
        except Exception:  # a backend can fail inside the update once values are NaN
            if _weights_finite(model):
                raise
            logs = {"loss": float("nan")}
        if not math.isfinite(logs["loss"]):
            raise ConvattError(
                f"the loss became {logs['loss']} at epoch {epoch}, batch {batch}: training "
                f"diverged. Epoch {epoch - 1} and earlier are kept; check the data and settings",
                self.out,
            )
        return logs

    def _record_curve(self, model: keras.Model, data: PreparedData, state: TrainState, epoch: int) -> None:
        run = self.run_config
        due = run.curve_every and state.step % run.curve_every == 0
        if due and (run.curve_until < 0 or state.step <= run.curve_until):
            state.curve.append({"step": state.step, "epoch": epoch, **DevScore.measure(model, run, data.dev).columns()})

    def _save_checkpoint(self, model: keras.Model, state: TrainState, improved: bool) -> None:
        """Write the epoch's files under new names, then state.json naming them, then
        delete the older files: a kill at any point leaves a consistent checkpoint."""
        self.ckpt.mkdir(exist_ok=True)
        if improved:
            write_atomically(self.ckpt / best_weights_file(state.epoch), model.save_weights)
        write_atomically(self.ckpt / epoch_model_file(state.epoch), model.save)
        seed_states = [keras.ops.convert_to_numpy(v).tolist() for v in _seed_states(model)]
        write_json(self.ckpt / STATE_FILE, {**state.to_json(), "seed_states": seed_states})
        keep = {best_weights_file(state.best_epoch), epoch_model_file(state.epoch), STATE_FILE}
        for f in self.ckpt.iterdir():
            if f.name not in keep and CHECKPOINT_FILE.fullmatch(f.name):  # never a file of someone else's
                f.unlink(missing_ok=True)
        write_csv(self.out / HISTORY_FILE, state.history, HISTORY_COLUMNS)
        write_csv(self.out / CURVE_FILE, state.curve, CURVE_COLUMNS)

    def _result(self, model: keras.Model, data: PreparedData, state: TrainState, n_params: int) -> RunResult:
        run, tag_names = self.run_config, list(data.vocab.tags.tokens)
        return RunResult(
            preset=run.preset,
            variant=run.variant,
            label=self.config.spec.label,
            seed=run.seed,
            corpus=data.corpus_name,
            is_sample=data.is_sample,
            corpus_note=data.note,
            vectors_note=data.vectors_note,
            mask_padding=run.mask_padding,
            dev=evaluate(model, data.dev, tag_names, run.eval_batch_size),
            test=evaluate(model, data.test, tag_names, run.eval_batch_size),
            parameters=n_params,
            epochs_run=state.epoch,
            best_epoch=state.best_epoch,
            wall_seconds=round(state.seconds, 1),
            backend=keras.backend.backend(),
            convatt_version=__version__,
            protocol=run.protocol.label(),
            source_commit=provenance.source_commit(),
            machine=provenance.machine(),
        )

    def _report(self, result: RunResult, state: TrainState) -> None:
        fmt = lambda v: "n/a" if v is None else f"{100 * v:.2f}"
        t = result.test
        self.log(
            f"done: test accuracy all {fmt(t['all'])}  OOV {fmt(t['oov'])}  ambiguous {fmt(t['ambiguous'])}  "
            f"(best epoch {state.best_epoch} of {state.epoch}, {state.seconds:.0f} s) -> {self.out}"
        )


def _seed_states(model: keras.Model) -> list:
    """The dropout RNG states: `.keras` files don't keep them, the checkpoint must."""
    return [v for v in model.variables if "seed_generator_state" in v.path]


def _weights_finite(model: keras.Model) -> bool:
    return all(np.isfinite(keras.ops.convert_to_numpy(w)).all() for w in model.trainable_weights)
