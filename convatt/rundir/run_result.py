"""result.json: `RunResult`, what a finished run measured; written last, its presence means
the run is complete."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from convatt.errors import ConvattError
from convatt.protocol import LEGACY_PROTOCOL, ORIGINAL
from convatt.rundir.schema import DAMAGED_RUN_REMEDY, RESULT_FILE, check_types
from convatt.rundir.storage import read_json, write_json


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
    protocol: str = ORIGINAL  # TrainingProtocol.label(), for readers of result.json alone
    source_commit: str = ""  # the code's git commit (`convatt.rundir.provenance`); "" in older results
    machine: str = ""  # architecture, CPUs, the device Keras computed on; "" in older results
    # What decides the last bits of the numbers (`convatt.machine.Platform`); "" / {} in older results
    cpu: str = ""  # the CPU's model name
    cpu_features: str = ""  # its instruction sets that choose kernels (avx2 avx512f ...)
    onednn: str = ""  # "on" / "off" under TensorFlow, "not used" under another backend
    packages: dict = dataclasses.field(default_factory=dict)  # {"tensorflow": "2.21.0", "keras": ..., "numpy": ...}
    # The finished run it started from (`convatt.training.start_from.SourceRun`); {} where it started from random
    started_from: dict = dataclasses.field(default_factory=dict)

    REQUIRED = ("preset", "variant", "seed", "corpus", "test")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict, where: Path | None = None) -> RunResult:
        """Read result.json (older ones have no protocol: they trained under "keras3")."""
        if not isinstance(data, dict):
            raise ConvattError("not a convatt result (expected a JSON object)", where)
        missing = [k for k in cls.REQUIRED if k not in data]
        if missing:
            raise ConvattError(f"not a convatt result: no {', '.join(missing)}", where)
        defaults = dict(
            label="",
            is_sample=False,
            corpus_note="",
            vectors_note="",
            mask_padding=False,
            dev={},
            parameters=0,
            epochs_run=0,
            best_epoch=0,
            wall_seconds=0.0,
            backend="",
            convatt_version="",
            protocol=LEGACY_PROTOCOL.label(),
        )
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        check_types(cls, values, where, "result")
        for split in ("dev", "test"):
            _check_scores(values.get(split, {}), split, where)
        if not all(isinstance(v, str) for v in values.get("packages", {}).values()):
            raise ConvattError(f"damaged result: packages is {values['packages']!r}, expected versions", where)
        return cls(**{**defaults, **values})

    @property
    def package_versions(self) -> str:
        """The packages' versions, "tensorflow 2.21.0, keras 3.15.1, numpy 2.4.6" ("" if not recorded)."""
        return ", ".join(f"{name} {version}" for name, version in self.packages.items())

    @classmethod
    def load(cls, run_dir: Path) -> RunResult:
        path = Path(run_dir) / RESULT_FILE
        return cls.from_json(read_json(path, remedy=DAMAGED_RUN_REMEDY), path)

    def save(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / RESULT_FILE, self.to_json())


SCORES = ("all", "oov", "ambiguous")


def _check_scores(scores: dict, split: str, where: Path | None) -> None:
    """A split's accuracies are fractions in [0, 1] (None: no tokens), its counts whole numbers."""
    for key in SCORES:
        value = scores.get(key)
        is_fraction = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1
        if not (value is None or is_fraction):
            raise ConvattError(
                f"damaged result: {split}.{key} is {value!r}, expected a fraction in [0, 1] or null", where
            )
    for key in ("n_" + k for k in SCORES):
        value = scores.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ConvattError(f"damaged result: {split}.{key} is {value!r}, expected a count", where)
    if not isinstance(scores.get("per_tag", {}), dict):
        raise ConvattError(f"damaged result: {split}.per_tag is not an object", where)
