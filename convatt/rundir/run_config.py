"""config.json: `RunConfig`, the options of one run (`convatt train`) and its protocol;
`tagger_config()` builds a tagger run's TaggerConfig, `check()` its option ranges.
`DeparturesFromPaper`: what sets a run apart from the paper's protocol, its setting in the
tables (`RunConfig.setting`); data, rendered by `label()`, never parsed back.

Runs trained before the protocol existed (no "protocol" in config.json) trained
with Keras 3's defaults, and load as `LEGACY_PROTOCOL` ("keras3").
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from convatt.errors import ConvattError
from convatt.protocol import DEFAULT_PROTOCOL, LEGACY_PROTOCOL, ORIGINAL, TrainingProtocol
from convatt.rundir.schema import (
    COMPUTATION,
    COMPUTATION_BEFORE_SPARSE_FIX,
    CONFIG_FILE,
    CONFIG_FORMAT,
    DAMAGED_RUN_REMEDY,
    FINGERPRINT_KEY,
    LEGACY_KEYS,
    PAPER_EPOCHS,
    SCHEMA_VERSION,
    check_types,
    missing_fields,
)
from convatt.rundir.storage import read_json, write_json

if TYPE_CHECKING:
    from convatt.model.variants import TaggerConfig


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
    protocol: TrainingProtocol = DEFAULT_PROTOCOL
    precision: str = "float32"  # a Keras dtype policy: float32 (the paper's), mixed_bfloat16, mixed_float16
    start_from: str | None = None  # a finished run whose weights it starts from (`convatt train --from`)
    computation: int = COMPUTATION  # not an option: what the code computes (see COMPUTATION)

    # Options that may change between a run and its resumption (more epochs: it trains on) ...
    RESUMABLE_CHANGES = ("epochs", "out", "eval_batch_size", "jit_compile")
    # ... and between a finished run and a command asking for it again (its result stands for its epochs).
    FINISHED_CHANGES = ("out", "eval_batch_size", "jit_compile")

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)  # the protocol becomes a dict too
        return {"format": CONFIG_FORMAT, "schema": SCHEMA_VERSION, **data}

    @classmethod
    def from_json(cls, data: dict, where: Path | None = None) -> RunConfig:
        """Read `to_json`'s form, or an older config.json (no format: the Keras 3 protocol)."""
        if not isinstance(data, dict):
            raise ConvattError("not a convatt run configuration (expected a JSON object)", where)
        _check_marker(data, where)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in known and k != "protocol"}
        check_types(cls, values, where, "run configuration")
        protocol = data.get("protocol")
        if protocol is not None and not isinstance(protocol, dict):
            raise ConvattError(f"damaged run configuration: protocol is {protocol!r}, expected an object", where)
        values["protocol"] = LEGACY_PROTOCOL if protocol is None else TrainingProtocol.from_dict(protocol, where)
        values.setdefault("computation", COMPUTATION_BEFORE_SPARSE_FIX)
        missing = missing_fields(cls, values)
        if missing:
            required = ", ".join(f.name for f in dataclasses.fields(cls) if f.name in REQUIRED_CONFIG_FIELDS)
            raise ConvattError(
                f"damaged run configuration: no {', '.join(missing)} (a run's config.json holds {required} "
                f"at least); {DAMAGED_RUN_REMEDY}",
                where,
            )
        config = cls(**values)
        try:
            config.check()
        except ConvattError as e:
            raise ConvattError(f"damaged run configuration: {e.message}; {DAMAGED_RUN_REMEDY}", where) from None
        return config

    @classmethod
    def load(cls, run_dir: Path) -> RunConfig:
        path = Path(run_dir) / CONFIG_FILE
        return cls.from_json(read_json(path, remedy=DAMAGED_RUN_REMEDY), path)

    def save(self, run_dir: Path, fingerprint: dict | None = None) -> None:
        extra = {} if fingerprint is None else {FINGERPRINT_KEY: fingerprint}
        write_json(Path(run_dir) / CONFIG_FILE, {**self.to_json(), **extra})

    def data_path(self, run_dir: Path) -> str:
        """`data` as a path that exists from here: an older run's relative path is tried
        against the current directory, then against the directory the run was started
        from (the run directory less its `out`), then against the run directory."""
        data = Path(self.data).expanduser()
        if data.is_absolute() or data.exists():
            return str(data)
        run_dir = Path(run_dir).resolve()
        out_parts = Path(self.out).parts
        candidates = [run_dir / data]
        if not Path(self.out).is_absolute() and run_dir.parts[-len(out_parts) :] == out_parts:
            candidates.insert(0, Path(*run_dir.parts[: -len(out_parts)]) / data)
        return str(next((c for c in candidates if c.exists()), data))

    def tagger_config(self) -> TaggerConfig:
        """The tagger's architecture: the variant under the preset, shaped by the protocol.
        An unknown preset or variant is a ConvattError (with a suggestion)."""
        from convatt.model.variants import make_config

        return make_config(self.preset, self.variant, self.protocol, mask_padding=self.mask_padding)

    def check(self, flags: bool = False) -> None:
        """Options a run cannot start with, before anything is written (and, from the
        CLI, before Keras is loaded); `flags`: name them as `convatt train`'s options."""
        from convatt.data.formats import FORMATS, data_format
        from convatt.model.variants import check_variant

        fmt = data_format(self.preset)  # an unknown preset, with a suggestion
        if fmt.is_sequence_task:  # the names only: each kind of run's trainer builds its model's config
            from convatt.sequence.config import check_sequence_run

            check_sequence_run(self.preset, self.variant)  # a variant the causal model builds
        else:
            check_variant(self.variant)
        name = (lambda field: "--" + field.replace("_", "-")) if flags else (lambda field: field)
        check_seed(self.seed, name("seed"))
        _check_precision(self.precision, name("precision"))
        for field, minimum in OPTION_MINIMUMS.items():
            check_at_least(name(field), getattr(self, field), minimum)
        if self.embeddings and not fmt.pretrained_words:
            pretrained = [f.name for f in FORMATS.values() if f.pretrained_words]
            raise ConvattError(
                f"{name('embeddings')} applies to the {' and '.join(pretrained)} preset"
                f"{'s' if len(pretrained) > 1 else ''} (frozen pretrained vectors); the "
                f"{self.preset} preset trains its word embeddings from random, as the paper"
            )

    def differences(self, other: RunConfig, finished: bool = False) -> list[str]:
        """`field: old -> new` for what differs beyond `RESUMABLE_CHANGES` (`finished`: beyond
        `FINISHED_CHANGES`; paths compared resolved)."""
        same_path = lambda a, b: a == b or (a and b and os.path.realpath(a) == os.path.realpath(b))
        allowed = self.FINISHED_CHANGES if finished else self.RESUMABLE_CHANGES
        out = []
        for f in dataclasses.fields(self):
            old, new = getattr(self, f.name), getattr(other, f.name)
            if f.name in allowed or old == new:
                continue
            if f.name in ("data", "embeddings", "start_from") and same_path(old, new):
                continue
            if f.name == "protocol":
                out.append(f"protocol: {old.label()} -> {new.label()}")
            else:
                out.append(f"{f.name}: {old!r} -> {new!r}")
        return out

    @property
    def setting(self) -> DeparturesFromPaper:
        """The run's setting in the tables: how it departs from the paper's protocol."""
        return DeparturesFromPaper(
            protocol=self.protocol.label(),
            mask_padding=self.mask_padding,
            limit=self.limit,
            max_epochs=self.epochs if self.epochs < preset_epochs(self.preset) else None,
            precision=self.precision,
            computation=self.computation if self.protocol.optimizer == "keras2-rmsprop" else COMPUTATION,
            continued=self.start_from is not None,
        )


REQUIRED_CONFIG_FIELDS = frozenset(missing_fields(RunConfig, {}))  # preset, variant, seed, data, out


def _check_precision(precision: str, name: str) -> None:
    from convatt.model.variants import PRECISIONS

    if precision not in PRECISIONS:
        raise ConvattError(f"{name} must be one of {', '.join(PRECISIONS)}, not {precision!r}")


def preset_epochs(preset: str) -> int:
    """The epochs a run of `preset` trains at most by default: the paper's 100 for the tagger,
    its data format's `max_epochs` for a causal sequence task."""
    from convatt.data.formats import FORMATS

    return FORMATS[preset].max_epochs if preset in FORMATS else PAPER_EPOCHS


def option_default(name: str):
    """The default of one `RunConfig` field: the one source of `convatt train`'s and
    `convatt.train`'s defaults."""
    return RunConfig.__dataclass_fields__[name].default


MAX_SEED = 2**32 - 1  # NumPy's and Keras' seeds are unsigned 32-bit integers
OPTION_MINIMUMS = {
    "epochs": 1,
    "patience": 1,
    "batch_size": 1,
    "eval_batch_size": 1,
    "limit": 1,
    "curve_every": 0,
    "embeddings_limit": 0,
    "curve_until": -1,  # -1: always
}
"""The least value of each numeric option of `RunConfig` (None always passes)."""


def check_at_least(name: str, value: int | None, minimum: int = 1) -> None:
    """A ConvattError unless `value` is None or at least `minimum`; `name` is the option's."""
    if value is not None and value < minimum:
        always = " (-1: always)" if minimum == -1 else ""
        raise ConvattError(f"{name} must be at least {minimum}{always}, not {value}")


def check_seed(seed: int, name: str = "seed") -> None:
    """A ConvattError unless `seed` is an unsigned 32-bit integer."""
    if not 0 <= seed <= MAX_SEED:
        raise ConvattError(f"{name} must be between 0 and {MAX_SEED:,} (2**32 - 1), not {seed}")


def _check_marker(data: dict, where: Path | None) -> None:
    """A config.json of ours: the `CONFIG_FORMAT` marker (or, older, the `LEGACY_KEYS`)."""
    if "format" not in data:
        missing = [k for k in LEGACY_KEYS if k not in data]
        if missing:
            raise ConvattError(
                f"not a convatt run configuration (no \"format\": \"{CONFIG_FORMAT}\" and no {', '.join(missing)})",
                where,
            )
        return
    if data["format"] != CONFIG_FORMAT:
        raise ConvattError(
            f"not a convatt run configuration (format {data['format']!r}, expected {CONFIG_FORMAT!r})", where
        )
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise ConvattError(f"damaged run configuration: schema is {schema!r}, expected 1 or 2", where)
    if schema > SCHEMA_VERSION:
        raise ConvattError(
            f"written by a newer convatt (schema {schema}; this one reads up to {SCHEMA_VERSION}): update convatt",
            where,
        )


@dataclass(frozen=True, order=True)
class DeparturesFromPaper:
    """What sets a run apart from the paper's protocol. Runs of different settings are
    never averaged together; the paper's own setting is `DeparturesFromPaper()`."""

    protocol: str = ORIGINAL  # `TrainingProtocol.label()`
    mask_padding: bool = False
    limit: int | None = None
    max_epochs: int | None = None  # None: the paper's 100
    precision: str = "float32"
    computation: int = COMPUTATION  # an older one: trained before a fix that changed the numbers
    continued: bool = False  # started from a finished run's weights (`convatt train --from`)

    @property
    def is_paper(self) -> bool:
        return self == DeparturesFromPaper()

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
        if self.computation == COMPUTATION_BEFORE_SPARSE_FIX:
            parts.append("RMSprop per slice")
        if self.continued:
            parts.append("continued")
        return parts

    def label(self) -> str:
        """ "" for the paper's setting, else the parts joined: "keras3, mask"."""
        return ", ".join(self.parts())
