"""The run directory's schema: its file names, the columns of its CSV files, the markers and
versions of config.json, and the typed reading of a JSON file's fields.

    run directory   CONFIG_FILE, VOCAB_FILE, HISTORY_FILE, CURVE_FILE, MODEL_FILE,
                    RESULT_FILE, CHECKPOINT_DIR/ (STATE_FILE, epoch_model_file(n),
                    best_weights_file(n)), LOCK_FILE, LOG_FILE; HISTORY_COLUMNS, CURVE_COLUMNS

What config.json and result.json hold: `convatt.rundir.run_config` (`RunConfig`, its option
ranges, `DeparturesFromPaper`) and `convatt.rundir.run_result` (`RunResult`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

from convatt.errors import ConvattError
from convatt.rundir.storage import is_our_temporary

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


DAMAGED_RUN_REMEDY = (
    "if convatt wrote it, its run cannot be read back: train the run again into another --out "
    "(and delete this directory if convatt made it)"
)
