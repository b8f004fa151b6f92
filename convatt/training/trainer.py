"""Train one tagger with the paper's protocol and write a complete run directory.

Protocol (REFERENCE.md; `convatt.protocol` for the original code's computations and
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
    checkpoint/     while training: the last finished epoch (and the one before), to resume from

A run trains through `keras.Model.fit`, one callback per concern of the protocol
(`convatt.training.callbacks`), the user's callbacks after them. A rerun with the same
options resumes from the last finished epoch (`fit`'s `initial_epoch`); a run that is
killed loses at most the epoch in progress.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from convatt.data.corpus import describe_unseen_tags, unseen_tags
from convatt.errors import ConvattError
from convatt.model.prediction import evaluate
from convatt.model.tagger import build_tagger, count_parameters
from convatt.model.variants import TaggerConfig
from convatt.protocol import Protocol
from convatt.run import provenance
from convatt.run.advice import saved_run_config
from convatt.run.fingerprint import DataFingerprint
from convatt.run.modelfiles import check_keras_file
from convatt.run.schema import (
    CHECKPOINT_DIR,
    CHECKPOINT_FILE,
    CONFIG_FILE,
    FINGERPRINT_KEY,
    LOCK_FILE,
    MODEL_FILE,
    RESULT_FILE,
    RUN_FILES,
    VOCAB_FILE,
    RunConfig,
    RunResult,
    foreign_entries,
)
from convatt.run.storage import (
    os_error_reason,
    read_json,
    remove_temporaries,
    run_lock,
    write_atomically,
)
from convatt.training import callbacks as cb
from convatt.training import interrupt
from convatt.training.callbacks import CURVE_COLUMNS, HISTORY_COLUMNS, Progress
from convatt.training.checkpoints import Checkpoints
from convatt.training.feed import TrainBatches
from convatt.training.sentence_scores import write_sentence_scores
from convatt.training.state import DevScore, TrainState

__all__ = ["CURVE_COLUMNS", "HISTORY_COLUMNS", "DevScore", "Progress", "TrainOptions", "TrainState", "train_run"]
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
    vectors, vectors_note = _word_vectors(run, config, corpus, vocab) if config.pretrained_words else (None, "")
    note = " ".join(s for s in [corpus.note, f"(--limit {run.limit})" if run.limit else ""] if s)
    encode = lambda sentences: encode_split(sentences, vocab, config.max_len, config.max_word_len)
    splits = {name: encode(getattr(corpus, name)) for name in ("train", "dev", "test")}
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
        _data_fingerprint(run, vocab, splits, vectors),
        unseen_tags(corpus.train, corpus.dev + corpus.test),
    )


def _word_vectors(run: RunConfig, config: TaggerConfig, corpus, vocab: Vocabularies) -> tuple[np.ndarray | None, str]:
    """The frozen word vectors of a tagger with pretrained words (None: random ones), and a note on them."""
    if not run.embeddings:
        note = (
            "no --embeddings given: frozen random uniform(-0.05, 0.05) word vectors are used, "
            "so the numbers are not comparable to the paper's fastText runs"
        )
        return None, note
    vectors, found = load_word_vectors(
        run.embeddings,
        vocab.words,
        config.word_dim,
        limit=run.embeddings_limit,
        seed=run.seed,
        random_pad_row=run.protocol.pad_inputs == "original",
        oov_words=out_of_vocabulary(corpus, vocab.words) if run.protocol.oov_vector == "oov-word" else (),
    )
    return vectors, f"pretrained vectors for {found:,} of {len(vocab.words):,} words from {run.embeddings}"


def _data_fingerprint(run: RunConfig, vocab: Vocabularies, splits: dict, vectors) -> DataFingerprint:
    """What the run trains on: its data files, vocabularies, encoded splits and word vectors."""
    return DataFingerprint.measure(
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


def train_run(
    run: RunConfig,
    log: Callable[[str], None] = print,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    tensorboard: str | Path | None = None,
) -> dict:
    """Train (or resume, or skip if complete) one run; return its result.json content.
    `callbacks` (Keras callbacks) run after the run's own; `tensorboard`: a log directory."""
    return train_result(run, log, callbacks, tensorboard).to_json()


def train_result(
    run: RunConfig,
    log: Callable[[str], None] = print,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    tensorboard: str | Path | None = None,
) -> RunResult:
    """`train_run`, returning the typed `RunResult`."""
    run.check()
    out = Path(run.out)
    _check_out_dir(out, run)
    if (out / RESULT_FILE).exists():
        result = RunResult.load(out)
        _check_finished_model(out)
        log(f"{out}: complete (result.json exists, model.keras checked); nothing to do")
        return result
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with run_lock(out / LOCK_FILE):
            if (out / RESULT_FILE).exists():  # finished by another process meanwhile
                saved_run_config(out, run, finished=True)
                return RunResult.load(out)
            return _trainer_class(run)(run, out, log, list(callbacks), tensorboard).run()
    except OSError as e:  # e.g. mkdir or the lock: a read-only or full file system, a file in the way
        raise ConvattError(os_error_reason(e), e.filename or out) from e
    finally:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # failed before writing anything: leave no trace


def _trainer_class(run: RunConfig) -> type[Trainer]:
    """The tagger's `Trainer`, or a causal sequence task's (`convatt.training.sequence_trainer`)."""
    from convatt.data.formats import is_sequence_preset

    if is_sequence_preset(run.preset):
        from convatt.training.sequence_trainer import SequenceTrainer

        return SequenceTrainer
    return Trainer


def _check_finished_model(out: Path) -> None:
    """A finished run's model.keras is whole (every member's checksum), before "nothing to do"."""
    checkpoint = Checkpoints(out / CHECKPOINT_DIR, print)
    again = "training resumes from its checkpoint" if checkpoint.exists else "training starts again from epoch 1"
    check_keras_file(
        out / MODEL_FILE,
        f"the run's result.json stands but its model cannot be read: delete {out / RESULT_FILE} and "
        f"{out / MODEL_FILE} and rerun the same command ({again})",
    )


def _check_out_dir(out: Path, run: RunConfig) -> None:
    """`out` is new, empty, a launcher's fresh directory (train.log) or this same run;
    convatt never writes into a directory holding anything else."""
    if out.exists() and not out.is_dir():
        raise ConvattError("--out names a file, not a directory", out)
    if not out.is_dir():
        return
    if (out / CONFIG_FILE).exists():  # the same run, or an error naming the options that would resume it
        saved_run_config(out, run, finished=(out / RESULT_FILE).exists())
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

    def __init__(
        self,
        run: RunConfig,
        out: Path,
        log: Callable[[str], None],
        callbacks: list[keras.callbacks.Callback] | None = None,
        tensorboard: str | Path | None = None,
    ):
        self.run_config, self.out, self.log = run, out, log
        self.user_callbacks, self.tensorboard = callbacks or [], tensorboard
        self.config = run.tagger_config()
        self.ckpt = out / CHECKPOINT_DIR
        self.checkpoints = Checkpoints(self.ckpt, log)

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
        if state.should_continue(run):
            self._fit(model, data, state)
        else:  # killed after its last checkpoint, before result.json
            model.load_weights(self.checkpoints.best_weights(state.best_epoch))
        result = self._result(model, data, state, n_params)
        write_atomically(self.out / MODEL_FILE, model.save)
        write_sentence_scores(self.out, model, run, self.config.max_len, {"test": data.test, "dev": data.dev})
        result.save(self.out)
        self.checkpoints.remove()
        self._report(result, state)
        return result

    def _fit(self, model: keras.Model, data: PreparedData, state: TrainState) -> None:
        """Train the remaining epochs through `fit`; the best epoch's weights are restored."""
        run = self.run_config
        batches = self._train_batches(data, state, model)
        callbacks, stop, meter = self._callbacks(data, state, batches)
        try:
            model.fit(
                batches.for_fit(),
                epochs=run.epochs,
                initial_epoch=state.epoch,
                steps_per_epoch=batches.n_batches,
                shuffle=False,  # the batches come shuffled per epoch (TrainBatches)
                callbacks=callbacks,
                verbose=1 if self._terminal() else 0,
            )
        except (ConvattError, KeyboardInterrupt):
            raise
        except Exception:  # a backend can fail inside the update once values are NaN
            if cb.weights_finite(model):
                raise
            meter.check_finite(float("nan"))
        if stop.stopped:  # in the middle of an epoch, which is not kept
            interrupt.check()  # a stop request ends the run: KeyboardInterrupt
            if state.epoch == 0:  # a user's callback, before any epoch ended
                raise ConvattError("a callback stopped training before the first epoch ended: nothing to evaluate")
            self.log(f"stopped by a callback in epoch {state.epoch + 1}; the best epoch so far is evaluated")
            model.load_weights(self.checkpoints.best_weights(state.best_epoch))

    def _train_batches(self, data: PreparedData, state: TrainState, model: keras.Model) -> TrainBatches:
        """The batches of the epochs left to train."""
        run = self.run_config
        return TrainBatches(data.train, run.batch_size, run.seed, state.epoch + 1, bool(model.jit_compile))

    def _terminal(self) -> bool:
        """A live progress bar (Keras') on a terminal; lines (`Progress`) in logs."""
        import sys

        return self.log is print and sys.stdout.isatty()

    def _callbacks(self, data: PreparedData, state: TrainState, batches: TrainBatches):
        """The run's callbacks (see `convatt.training.callbacks`), then the user's."""
        run, log, stop = self.run_config, self.log, cb.StopRequests(batches.n_batches)
        meter = cb.EpochMeter(state, stop, batches, self.out)
        evaluation = cb.DevEvaluation(state, stop, run, data.dev, meter)
        judge = cb.EarlyStopping(state, stop, run, evaluation, log)
        judge.checkpoints = self.checkpoints
        progress = [keras.callbacks.ProgbarLogger()] if self._terminal() else []
        every = 0 if self._terminal() else cb.progress_every()
        lines = [cb.ProgressLines(log, run.epochs, batches.n_batches, every)] if every else []
        board = cb.tensorboard(state, stop, Path(self.tensorboard)) if self.tensorboard else []
        callbacks = [
            meter,
            cb.DevCurve(state, stop, run, data.dev, meter),
            *lines,
            stop,
            evaluation,
            judge,
            cb.EpochCheckpoint(state, stop, self.checkpoints, judge),
            *progress,
            cb.EpochSummary(state, stop, log),
            *board,
            *self.user_callbacks,
        ]
        return callbacks, stop, meter

    def _check_same_data(self, data: PreparedData) -> None:
        """Before resuming a checkpoint: refuse data that differ from those it was trained on."""
        if not self.checkpoints.exists:
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

    def _describe(self, data: PreparedData) -> None:
        unseen = describe_unseen_tags(data.unseen_tags) if data.unseen_tags else ""
        for note in (data.note, data.vectors_note, unseen):
            if note:
                self.log(f"note: {note}")
        text = data.vocab.to_json()  # written atomically: a kill never leaves half a vocab.json
        write_atomically(self.out / VOCAB_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        v = data.vocab
        self.log(
            f"{data.corpus_name}: {len(data.train):,} / {len(data.dev):,} / {len(data.test):,} "
            f"train/dev/test sequences; {len(v.words):,} words, {len(v.chars):,} chars, {len(v.tags):,} labels"
        )

    def _restore_or_build(self, data: PreparedData) -> tuple[keras.Model, TrainState]:
        if self.checkpoints.exists:
            model, state = self.checkpoints.restore()
            self.log(
                f"resuming from epoch {state.epoch} (best dev {100 * state.best_dev:.2f}% at epoch {state.best_epoch})"
            )
            return model, state
        keras.utils.set_random_seed(self.run_config.seed)  # the initial weights, as the run's seed says
        return self._build_model(data), TrainState()

    def _build_model(self, data: PreparedData) -> keras.Model:
        v = data.vocab
        return build_tagger(
            self.config,
            len(v.words),
            len(v.chars),
            len(v.tags),
            data.word_vectors,
            jit_compile=self.run_config.jit_compile,
            protocol=self.run_config.protocol,
            dtype_policy=self.run_config.precision,
        )

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
            **self._provenance(state, n_params),
        )

    def _provenance(self, state: TrainState, n_params: int) -> dict:
        """result.json's fields on how the run was made, the same for every kind of run."""
        return dict(
            parameters=n_params,
            epochs_run=state.epoch,
            best_epoch=state.best_epoch,
            wall_seconds=round(state.seconds, 1),
            backend=keras.backend.backend(),
            convatt_version=__version__,
            protocol=self.run_config.protocol.label(),
            **provenance.run_record(),
        )

    def _report(self, result: RunResult, state: TrainState) -> None:
        fmt = lambda v: "n/a" if v is None else f"{100 * v:.2f}"
        t = result.test
        self.log(
            f"done: test accuracy all {fmt(t['all'])}  OOV {fmt(t['oov'])}  ambiguous {fmt(t['ambiguous'])}  "
            f"(best epoch {state.best_epoch} of {state.epoch}, {state.seconds:.0f} s) -> {self.out}"
        )
