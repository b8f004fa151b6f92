"""A run directory: atomic writes and a lock, so an interrupted run loses nothing.

Every file is written to a temporary name in the same directory, flushed to
disk (fsync) and moved into place with `os.replace`, and the directory itself is
synced: a reader, a killed writer or a power loss never sees half a file.
`result.json` is written last: its presence means the run is complete.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

from convatt.errors import ConvattError


def atomic_path(path: Path) -> Path:
    """A temporary sibling of `path` keeping its suffixes (Keras checks them)."""
    return path.with_name(f".tmp-{os.getpid()}-{path.name}")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp: Path, path: Path) -> None:
    """Move a finished temporary file into place, durably (file and directory synced)."""
    _fsync(tmp)
    os.replace(tmp, path)
    _fsync(path.parent)


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write(tmp)` to a temporary sibling of `path`, then `commit` it into place.

    On any failure (a full disk, a kill's KeyboardInterrupt) the temporary file is
    removed and `path` keeps its old content; an OSError becomes a ConvattError
    naming `path`.
    """
    tmp = atomic_path(path)
    try:
        write(tmp)
        commit(tmp, path)
    except BaseException as e:
        _close_hdf5_files(tmp)
        tmp.unlink(missing_ok=True)
        cause = _os_error_in(e)
        if cause is not None:
            raise ConvattError(f"cannot write this file: {os_error_reason(cause)}", path) from e
        raise


def _close_hdf5_files(path: Path) -> None:
    """Close the HDF5 files a failed write left open on `path`. Keras does not close its
    weights file when a write fails (a full disk): h5py would close it when the exception's
    frames are freed, at exit, failing again with "Exception ignored ... errno = 28"
    tracebacks after convatt's one-line message."""
    import sys

    h5py = sys.modules.get("h5py")
    if h5py is None:
        return
    for fid in h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE):
        if os.fsdecode(fid.name) != os.fspath(path):
            continue
        with contextlib.suppress(Exception):  # its flush fails as the write did; the file is deleted next
            h5py.File(fid).close()


def os_error_reason(e: OSError) -> str:
    """Why an OSError happened, in one line: "No space left on device". h5py's errors carry
    no errno attribute, only "errno = 28" inside several lines of text."""
    found = re.search(r"errno = (\d+)", str(e))  # h5py's text, also as its strerror
    if found:
        return os.strerror(int(found.group(1)))
    if e.strerror:
        return e.strerror
    return " ".join(str(e).split())[:200] or type(e).__name__


def check_writable_directory(path: Path, what: str) -> None:
    """A ConvattError naming `what` (e.g. an option) unless `path` is, or can be made, a
    directory this process can write files in: checked by creating it and a probe file, which
    is removed (permission bits say nothing for root, nor for a read-only file system)."""
    import tempfile

    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        reason = "a file, not a directory" if path.exists() and not path.is_dir() else os_error_reason(e)
        raise ConvattError(f"{what} {path}: cannot write there ({reason})") from e


def _os_error_in(e: BaseException) -> OSError | None:
    """The OSError behind `e` (Keras and h5py wrap them), if any."""
    while e is not None:
        if isinstance(e, OSError) and not isinstance(e, ConvattError):
            return e
        e = e.__cause__ or e.__context__
    return None


_TEMPORARY = re.compile(r"\.tmp-\d+-(?P<name>.+)")


def is_our_temporary(name: str, ours: Callable[[str], bool]) -> bool:
    """Whether `name` is an `atomic_path` of a file `ours` accepts (left by a killed writer)."""
    m = _TEMPORARY.fullmatch(name)
    return bool(m) and ours(m.group("name"))


def remove_temporaries(directory: Path, ours: Callable[[str], bool]) -> None:
    """Delete the temporary files a killed writer left in `directory` (only ours)."""
    if directory.is_dir():
        for p in directory.iterdir():
            if p.is_file() and is_our_temporary(p.name, ours):
                p.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    write_atomically(path, lambda tmp: tmp.write_text(text))


def write_json(path: Path, data: dict) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    def write(tmp: Path) -> None:
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)

    write_atomically(path, write)


def read_json(path: Path, remedy: str = "") -> dict:
    """The JSON object in `path`; a missing, unreadable or damaged file is a ConvattError
    saying what is wrong and then `remedy` (what to do)."""
    then = f"; {remedy}" if remedy else ""
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text)
    except FileNotFoundError:
        raise ConvattError(f"file not found{then}", path) from None
    except OSError as e:
        raise ConvattError(f"cannot read this file ({e.strerror or e}){then}", path) from None
    except UnicodeDecodeError as e:
        raise ConvattError(f"damaged: not UTF-8 text (byte 0x{e.object[e.start]:02x}){then}", path) from None
    except json.JSONDecodeError as e:
        what = "empty" if not text.strip() else f"not valid JSON ({e.msg}; truncated?)"
        raise ConvattError(f"damaged: {what}{then}", path, e.lineno) from None
    except (ValueError, RecursionError) as e:  # e.g. an integer of more than 4,300 digits
        raise ConvattError(f"damaged: {str(e)[:100]}{then}", path) from None
    if not isinstance(data, dict):
        raise ConvattError(f"damaged: expected a JSON object, found {type(data).__name__}{then}", path)
    return data


def lock_holder() -> str:
    """What the lock file says about its holder: "host pid N", plus "slurm JOB_TASK" in a Slurm array task.

    experiments/slurm_submit.py reads the Slurm id to remove a lock whose task Slurm
    no longer lists (a node that died can keep an flock on NFS/Lustre).
    """
    holder = f"{socket.gethostname()} pid {os.getpid()}"
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{holder} slurm {job}_{task}" if job and task else holder


@contextlib.contextmanager
def run_lock(lock: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on the file `lock` (a run directory's LOCK_FILE) while training.

    The kernel drops the lock when its process dies (killed, crashed, machine
    rebooted), so a stale lock file never blocks a resume; a second trainer on the
    same directory fails at once. The file keeps `lock_holder()` for that message
    and is removed (still locked) when the holder is done. On a file system without
    flock (Lustre mounted `noflock`) training goes on unlocked, as there one Slurm
    task per run is what keeps trainers apart (experiments/slurm_submit.py).
    """
    out = lock.parent
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 200).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ConvattError(
            f"another process ({holder}) is training into this directory; wait for it or use another --out", out
        ) from None
    except OSError as e:
        if e.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP):
            os.close(fd)
            raise
    os.ftruncate(fd, 0)
    os.write(fd, lock_holder().encode())
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
