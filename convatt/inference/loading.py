"""A finished run, loaded for use: its settings, vocabularies and best model.

`convatt tag`, `convatt evaluate` and `convatt inspect` read a run directory only
through this module (its file names: `convatt.rundir.schema`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from convatt.data import Corpus, Vocabularies, load_corpus
from convatt.data.formats import data_format
from convatt.errors import ConvattError
from convatt.model.variants import TaggerConfig
from convatt.rundir.modelfiles import load_keras_model
from convatt.rundir.schema import CONFIG_FILE, MODEL_FILE, TRAINED_RUN_FILES, VOCAB_FILE, RunConfig


@dataclass(frozen=True)
class RunSettings:
    """What a run was trained with, as far as using its model needs."""

    run_config: RunConfig  # config.json; the fields below are read from it, never copied

    @property
    def preset(self) -> str:
        return self.run_config.preset

    @property
    def variant(self) -> str:
        return self.run_config.variant

    @property
    def data(self) -> str:
        """The corpus the run was trained on."""
        return self.run_config.data

    @property
    def limit(self) -> int | None:
        """At most this many sentences per split, if set."""
        return self.run_config.limit

    @property
    def mask_padding(self) -> bool:
        return self.run_config.mask_padding

    @property
    def config(self) -> TaggerConfig:
        """The tagger's architecture, as the run's protocol shaped it."""
        return self.run_config.tagger_config()

    @property
    def tag_column(self) -> str:
        """The CoNLL-U column the run's tags belong in: UPOS (UD) or XPOS (PTB)."""
        return data_format(self.preset).tag_column


def check_run_dir(run: str | os.PathLike) -> Path:
    """`run` as a Path, or a ConvattError if it is not a finished run directory."""
    run = Path(run)
    if not run.is_dir():
        raise ConvattError("run directory not found" if not run.exists() else "not a directory", run)
    for name in TRAINED_RUN_FILES:
        if not (run / name).exists():
            raise ConvattError(f"not a finished run directory: {name} is missing", run)
    return run


def load_settings(run: str | os.PathLike) -> RunSettings:
    """The run's settings from its config.json."""
    return RunSettings(RunConfig.load(check_run_dir(run)))


def load_vocabularies(run: str | os.PathLike) -> Vocabularies:
    return Vocabularies.load(check_run_dir(run) / VOCAB_FILE)


def load_model(run: str | os.PathLike):
    """The run's best model (MODEL_FILE), compiled as it was trained; a damaged file is a ConvattError."""
    import convatt.model.tagger  # noqa: F401  registers the tagger's own layers for deserialisation
    from convatt.rundir.modelfiles import MODEL_LOST_REMEDY

    return load_keras_model(check_run_dir(run) / MODEL_FILE, MODEL_LOST_REMEDY)


@dataclass(frozen=True)
class TrainedRun:
    """A finished run, loaded: settings, vocabularies and the best model."""

    path: Path
    settings: RunSettings
    vocab: Vocabularies
    model: object  # keras.Model
    data: str | None = None  # the corpus to read in place of the run's own (--data), if given

    def corpus(self) -> Corpus:
        """The run's corpus, or `data` in its place (`load_run_corpus`)."""
        return load_run_corpus(self.path, self.settings, self.data)


def load_run(run: str | os.PathLike, data: str | os.PathLike | None = None) -> TrainedRun:
    """Everything `convatt tag` and `convatt inspect` need from a run directory; `data`: the
    corpus to read in place of the run's own (`inspect --data`)."""
    data = None if data is None else os.fspath(data)
    return TrainedRun(Path(run), load_settings(run), load_vocabularies(run), load_model(run), data)


def load_run_corpus(
    run: str | os.PathLike, settings: RunSettings, data: str | os.PathLike | None = None, movable: bool = True
) -> Corpus:
    """The corpus of a finished run: `data` where given (a command's --data), else the run's own,
    config.json's "data" (a relative one found as `RunConfig.data_path` finds it). The run's own
    gone is an error naming config.json and the path it holds, and how to point the run at the
    corpus: --data where the command takes it (`movable`), else putting it back."""
    if data is not None:
        if not Path(data).exists():
            raise ConvattError(f"--data: {settings.preset} corpus path not found", data)
        return load_corpus(settings.preset, data)
    path = settings.run_config.data_path(run)
    if not Path(path).exists():
        remedy = "if it moved, give its new place with --data" if movable else "put it back there (or a link to it)"
        raise ConvattError(
            f"the {settings.preset} corpus this run trained on is not at {path} (this file's \"data\"): {remedy}",
            Path(run) / CONFIG_FILE,
        )
    return load_corpus(settings.preset, path)
