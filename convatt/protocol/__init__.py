"""How a run trains: the paper's code (Keras 2.2.4 on TensorFlow 1.15), or Keras 3's defaults.

Data, the model and the run directory all read a run's `TrainingProtocol`, so it lives on a floor
below them (docs/design.md); beside it, `optimizers.py` (Keras 2.2.4's RMSprop, the original's
`optimizer`) and `metrics.py` (the paper's accuracies and the original's early-stopping
metric).

The authors' code (github pdufter/convatt) computes differently from what the paper's
text and Keras 3's defaults give in several places. Each place is one field of
`TrainingProtocol`, with the original's choice and the modern one:

    optimizer          RMSprop's update: Keras 2.2.4 `lr g / (sqrt(a) + eps)` or
                       Keras 3 `lr g / sqrt(a + eps)` (a much smaller step for small g)
    loss               the weighted loss divided by the batch's real tokens (Keras 2.2.4,
                       `sample_weight_mode='temporal'`) or by all positions, PAD included
    residual           `D(h) + SA(D(h))` (the original adds the dropped tensor) or `h + SA(D(h))`
    relative_bias      +R as the code's circulant (`LinearOperatorCirculant`) or the
                       paper text's lookup `a[i - j + t]`
    pad_inputs         a PAD position's characters spell "<PAD>" and a frozen PAD word
                       vector is random like any vector-less word (original), or zeros
    early_stopping     the original's `val_true_acc` (per dev batch of 32, averaged over
                       batches) or the exact token accuracy
    attention_init     W_q, W_k, W_v glorot_normal (original) or glorot_uniform
    vocabulary         chars of train plus those of the special tokens, labels over all
                       splits (original), or chars and labels of train only
    matmul_precision   float32 matmuls in full precision (TF 1.15 had no TF32) or the
                       backend's default (TF32 on recent NVIDIA GPUs)
    oov_vector         with pretrained vectors, the frozen <OOV> row: the vector of one
                       out-of-vocabulary corpus word found among the vectors read (the
                       original's `word2index` is a defaultdict that inserts every OOV
                       word as id 1, so `load_word_embeddings` writes their vectors into
                       row 1 and the last one wins, in an order Python's string hashing
                       randomises per process; here: one of them drawn with the run's
                       seed), or a random uniform(-0.05, 0.05) row

`TrainingProtocol.named("original")` is the default of `convatt train` and the grids;
`TrainingProtocol.named("keras3")` is the whole modern alternative; any field can be set on
its own for ablations. Reported test metrics are exact under both.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from convatt.errors import ConvattError

ORIGINAL, KERAS3 = "original", "keras3"
PROTOCOL_NAMES = (ORIGINAL, KERAS3)


def _item(original: str, keras3: str, help: str):
    return field(default=original, metadata={"choices": {ORIGINAL: original, KERAS3: keras3}, "help": help})


@dataclass(frozen=True)
class TrainingProtocol:
    """The training protocol of a run, one field per place where the original differs."""

    optimizer: str = _item("keras2-rmsprop", "keras3-rmsprop", "RMSprop's update rule")
    loss: str = _item("real-tokens", "all-positions", "what the weighted loss is divided by")
    residual: str = _item("dropped", "clean", "the residual adds D(h) (original) or h")
    relative_bias: str = _item("circulant", "lookup", "+R: the code's circulant or the paper text's lookup")
    pad_inputs: str = _item("original", "zeros", 'PAD positions: "<PAD>" chars, random frozen vector; or zeros')
    early_stopping: str = _item("batch-mean", "exact", "dev metric for early stopping")
    attention_init: str = _item("glorot_normal", "glorot_uniform", "initializer of W_q, W_k, W_v")
    vocabulary: str = _item("original", "train", "chars and labels as the original counts them, or of train")
    matmul_precision: str = _item("highest", "default", "float32 matmuls: full precision or the backend's (TF32)")
    oov_vector: str = _item("oov-word", "random", "with pretrained vectors, <OOV>: an OOV word's vector, or random")

    @classmethod
    def items(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    @classmethod
    def named(cls, name: str) -> TrainingProtocol:
        """The whole original (`"original"`) or modern (`"keras3"`) protocol."""
        if name not in PROTOCOL_NAMES:
            raise ConvattError(f"unknown protocol {name!r}: expected one of {', '.join(PROTOCOL_NAMES)}")
        return cls(**{f.name: f.metadata["choices"][name] for f in cls.items()})

    @classmethod
    def from_dict(cls, data: dict, where=None) -> TrainingProtocol:
        """Read `to_dict`'s form, checking every value."""
        unknown = set(data) - {f.name for f in cls.items()}
        if unknown:
            raise ConvattError(f"unknown protocol item(s): {', '.join(sorted(unknown))}", where)
        base = cls._base_of(data)
        protocol = cls(**{f.name: data.get(f.name, getattr(base, f.name)) for f in cls.items()})
        protocol.check(where)
        return protocol

    @classmethod
    def _base_of(cls, data: dict) -> TrainingProtocol:
        """The named protocol whose choices all of `data`'s items are: it fills the items an
        older run did not record (a keras3 run stays keras3), the original's otherwise."""
        for name in (KERAS3, ORIGINAL):
            named = cls.named(name)
            if data and all(getattr(named, k) == v for k, v in data.items()):
                return named
        return cls.named(ORIGINAL)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def with_overrides(self, **values: str | None) -> TrainingProtocol:
        """This protocol with some items set (None: keep)."""
        changed = dataclasses.replace(self, **{k: v for k, v in values.items() if v is not None})
        changed.check()
        return changed

    def check(self, where=None) -> None:
        for f in self.items():
            allowed = tuple(f.metadata["choices"].values())
            if getattr(self, f.name) not in allowed:
                raise ConvattError(
                    f"protocol item {f.name} must be one of {', '.join(allowed)}, not {getattr(self, f.name)!r}", where
                )

    @property
    def name(self) -> str | None:
        """ "original" or "keras3" when every item is that protocol's, else None (mixed)."""
        for name in PROTOCOL_NAMES:
            if self == TrainingProtocol.named(name):
                return name
        return None

    def label(self) -> str:
        """For display: "original", "keras3", or the original with the items that differ."""
        if self.name:
            return self.name
        base = TrainingProtocol.named(ORIGINAL)
        changed = [
            f"{f.name}={getattr(self, f.name)}" for f in self.items() if getattr(self, f.name) != getattr(base, f.name)
        ]
        return "original with " + ", ".join(changed)


DEFAULT_PROTOCOL = TrainingProtocol.named(ORIGINAL)
LEGACY_PROTOCOL = TrainingProtocol.named(KERAS3)
"""What runs trained before protocols existed (convatt <= 0.1.0) computed."""
