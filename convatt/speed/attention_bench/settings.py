"""What `convatt bench --attention` measures: the modifications timed (`ATTENTION_CASES`), the
settings of a run (`AttentionSettings`) and their checks, the names of the reference rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import keras

KERAS = "Keras' layer"
KERAS_FLASH = "Keras' layer, flash attention"
CORE = "attention core"
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16")
COMPUTE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}  # bytes of one number of each compute dtype
MASKS = {"causal": True, "bidirectional": False}  # `use_causal_mask` of each mask's name
XLA, NO_XLA = "XLA", "no XLA"  # how a step is compiled: one XLA program (JAX, `jit_compile=True`), or TF's graph


@dataclass(frozen=True)
class AttentionCase:
    """One row of the benchmark: its key (`--cases`), its name in the tables, and the
    modification options of `convatt.layers.MultiHeadAttention`."""

    key: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)


ATTENTION_CASES: tuple[AttentionCase, ...] = (
    AttentionCase("none", "none"),
    AttentionCase("p-r", "+P+R", {"position_interaction": True, "relative_bias": True}),
    AttentionCase("temp", "+Temp", {"temperature": True}),
    AttentionCase("shaw", "Shaw k=16", {"relative_position_representation": 16}),
    AttentionCase("alibi", "ALiBi", {"alibi": True}),
    AttentionCase("conv", "+Conv (1d)", {"attention_conv": "1d"}),
    AttentionCase("conv2d", "+Conv2d", {"attention_conv": "2d"}),
    AttentionCase(
        "mta",
        "Conv2d (2, 9) before softmax",
        {"attention_conv": "2d", "conv_kernel_size": (2, 9), "conv_before_softmax": True},
    ),
    AttentionCase("talking-heads", "talking heads", {"talking_heads": True}),
)
"""The modifications timed, each alone; "none" is convatt's layer with none on (= Keras');
"mta" is Multi-Token Attention's key-query convolution."""
CASE_KEYS = tuple(case.key for case in ATTENTION_CASES)


@dataclass(frozen=True)
class AttentionSettings:
    """What is measured: the lengths, the batch and head shapes, the repeats."""

    lengths: tuple[int, ...] = (64, 128, 256, 512, 1024)
    masks: tuple[str, ...] = tuple(MASKS)
    cases: tuple[str, ...] = CASE_KEYS
    batch_size: int = 2
    num_heads: int = 4
    key_dim: int = 32
    repeats: int = 5
    warmup: int = 1
    seed: int = 0
    dtype_policy: str = "float32"
    jit_compile: tuple[bool, ...] = (True, False)  # TensorFlow's `fit` steps timed; JAX always compiles with XLA
    cross_backend: bool = True  # also Keras' layer under each backend, each in a process of its own

    def compilers(self, backend: str) -> tuple[str, ...]:
        """`XLA` and / or `NO_XLA`: the compilations timed under `backend` (JAX: XLA only)."""
        return (XLA,) if backend != "tensorflow" else tuple(XLA if jit else NO_XLA for jit in self.jit_compile)

    def selected_cases(self) -> list[AttentionCase]:
        """The `ATTENTION_CASES` of `cases`, in the table's order."""
        return [case for case in ATTENTION_CASES if case.key in self.cases]

    @property
    def compute_dtype(self) -> str:
        """The layers' compute dtype under `dtype_policy` (float32, or the 16-bit one of a mixed policy)."""
        return keras.DTypePolicy(self.dtype_policy).compute_dtype

    def attention_matrix_bytes(self, length: int) -> int:
        """Bytes of one attention matrix `(batch, heads, length, length)` in the compute dtype."""
        return self.batch_size * self.num_heads * length * length * COMPUTE_BYTES[self.compute_dtype]


QUICK_SETTINGS = AttentionSettings(
    lengths=(16,), batch_size=1, num_heads=2, key_dim=4, repeats=1, warmup=0, cross_backend=False
)
"""A run of seconds (tests, a first look)."""


def compilation(backend: str, compiler: str) -> str:
    """How a step was compiled, in words: "JAX (jitted)", "TensorFlow with XLA (`jit_compile=True`)"..."""
    if backend != "tensorflow":
        return f"{BACKEND_NAMES.get(backend, backend)} (jitted)"
    return f"TensorFlow {'with' if compiler == XLA else 'without'} XLA (`jit_compile={compiler == XLA}`)"


BACKEND_NAMES = {"jax": "JAX", "tensorflow": "TensorFlow", "torch": "PyTorch"}


def check_settings(settings: AttentionSettings) -> None:
    """ValueErrors for settings that cannot run, one line naming the setting."""
    positive = dict(batch_size=settings.batch_size, num_heads=settings.num_heads, key_dim=settings.key_dim)
    positive.update(repeats=settings.repeats, lengths=min(settings.lengths, default=0))
    for name, value in positive.items():
        if value < 1:
            raise ValueError(f"{name} must be at least 1; received {getattr(settings, name)}")
    if settings.dtype_policy not in DTYPE_POLICIES:
        raise ValueError(f"dtype_policy must be one of {', '.join(DTYPE_POLICIES)}; received {settings.dtype_policy}")
    if not settings.jit_compile or not set(settings.jit_compile) <= {True, False}:
        raise ValueError(f"jit_compile must be some of True, False; received {settings.jit_compile}")
    if settings.warmup < 0:
        raise ValueError(f"warmup must be at least 0; received {settings.warmup}")
    for name, allowed in (("masks", tuple(MASKS)), ("cases", CASE_KEYS)):
        given = getattr(settings, name)
        if not given or not set(given) <= set(allowed):
            raise ValueError(f"{name} must be some of {', '.join(allowed)}; received {', '.join(given) or 'none'}")
