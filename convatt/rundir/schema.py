"""The run directory's schema: its file names, the columns of its CSV files, what
`config.json` and `result.json` hold (typed), and the ranges of the run's options.

    run directory   CONFIG_FILE, VOCAB_FILE, HISTORY_FILE, CURVE_FILE, MODEL_FILE,
                    RESULT_FILE, CHECKPOINT_DIR/ (STATE_FILE, epoch_model_file(n),
                    best_weights_file(n)), LOCK_FILE, LOG_FILE; HISTORY_COLUMNS, CURVE_COLUMNS
    RunConfig   config.json: the options of one run (`convatt train`), its protocol;
                `tagger_config()` builds a tagger run's TaggerConfig, `check()` its option ranges
    RunResult   result.json: written last; its presence means the run is complete
    DeparturesFromPaper   what sets a run apart from the paper's protocol: its setting in the
                tables (`RunConfig.setting`); data, rendered by `label()`, never parsed back

Runs trained before the protocol existed (no "protocol" in config.json) trained
with Keras 3's defaults, and load as `LEGACY_PROTOCOL` ("keras3").
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from convatt.errors import ConvattError
from convatt.protocol import DEFAULT_PROTOCOL, LEGACY_PROTOCOL, ORIGINAL, TrainingProtocol
from convatt.rundir.storage import is_our_temporary, read_json, write_json

if TYPE_CHECKING:
    from convatt.model.variants import TaggerConfig

# ---- the files of a run directory ---------------------------------------------------
CONFIG_FILE = "config.json"  # the run's options (`RunConfig`), written first
VOCAB_FILE = "vocab.json"  # the vocabularies (`convatt.data.Vocabularies`)
HISTORY_FILE = "history.csv"  # one row per epoch: HISTORY_COLUMNS
CURVE_FILE = "curve.csv"  # dev accuracy every `curve_every` batches: CURVE_COLUMNS
MODEL_FILE = "model.keras"  # the best epoch's model
RESULT_FILE = "result.json"  # written last: its presence means the run is complete (`RunResult`)
CHECKPOINT_DIR = "checkpoint"  # while training: the last finished epoch, to resume from
STATE_FILE = "state.json"  # in CHECKPOINT_DIR, written last of an epoch's checkpoint
LOCK_FILE = ".lock"  # held while a trainer writes the directory
TENSORBOARD_DIR = "tensorboard"  # `make TENSORBOARD=1`: the run's TensorBoard logs
LOG_FILE = "train.log"  # what the Makefile and Slurm jobs write the trainer's output to

HISTORY_COLUMNS = ["epoch", "loss", "train_accuracy", "dev_accuracy", "dev_batch_mean_accuracy", "seconds"]
CURVE_COLUMNS = ["step", "epoch", "dev_accuracy", "dev_batch_mean_accuracy"]
DEV_BITS_COLUMN = "dev_bits_per_symbol"  # history and curve of a causal sequence task's run (cross-entropy)


def columns_of(rows: list[dict], columns: list[str]) -> list[str]:
    """`columns`, then DEV_BITS_COLUMN if the rows have it (a causal sequence task's run)."""
    return columns + [DEV_BITS_COLUMN] if rows and DEV_BITS_COLUMN in rows[0] else columns


TRAINED_RUN_FILES = (CONFIG_FILE, VOCAB_FILE, MODEL_FILE)
"""What using a finished run's model needs (`convatt tag`, `evaluate`, `inspect`)."""
RUN_FILES = frozenset(
    {CONFIG_FILE, VOCAB_FILE, HISTORY_FILE, CURVE_FILE, MODEL_FILE, RESULT_FILE, CHECKPOINT_DIR, LOCK_FILE}
    | {"test_sentences.csv", "dev_sentences.csv"}  # SENTENCE_SCORES_FILE, DEV_SENTENCE_SCORES_FILE below
    | {TENSORBOARD_DIR}
)
"""Everything `convatt train` writes at a run directory's top level."""
NEW_RUN_FILES = frozenset({LOCK_FILE, CONFIG_FILE})
"""What a run directory may hold before its config.json is written (a stale lock, a killed write)."""
LAUNCHER_FILE = re.compile(re.escape(LOG_FILE) + r"|slurm-[\w.-]*\.(out|err)")
"""Files the Makefile and Slurm write into a run directory before `convatt train` starts."""
CHECKPOINT_FILE = re.compile(r"state(-\d+)?\.json|epoch-\d+\.keras|best-\d+\.weights\.h5")
"""What `convatt train` writes into CHECKPOINT_DIR."""


def epoch_model_file(epoch: int) -> str:
    """The checkpoint's model after `epoch` (in CHECKPOINT_DIR)."""
    return f"epoch-{epoch}.keras"


def best_weights_file(epoch: int) -> str:
    """The weights of the best epoch so far, `epoch` (in CHECKPOINT_DIR)."""
    return f"best-{epoch}.weights.h5"


def foreign_entries(out: Path) -> list[str]:
    """The entries of `out` (not yet holding a config.json) that neither a starting
    `convatt train` nor its launchers write there."""
    ours = lambda name: name in NEW_RUN_FILES or bool(LAUNCHER_FILE.fullmatch(name))
    return sorted(p.name for p in out.iterdir() if not (ours(p.name) or is_our_temporary(p.name, ours)))


CONFIG_FORMAT = "convatt-run"
SCHEMA_VERSION = 2
PAPER_EPOCHS = 100
# Which computation of Keras 2.2.4's RMSprop a run trained with. 2: an embedding's sparse
# gradient is summed per row before it is squared, as Keras 2.2.4 did. 1 (config.json
# without "computation", trained before 2026-11-24): each slice squared on its own, up to
# sqrt(n) times the step for a row that occurs n times in a batch (TensorFlow only).
COMPUTATION = 2
COMPUTATION_BEFORE_SPARSE_FIX = 1
# Per-sentence scores of a split (`convatt.training.sentence_scores`): one row per sentence,
# the counts behind result.json's accuracies, for the significance tests.
SENTENCE_SCORES_FILE = "test_sentences.csv"
DEV_SENTENCE_SCORES_FILE = "dev_sentences.csv"
SENTENCE_SCORE_COLUMNS = [
    "sentence",
    "tokens",
    "correct",
    "oov_tokens",
    "oov_correct",
    "ambiguous_tokens",
    "ambiguous_correct",
]
LEGACY_KEYS = ("preset", "variant", "seed", "data")  # what a config.json without "format" must hold
FINGERPRINT_KEY = "data_fingerprint"  # beside the options in config.json (convatt.rundir.fingerprint)
_TYPES = {"str": str, "int": int, "float": (int, float), "bool": bool, "None": type(None), "dict": dict, "list": list}


def missing_fields(cls, values: dict) -> list[str]:
    """The fields of dataclass `cls` that have no default and are not in `values`."""
    return [
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def check_types(cls, values: dict, where: Path | None, what: str) -> None:
    """Each value has its dataclass field's annotated type ("int | None": an int or null);
    a bool is not an int here, as JSON tells them apart."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, value in values.items():
        annotation = fields[name].type if isinstance(fields[name].type, str) else ""
        allowed = [_TYPES[t.strip()] for t in annotation.split("|") if t.strip() in _TYPES]
        if not allowed:
            continue
        is_bool_as_number = isinstance(value, bool) and bool not in allowed
        if is_bool_as_number or not isinstance(value, tuple(allowed)):
            raise ConvattError(f"damaged {what}: {name} is {value!r}, expected {annotation}", where)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConvattError(f"damaged {what}: {name} is {value!r}, expected a finite number", where)


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


DAMAGED_RUN_REMEDY = (
    "if convatt wrote it, its run cannot be read back: train the run again into another --out "
    "(and delete this directory if convatt made it)"
)


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
