"""Reading back `.keras` models and `.weights.h5` files, with damage reported as such.

Keras says "File not found" for a `.keras` file that exists but is truncated, and
h5py fails on a truncated weights file only when it is loaded; both are checked
here and reported as a ConvattError naming the file and what to do.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from convatt.errors import ConvattError

# What to do about a finished run whose model.keras is missing or damaged (`evaluate`, `tag`, `inspect`).
MODEL_LOST_REMEDY = "the run's model is lost: train the run again (the options in its config.json) into another --out"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200]}" if text else type(e).__name__


def load_keras_model(path: Path, remedy: str):
    """The model saved in `path`; a missing or damaged file is a ConvattError ending in `remedy`."""
    import keras

    path = Path(path)
    if not path.is_file():
        raise ConvattError(f"model file not found; {remedy}", path)
    if not zipfile.is_zipfile(path):
        raise ConvattError(
            f"damaged: not a complete Keras model archive (truncated, empty or overwritten); {remedy}", path
        )
    try:
        return keras.saving.load_model(path)
    except Exception as e:  # a damaged member fails in zipfile, h5py or Keras' deserialisation
        raise ConvattError(f"damaged: Keras cannot load this model ({_first_line(e)}); {remedy}", path) from e


def check_keras_file(path: Path, remedy: str) -> None:
    """Check every member of a `.keras` archive against its CRC (a truncated or overwritten
    file fails), without building the model: cheap enough to run after every write."""
    path = Path(path)
    if not path.is_file():
        raise ConvattError(f"model file not found; {remedy}", path)
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ConvattError(f"damaged: not a complete Keras model archive ({_first_line(e)}); {remedy}", path) from None
    if bad is not None:
        raise ConvattError(f"damaged: {bad} in this Keras model archive fails its checksum; {remedy}", path)


def check_weights_file(path: Path, remedy: str) -> None:
    """Read every array of an HDF5 weights file, so that damage shows now, not when it is loaded."""
    import h5py

    path = Path(path)
    if not path.is_file():
        raise ConvattError(f"weights file not found; {remedy}", path)

    def read(name: str, item) -> None:
        if isinstance(item, h5py.Dataset):
            item[()]

    try:
        with h5py.File(path, "r") as f:
            f.visititems(read)
    except Exception as e:  # h5py raises OSError, KeyError, RuntimeError... on damage
        raise ConvattError(f"damaged weights file ({_first_line(e)}); {remedy}", path) from e
