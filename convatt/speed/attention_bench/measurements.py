"""A run's measurements (`Measurement`), each against Keras' layer and the attention core
(`Comparison`), and the run that holds them (`AttentionBenchmark`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from convatt.speed.attention_bench.settings import CORE, KERAS, KERAS_FLASH, XLA, AttentionSettings


@dataclass(frozen=True)
class Measurement:
    """One layer's training step at one length and mask.

    Attributes:
        case: an `ATTENTION_CASES` name, `KERAS` or `CORE`.
        step_s: median seconds of one forward + backward step.
        temp_bytes, total_bytes: the compiled step's temporary bytes and its
            temp + argument + output bytes (JAX); None under TensorFlow.
        compiler: `XLA` or `NO_XLA` (TensorFlow's `jit_compile=False`).
    """

    case: str
    length: int
    mask: str
    step_s: float
    temp_bytes: int | None
    total_bytes: int | None
    compiler: str = XLA


@dataclass(frozen=True)
class Comparison:
    """A modification's measurement against Keras' layer and the attention core at its length and mask.

    Attributes:
        step_ms, memory_mib, temp_mib: its step time, its memory (temp + argument +
            output) and its temporary memory (None without a memory analysis).
        time_ratio, memory_ratio: its step time and memory over Keras' layer's.
        extra_temp_matrices: its temporary bytes minus Keras' layer's, in attention
            matrices of the compute dtype; None without a memory analysis.
        extra_time_cores: its step time minus Keras' layer's, in attention-core step times.
    """

    case: str
    length: int
    mask: str
    step_ms: float
    time_ratio: float
    memory_mib: float | None
    temp_mib: float | None
    memory_ratio: float | None
    attention_matrix_mib: float
    extra_temp_matrices: float | None
    extra_time_cores: float
    compiler: str = XLA

    @property
    def memory_above_matrix(self) -> bool:
        return self.extra_temp_matrices is not None and self.extra_temp_matrices > 1

    @property
    def time_above_core(self) -> bool:
        return self.extra_time_cores > 1


@dataclass
class AttentionBenchmark:
    """Every measurement of a run, and what it ran on."""

    settings: AttentionSettings
    backend: str
    device: str
    measurements: list[Measurement] = field(default_factory=list)
    backends: list[Measurement] = field(default_factory=list)  # Keras' layer by backend: "backend, compiler" its case

    @property
    def compilers(self) -> tuple[str, ...]:
        return self.settings.compilers(self.backend)

    def over_fastest(self, m: Measurement) -> float:
        """A `backends` step over the fastest of them at its length and mask."""
        same = [other.step_s for other in self.backends if (other.length, other.mask) == (m.length, m.mask)]
        return m.step_s / min(same)

    def get(self, case: str, length: int, mask: str, compiler: str = XLA) -> Measurement:
        key = (case, length, mask, compiler)
        return next(m for m in self.measurements if (m.case, m.length, m.mask, m.compiler) == key)

    def compare(self, case: str, length: int, mask: str, compiler: str = XLA) -> Comparison:
        mine, keras_layer, core = (self.get(name, length, mask, compiler) for name in (case, KERAS, CORE))
        matrix = self.settings.attention_matrix_bytes(length)
        has_memory = mine.total_bytes is not None
        return Comparison(
            case=case,
            length=length,
            mask=mask,
            step_ms=1e3 * mine.step_s,
            time_ratio=mine.step_s / keras_layer.step_s,
            memory_mib=mine.total_bytes / 2**20 if has_memory else None,
            temp_mib=mine.temp_bytes / 2**20 if has_memory else None,
            memory_ratio=mine.total_bytes / keras_layer.total_bytes if has_memory else None,
            attention_matrix_mib=matrix / 2**20,
            extra_temp_matrices=(mine.temp_bytes - keras_layer.temp_bytes) / matrix if has_memory else None,
            extra_time_cores=(mine.step_s - keras_layer.step_s) / core.step_s,
            compiler=compiler,
        )

    def comparisons(self) -> list[Comparison]:
        """Every measurement against Keras' layer (Keras' layer and the core included), for the
        lengths and masks measured so far."""
        settings, measured = self.settings, {(m.length, m.mask, m.compiler) for m in self.measurements}
        return [
            self.compare(name, n, mask, compiler)
            for compiler in self.compilers
            for mask in settings.masks
            for n in settings.lengths
            if (n, mask, compiler) in measured
            for name in self.reference_names(n, mask, compiler) + [case.name for case in settings.selected_cases()]
        ]

    def reference_names(self, length: int, mask: str, compiler: str = XLA) -> list[str]:
        """Keras' layer, its flash path where it was measured, the core."""
        key = (length, mask, compiler)
        measured = {m.case for m in self.measurements if (m.length, m.mask, m.compiler) == key}
        return [name for name in (KERAS, KERAS_FLASH, CORE) if name in measured]
