"""The one training loop of a run: its data, its model, `keras.Model.fit`, its result.

`Trainer.run` takes a run from its data to its result.json, the same for every kind of
run: it claims the run directory, refuses to resume on changed data, restores the last
checkpoint or builds the model, trains through `fit` with one callback per concern of
the protocol (`convatt.training.callbacks`, the user's callbacks after them), restores
the best epoch's weights, and writes model.keras and, last, result.json. What differs
between kinds of run is in the hooks a subclass overrides:

    prepare()       read and encode the data (bad input fails here, before anything is written)
    describe(data)  log the data and write vocab.json
    build(data)     the compiled model
    model_note(data)      the model's line in the log, after its parameters and seed
    train_rows(data, model)   the training split's rows as batches (`convatt.training.feed.TrainRows`)
    measure_dev(model, dev)   the model's dev score (`DevScore`), each epoch and on the curve
    result(...)     evaluate the best epoch into a `RunResult` (and its per-sentence files)
    test_summary(result)  the test scores on the last line of the log

`convatt.training.tagger_trainer.TaggerTrainer` (the paper's tagger) and
`convatt.training.sequence_trainer.SequenceTrainer` (a causal sequence task) are the two
kinds; `convatt.training.trainer.train_run` chooses between them.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Callable
from pathlib import Path

import keras

from convatt.errors import ConvattError
from convatt.model.parameters import count_parameters
from convatt.model.variants import VARIANTS
from convatt.protocol import TrainingProtocol
from convatt.rundir import provenance
from convatt.rundir.fingerprint import DataFingerprint
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import CHECKPOINT_DIR, CHECKPOINT_FILE, CONFIG_FILE, FINGERPRINT_KEY, MODEL_FILE, RUN_FILES
from convatt.rundir.storage import read_json, remove_temporaries, write_atomically
from convatt.training import callbacks as cb
from convatt.training import interrupt, start_from
from convatt.training.checkpoints import Checkpoints
from convatt.training.feed import TrainBatches, TrainRows, batches_per_epoch
from convatt.training.start_from import SourceRun
from convatt.training.state import DevScore, TrainState


class PreparedRun(typing.Protocol):
    """What the loop reads of a run's prepared data; each kind of run adds its own."""

    train: typing.Any
    dev: typing.Any
    fingerprint: DataFingerprint
    corpus_name: str  # result.json's corpus
    note: str  # what was done to the corpus (--limit), result.json's corpus_note


def configure_matmul_precision(protocol: TrainingProtocol) -> None:
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
    """One run's training, from its data to its result.json; a subclass supplies the hooks."""

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
        self.ckpt = out / CHECKPOINT_DIR
        self.checkpoints = Checkpoints(self.ckpt, log)

    # The hooks: what differs between kinds of run.

    def prepare(self) -> PreparedRun:
        """The run's data, read and encoded (its fingerprint measured)."""
        raise NotImplementedError

    def describe(self, data: PreparedRun) -> None:
        """Log the data's notes and sizes; write vocab.json (atomically)."""
        raise NotImplementedError

    def build(self, data: PreparedRun) -> keras.Model:
        """The compiled model, its weights initialised from the run's seed (set before)."""
        raise NotImplementedError

    def model_note(self, data: PreparedRun) -> str:
        """The end of the model's line in the log."""
        raise NotImplementedError

    def train_rows(self, data: PreparedRun, model: keras.Model) -> TrainRows:
        """The training split's rows as `model`'s batches (the loop orders them into epochs)."""
        raise NotImplementedError

    def measure_dev(self, model: keras.Model, dev: typing.Any) -> DevScore:
        """`model`'s score on the dev split `dev` (`data.dev`)."""
        raise NotImplementedError

    def result(self, model: keras.Model, data: PreparedRun, state: TrainState, n_params: int) -> RunResult:
        """The best epoch's model evaluated into result.json's content (`result_fields` for its
        common fields); any per-sentence files are written here."""
        raise NotImplementedError

    def test_summary(self, result: RunResult) -> str:
        """The test scores on the log's last line."""
        raise NotImplementedError

    causal_attention = False
    """Whether the model's attention is causal (where a convolution's identity tap lies, `--from`)."""

    def vocabularies(self, data: PreparedRun) -> dict:
        """vocab.json's content for `data` (compared with the run a `--from` run starts from)."""
        raise NotImplementedError

    def vocabulary_changes(self, data: PreparedRun) -> list[str]:
        """For a run started by a convatt that kept no data fingerprint: what of its saved
        vocabularies differs from `data`'s (default: nothing to compare)."""
        return []

    # The loop.

    def run(self) -> RunResult:
        run = self.run_config
        data = self.prepare()  # bad input fails here, before the directory is claimed
        source = self._source_run(data)  # and a --from that cannot apply
        remove_temporaries(self.out, lambda name: name in RUN_FILES)
        remove_temporaries(self.ckpt, lambda name: bool(CHECKPOINT_FILE.fullmatch(name)))
        self._check_same_data(data)
        run.save(self.out, fingerprint=data.fingerprint.to_json())
        self.describe(data)
        configure_matmul_precision(run.protocol)
        model, state = self._restore_or_build(data, source)
        n_params = count_parameters(model)
        label = VARIANTS[run.variant].label
        self.log(f"{run.variant} ({label}), {n_params:,} parameters, seed {run.seed}, {self.model_note(data)}")
        if state.should_continue(run):
            self._fit(model, data, state)
        else:  # killed after its last checkpoint, before result.json
            model.load_weights(self.checkpoints.best_weights(state.best_epoch))
        result = self.result(model, data, state, n_params)
        write_atomically(self.out / MODEL_FILE, model.save)
        result.save(self.out)  # last: a run directory with result.json is complete
        self.checkpoints.remove()
        self.log(
            f"done: {self.test_summary(result)}  (best epoch {state.best_epoch} of {state.epoch}, "
            f"{state.seconds:.0f} s) -> {self.out}"
        )
        return result

    def _fit(self, model: keras.Model, data: PreparedRun, state: TrainState) -> None:
        """Train the remaining epochs through `fit`; the best epoch's weights are restored."""
        run = self.run_config
        batches = TrainBatches(self.train_rows(data, model), run.batch_size, run.seed, first_epoch=state.epoch + 1)
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

    def _terminal(self) -> bool:
        """A live progress bar (Keras') on a terminal; lines (`Progress`) in logs."""
        return self.log is print and sys.stdout.isatty()

    def _callbacks(self, data: PreparedRun, state: TrainState, batches: TrainBatches):
        """The run's callbacks (see `convatt.training.callbacks`), then the user's."""
        run, log, stop = self.run_config, self.log, cb.StopRequests(batches.n_batches)
        meter = cb.EpochMeter(state, stop, batches, self.out)
        measure = lambda model: self.measure_dev(model, data.dev)
        evaluation = cb.DevEvaluation(state, stop, measure, meter)
        judge = cb.EarlyStopping(state, stop, run, evaluation, self.checkpoints, log)
        progress = [keras.callbacks.ProgbarLogger()] if self._terminal() else []
        every = 0 if self._terminal() else cb.progress_every()
        lines = [cb.ProgressLines(log, run.epochs, batches.n_batches, every)] if every else []
        board = cb.tensorboard(state, stop, Path(self.tensorboard)) if self.tensorboard else []
        callbacks = [
            meter,
            cb.DevCurve(state, stop, run, measure, meter),
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

    def _check_same_data(self, data: PreparedRun) -> None:
        """Before resuming a checkpoint: refuse data that differ from those it was trained on."""
        if not self.checkpoints.exists:
            return  # nothing trained yet: the data may have been fixed since
        config_path = self.out / CONFIG_FILE
        recorded = read_json(config_path).get(FINGERPRINT_KEY)
        if recorded is None:
            changed = self.vocabulary_changes(data)
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

    def _restore_or_build(self, data: PreparedRun, source: SourceRun | None) -> tuple[keras.Model, TrainState]:
        if self.checkpoints.exists:
            model, state = self.checkpoints.restore()
            self.log(
                f"resuming from epoch {state.epoch} (best dev {100 * state.best_dev:.2f}% at epoch {state.best_epoch})"
            )
            return model, state
        keras.utils.set_random_seed(self.run_config.seed)  # the initial weights, as the run's seed says
        model = self.build(data)
        if source is None:
            return model, TrainState()
        return model, TrainState(started_from=self._start_from(model, data, source).to_json())

    def _source_run(self, data: PreparedRun) -> SourceRun | None:
        """The finished run a `--from` run starts from, checked against this run and its data;
        None for a run from random weights or one that resumes its own checkpoint."""
        run = self.run_config
        if run.start_from is None or self.checkpoints.exists:
            return None
        source = start_from.read_source(run)
        start_from.check_vocabularies(source.path, self.vocabularies(data))
        if not start_from.same_data(source.path, data.fingerprint.to_json(), run.batch_size):
            return source
        start_step = source.best_epoch * batches_per_epoch(len(data.train), run.batch_size)
        return dataclasses.replace(source, same_data=True, start_step=start_step)

    def _start_from(self, model: keras.Model, data: PreparedRun, source: SourceRun) -> SourceRun:
        """`model` with `source`'s weights, its further modifications at identity; the dev score it
        starts with (the source's, to float rounding, where the data are the same)."""
        from convatt.rundir.modelfiles import MODEL_LOST_REMEDY, load_keras_model

        trained = load_keras_model(Path(source.path) / MODEL_FILE, MODEL_LOST_REMEDY)
        start_from.copy_source_weights(model, trained, self.causal_attention)
        dev = self.measure_dev(model, data.dev)
        self.log(
            f"started from {source.path} ({source.variant}, seed {source.seed}, its best epoch {source.best_epoch} "
            f"of {source.epochs_run}; commit {source.source_commit or 'unknown'}): dev {100 * dev.exact:.2f}% "
            f"before training (the source's: {'n/a' if source.dev is None else f'{100 * source.dev:.2f}%'})"
        )
        return dataclasses.replace(source, dev_at_start=dev.exact, dev_bits_at_start=dev.bits_per_symbol)

    def result_fields(self, data: PreparedRun, state: TrainState, n_params: int) -> dict:
        """result.json's fields that are the same for every kind of run: which run it is, on which
        corpus, how its training went, and how it was made (`provenance.run_record`)."""
        run = self.run_config
        return dict(
            preset=run.preset,
            variant=run.variant,
            label=VARIANTS[run.variant].label,
            seed=run.seed,
            corpus=data.corpus_name,
            corpus_note=data.note,
            protocol=run.protocol.label(),
            parameters=n_params,
            epochs_run=state.epoch,
            best_epoch=state.best_epoch,
            wall_seconds=round(state.seconds, 1),
            started_from=state.started_from,
            **provenance.run_record(),
        )
