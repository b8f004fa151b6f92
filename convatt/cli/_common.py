"""What the commands share: loading the backend quietly, option checks, one-line error messages."""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import sys
from pathlib import Path

from convatt.errors import ConvattError

BACKENDS = ("tensorflow", "jax")  # the Keras backends convatt's layers and training loop support


def check_backend() -> None:
    """An unsupported KERAS_BACKEND is one line, before Keras is imported (which would fail
    deep inside, or run code convatt was never tested on)."""
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if backend not in BACKENDS:
        raise ConvattError(
            f"KERAS_BACKEND={backend!r} is not supported: convatt runs on {' or '.join(BACKENDS)} "
            "(unset KERAS_BACKEND for tensorflow, the default)"
        )


def quiet_backend() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        block_jax()


class _NoJax(importlib.abc.MetaPathFinder):
    """Makes `import jax` fail: TensorFlow's TFLite imports JAX whenever it is installed
    (0.6 s and a second XLA runtime in the process, which the tensorflow backend never
    uses). A finder rather than a None in sys.modules, which scipy's array-API helpers
    (the significance tables' bootstrap) take for an imported JAX."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "jax":
            raise ModuleNotFoundError(f"No module named {name!r} (blocked under the tensorflow backend)", name=name)


def block_jax() -> None:
    """`import jax` fails from now on in this process, unless JAX is imported already."""
    if "jax" not in sys.modules and not any(isinstance(f, _NoJax) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoJax())


@contextlib.contextmanager
def stderr_silenced():
    """Send file descriptor 2 to /dev/null: C++ libraries write there directly."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def load_backend(debug: bool) -> None:
    """Import Keras and start its backend with the C++ start-up lines (TensorFlow's
    oneDNN notice, absl's preamble, a cuInit error on a machine without a GPU) hidden:
    they are noise around the lines that matter. `--debug` shows them."""
    if debug or "keras" in sys.modules:
        return
    with stderr_silenced():
        import keras

        keras.ops.convert_to_tensor(0)  # the backend finds its devices now, quietly


def check_out_dir(flag: str, path: str | os.PathLike | None) -> None:
    """An output directory option that names an existing file is refused before any work."""
    if path is not None and Path(path).exists() and not Path(path).is_dir():
        raise ConvattError(f"{flag} {path} is a file, expected a directory")


def precisions() -> tuple[str, ...]:
    from convatt.model.variants import PRECISIONS

    return PRECISIONS


def os_error_message(e: OSError) -> str:
    """One line naming the path: "PATH: No space left on device"."""
    from convatt.rundir.storage import os_error_reason

    where = f"{e.filename}: " if e.filename else ""
    if e.filename2:
        where = f"{e.filename} -> {e.filename2}: "
    return f"{where}{os_error_reason(e)}"


def error_message(e: Exception) -> str:
    if isinstance(e, ConvattError):
        return str(e)
    if isinstance(e, OSError):
        return os_error_message(e)
    return (
        f"unexpected {type(e).__name__}: {str(e)[:300]} (a bug in convatt: rerun with --debug for the "
        "traceback and report it)"
    )
