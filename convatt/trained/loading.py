"""A finished run, loaded for use: its settings, vocabularies and best model.

`convatt tag`, `convatt evaluate` and `convatt inspect` read a run directory only
through this module (its file names: `convatt.run.schema`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from convatt.data import Vocabularies
from convatt.data.formats import data_format
from convatt.errors import ConvattError
from convatt.model.variants import TaggerConfig
from convatt.run.modelfiles import load_keras_model
from convatt.run.schema import MODEL_FILE, TRAINED_RUN_FILES, VOCAB_FILE, RunConfig


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
    from convatt.run.modelfiles import MODEL_LOST_REMEDY

    return load_keras_model(check_run_dir(run) / MODEL_FILE, MODEL_LOST_REMEDY)


@dataclass(frozen=True)
class TrainedRun:
    """A finished run, loaded: settings, vocabularies and the best model."""

    path: Path
    settings: RunSettings
    vocab: Vocabularies
    model: object  # keras.Model


def load_run(run: str | os.PathLike) -> TrainedRun:
    """Everything `convatt tag` and `convatt inspect` need from a run directory."""
    return TrainedRun(Path(run), load_settings(run), load_vocabularies(run), load_model(run))
