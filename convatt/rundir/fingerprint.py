"""What a run was trained on, so that a resume on changed data is refused.

`DataFingerprint` records the size and SHA-256 of every corpus file read (to
name the file that changed) and a SHA-256 of each thing the model sees: the
vocabularies, the encoded splits and the word-vector matrix (which also catches
a change in how they are built, or in the vectors file, without hashing a 1 GB
`.vec`). It is kept in config.json under `runs.FINGERPRINT_KEY`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from convatt.errors import ConvattError


@dataclass(frozen=True)
class DataFingerprint:
    files: dict[str, str] = field(default_factory=dict)  # name under the data path -> "BYTES sha256:HEX"
    parts: dict[str, str] = field(default_factory=dict)  # "tags vocabulary", "train split", ... -> HEX

    @classmethod
    def measure(cls, data_root: str | os.PathLike, files: Iterable[Path], parts: dict[str, object]) -> DataFingerprint:
        root = Path(data_root)
        named = {_relative(p, root): _file_digest(p) for p in files}
        return cls(files=dict(sorted(named.items())), parts={k: _digest(v) for k, v in parts.items()})

    def differences(self, now: DataFingerprint) -> list[str]:
        """What changed since `self` was recorded, in words: files first, then parts."""
        out = []
        for name in sorted(self.files.keys() | now.files.keys()):
            old, new = self.files.get(name), now.files.get(name)
            if old != new:
                out.append(f"{name} {'added' if old is None else 'removed' if new is None else 'changed'}")
        out += [f"{part} changed" for part in self.parts if part in now.parts and self.parts[part] != now.parts[part]]
        return out

    def to_json(self) -> dict:
        return {"files": self.files, "parts": self.parts}

    @classmethod
    def from_json(cls, data: object, where: Path | None = None) -> DataFingerprint:
        ok = isinstance(data, dict) and all(
            isinstance(data.get(k), dict) and all(isinstance(v, str) for v in data[k].values())
            for k in ("files", "parts")
        )
        if not ok:
            raise ConvattError(
                "damaged data fingerprint in config.json: delete the run directory and train the run again", where
            )
        return cls(dict(data["files"]), dict(data["parts"]))


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha.update(block)
    return f"{path.stat().st_size} sha256:{sha.hexdigest()}"


def _digest(value: object) -> str:
    """SHA-256 of arrays (shape, dtype and bytes), strings and sequences of them."""
    sha = hashlib.sha256()

    def feed(v: object) -> None:
        if isinstance(v, np.ndarray):
            sha.update(f"{v.dtype.str}{v.shape}".encode())
            sha.update(np.ascontiguousarray(v).tobytes())
        elif isinstance(v, (list, tuple)):
            sha.update(f"[{len(v)}".encode())
            for item in v:
                feed(item)
        else:
            sha.update(repr(v).encode("utf-8", "surrogatepass"))

    feed(value)
    return sha.hexdigest()
