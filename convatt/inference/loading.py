"""A finished run, loaded for use: its configuration (`RunConfig`), vocabularies and best model.

`convatt tag`, `convatt evaluate` and `convatt inspect` read a run directory only
through this module (its file names: `convatt.rundir.schema`).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from convatt.data import Corpus, Vocabularies, load_corpus
from convatt.data.formats import data_format
from convatt.errors import ConvattError
from convatt.model.variants import TaggerConfig
from convatt.rundir.modelfiles import load_keras_model
from convatt.rundir.run_config import RunConfig
from convatt.rundir.schema import CONFIG_FILE, MODEL_FILE, TRAINED_RUN_FILES, VOCAB_FILE


def check_run_dir(run: str | os.PathLike) -> Path:
    """`run` as a Path, or a ConvattError if it is not a finished run directory."""
    run = Path(run)
    if not run.is_dir():
        raise ConvattError("run directory not found" if not run.exists() else "not a directory", run)
    for name in TRAINED_RUN_FILES:
        if not (run / name).exists():
            raise ConvattError(f"not a finished run directory: {name} is missing", run)
    return run


def load_run_config(run: str | os.PathLike) -> RunConfig:
    """What the run was trained with: its config.json."""
    return RunConfig.load(check_run_dir(run))


def load_vocabularies(run: str | os.PathLike) -> Vocabularies:
    return Vocabularies.load(check_run_dir(run) / VOCAB_FILE)


def load_model(run: str | os.PathLike):
    """The run's best model (MODEL_FILE), compiled as it was trained; a damaged file is a ConvattError."""
    import convatt.model.tagger  # noqa: F401  registers the tagger's own layers for deserialisation
    from convatt.rundir.modelfiles import MODEL_LOST_REMEDY

    return load_keras_model(check_run_dir(run) / MODEL_FILE, MODEL_LOST_REMEDY)


@dataclass(frozen=True)
class TrainedRun:
    """A finished run, loaded: its configuration, vocabularies and the best model."""

    path: Path
    run_config: RunConfig  # config.json
    vocab: Vocabularies
    model: object  # keras.Model
    data: str | None = None  # the corpus to read in place of the run's own (--data), if given

    @property
    def tagger_config(self) -> TaggerConfig:
        """The tagger's architecture, as the run's protocol shaped it."""
        return self.run_config.tagger_config()

    @property
    def tag_column(self) -> str:
        """The CoNLL-U column the run's tags belong in: UPOS (UD) or XPOS (PTB)."""
        return data_format(self.run_config.preset).tag_column

    @property
    def settings(self) -> RunConfig:
        """Deprecated: `run_config` (what the run was trained with)."""
        warnings.warn("TrainedRun.settings is deprecated: use TrainedRun.run_config", DeprecationWarning, stacklevel=2)
        return self.run_config

    def corpus(self) -> Corpus:
        """The run's corpus, or `data` in its place (`load_run_corpus`)."""
        return load_run_corpus(self.path, self.run_config, self.data)


def load_run(run: str | os.PathLike, data: str | os.PathLike | None = None) -> TrainedRun:
    """Everything `convatt tag` and `convatt inspect` need from a run directory; `data`: the
    corpus to read in place of the run's own (`inspect --data`)."""
    data = None if data is None else os.fspath(data)
    return TrainedRun(Path(run), load_run_config(run), load_vocabularies(run), load_model(run), data)


def load_run_corpus(
    run: str | os.PathLike, config: RunConfig, data: str | os.PathLike | None = None, movable: bool = True
) -> Corpus:
    """The corpus of a finished run: `data` where given (a command's --data), else the run's own,
    config.json's "data" (a relative one found as `RunConfig.data_path` finds it). The run's own
    gone is an error naming config.json and the path it holds, and how to point the run at the
    corpus: --data where the command takes it (`movable`), else putting it back."""
    if data is not None:
        if not Path(data).exists():
            raise ConvattError(f"--data: {config.preset} corpus path not found", data)
        return load_corpus(config.preset, data)
    path = config.data_path(run)
    if not Path(path).exists():
        remedy = "if it moved, give its new place with --data" if movable else "put it back there (or a link to it)"
        raise ConvattError(
            f"the {config.preset} corpus this run trained on is not at {path} (this file's \"data\"): {remedy}",
            Path(run) / CONFIG_FILE,
        )
    return load_corpus(config.preset, path)
