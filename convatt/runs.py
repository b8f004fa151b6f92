"""The run directory's schema: what `config.json` and `result.json` hold, typed.

    RunConfig   config.json: the options of one run (`convatt train`), its protocol
    RunResult   result.json: written last; its presence means the run is complete
    Setting     what sets a run apart from the paper's protocol (for the tables);
                data, rendered by `Setting.label`, never parsed back

Runs trained before the protocol existed (no "protocol" in config.json) trained
with Keras 3's defaults, and load as `LEGACY_PROTOCOL` ("keras3").
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from convatt.errors import ConvattError
from convatt.protocol import DEFAULT_PROTOCOL, LEGACY_PROTOCOL, ORIGINAL, Protocol
from convatt.rundir import read_json, write_json

CONFIG_FORMAT = "convatt-run"
SCHEMA_VERSION = 2
PAPER_EPOCHS = 100
CONFIG_FILE, RESULT_FILE = "config.json", "result.json"


@dataclass(frozen=True)
class RunConfig:
    """What `convatt train` takes. Fields below `out` have the paper's defaults."""

    preset: str
    variant: str
    seed: int
    data: str
    out: str
    embeddings: str | None = None
    embeddings_limit: int | None = 100_000
    epochs: int = PAPER_EPOCHS
    patience: int = 3
    batch_size: int = 32
    limit: int | None = None  # at most this many sentences per split (smoke runs)
    mask_padding: bool = False
    curve_every: int = 100
    curve_until: int = 2000  # record the curve up to this global step (-1: always)
    eval_batch_size: int = 256
    jit_compile: bool | str = "auto"
    protocol: Protocol = DEFAULT_PROTOCOL
    precision: str = "float32"  # a Keras dtype policy: float32 (the paper's), mixed_bfloat16, mixed_float16

    # Options that may change between a run and its resumption.
    RESUMABLE_CHANGES = ("epochs", "out", "eval_batch_size", "jit_compile")

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)  # the protocol becomes a dict too
        return {"format": CONFIG_FORMAT, "schema": SCHEMA_VERSION, **data}

    @classmethod
    def from_json(cls, data: dict, where: Path | None = None) -> "RunConfig":
        """Read `to_json`'s form, or an older config.json (no format: the Keras 3 protocol)."""
        if not isinstance(data, dict):
            raise ConvattError("not a convatt run configuration (expected a JSON object)", where)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        protocol = data.get("protocol")
        values["protocol"] = LEGACY_PROTOCOL if protocol is None else Protocol.from_dict(protocol, where)
        try:
            return cls(**values)
        except TypeError as e:
            raise ConvattError(f"not a convatt run configuration ({e})", where) from None

    @classmethod
    def load(cls, run_dir: Path) -> "RunConfig":
        path = Path(run_dir) / CONFIG_FILE
        return cls.from_json(read_json(path), path)

    def save(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / CONFIG_FILE, self.to_json())

    def differences(self, other: "RunConfig") -> list[str]:
        """`field: old -> new` for what differs beyond `RESUMABLE_CHANGES` (paths compared resolved)."""
        same_path = lambda a, b: a == b or (a and b and os.path.realpath(a) == os.path.realpath(b))
        out = []
        for f in dataclasses.fields(self):
            old, new = getattr(self, f.name), getattr(other, f.name)
            if f.name in self.RESUMABLE_CHANGES or old == new:
                continue
            if f.name in ("data", "embeddings") and same_path(old, new):
                continue
            if f.name == "protocol":
                out.append(f"protocol: {old.label()} -> {new.label()}")
            else:
                out.append(f"{f.name}: {old!r} -> {new!r}")
        return out

    @property
    def setting(self) -> "Setting":
        return Setting(protocol=self.protocol.label(), mask_padding=self.mask_padding, limit=self.limit,
                       max_epochs=self.epochs if self.epochs < PAPER_EPOCHS else None, precision=self.precision)


@dataclass(frozen=True, order=True)
class Setting:
    """What sets a run apart from the paper's protocol. Runs of different settings are
    never averaged together; the paper's own setting is `Setting()`."""

    protocol: str = ORIGINAL  # `Protocol.label()`
    mask_padding: bool = False
    limit: int | None = None
    max_epochs: int | None = None  # None: the paper's 100
    precision: str = "float32"

    @property
    def is_paper(self) -> bool:
        return self == Setting()

    def parts(self) -> list[str]:
        """The differences, for display: e.g. ["keras3", "mask", "limit 200", "max 5 epochs"]."""
        parts = [] if self.protocol == ORIGINAL else [self.protocol]
        if self.precision != "float32":
            parts.append(self.precision)
        if self.mask_padding:
            parts.append("mask")
        if self.limit:
            parts.append(f"limit {self.limit}")
        if self.max_epochs is not None:
            parts.append(f"max {self.max_epochs} epoch{'' if self.max_epochs == 1 else 's'}")
        return parts

    def label(self) -> str:
        """"" for the paper's setting, else the parts joined: "keras3, mask"."""
        return ", ".join(self.parts())


@dataclass
class RunResult:
    """result.json: what a finished run measured. Accuracies are fractions; a metric
    over no tokens is None."""

    preset: str
    variant: str
    label: str
    seed: int
    corpus: str
    is_sample: bool
    corpus_note: str
    vectors_note: str
    mask_padding: bool
    dev: dict
    test: dict
    parameters: int
    epochs_run: int
    best_epoch: int
    wall_seconds: float
    backend: str
    convatt_version: str
    protocol: str = ORIGINAL  # Protocol.label(), for readers of result.json alone

    REQUIRED = ("preset", "variant", "seed", "corpus", "test")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, where: Path | None = None) -> "RunResult":
        """Read result.json (older ones have no protocol: they trained under "keras3")."""
        if not isinstance(data, dict):
            raise ConvattError("not a convatt result (expected a JSON object)", where)
        missing = [k for k in cls.REQUIRED if k not in data]
        if missing:
            raise ConvattError(f"not a convatt result: no {', '.join(missing)}", where)
        defaults = dict(label="", is_sample=False, corpus_note="", vectors_note="", mask_padding=False,
                        dev={}, parameters=0, epochs_run=0, best_epoch=0, wall_seconds=0.0, backend="",
                        convatt_version="", protocol=LEGACY_PROTOCOL.label())
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**defaults, **{k: v for k, v in data.items() if k in known}})

    @classmethod
    def load(cls, run_dir: Path) -> "RunResult":
        path = Path(run_dir) / RESULT_FILE
        return cls.from_json(read_json(path), path)

    def save(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / RESULT_FILE, self.to_json())
