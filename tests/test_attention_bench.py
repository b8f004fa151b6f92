"""`convatt bench --attention`: every modification is measured against Keras' layer in one run,
and the memory figures (JAX's memory analysis of the compiled step) agree with sizes computed
here with NumPy. Structure and consistency only: no timing assertions."""

import csv
import dataclasses
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from convatt.errors import ConvattError
from convatt.speed.attention_bench import (
    ATTENTION_CASES,
    QUICK_SETTINGS,
    AttentionBenchmark,
    AttentionSettings,
    Measurement,
    render_markdown,
    run_attention_benchmark,
    write_csv,
)
from convatt.speed.attention_bench import steps as bench_steps
from convatt.speed.attention_bench.settings import CORE, KERAS, KERAS_FLASH, NO_XLA, XLA, compilation

SETTINGS = dataclasses.replace(QUICK_SETTINGS, masks=("causal",))  # one length, one mask
NAMES = [KERAS, CORE, *[case.name for case in ATTENTION_CASES]]  # every row, in the table's order
MIB = 2**20


def _check_memory(rows: dict[str, dict], settings=SETTINGS) -> None:
    """Memory figures (MiB, by case) against the attention matrix and the weights' sizes."""
    (length,) = settings.lengths
    heads, batch = settings.num_heads, settings.batch_size
    matrix = np.zeros((batch, heads, length, length), np.float32).nbytes
    keras_row = rows[KERAS]
    assert keras_row["temp_mib"] * MIB >= matrix  # the softmax kept for the backward pass, at least
    for name, row in rows.items():
        assert row["attention_matrix_mib"] * MIB == matrix
        assert row["memory_ratio"] == pytest.approx(row["memory_mib"] / keras_row["memory_mib"])
        extra = (row["temp_mib"] - keras_row["temp_mib"]) * MIB / matrix
        assert row["extra_temp_matrices"] == pytest.approx(extra), name

    def weights_and_gradients(name):  # arguments + outputs: the weights in, their gradients out (+ x, loss)
        return (rows[name]["memory_mib"] - rows[name]["temp_mib"]) * MIB

    assert weights_and_gradients("none") == weights_and_gradients(KERAS)  # the same weights
    conv = [np.zeros((heads, 3, length, length), np.float32), np.zeros((heads, length), np.float32)]  # kernel, bias
    for name, new_weights in (("+Conv (1d)", conv), ("+Temp", [np.zeros((3, heads), np.float32)])):
        if name not in rows:
            continue
        added = weights_and_gradients(name) - weights_and_gradients("none") - 2 * sum(w.nbytes for w in new_weights)
        assert 0 <= added <= 64 * len(new_weights), name  # + the output tuple's pointers to the new gradients


def test_quick_run_in_process_with_the_cases_chosen():
    """The session's backend (TensorFlow in `make test`: time only), three modifications (Shaw's
    gathered tables give TensorFlow a sparse gradient)."""
    lines = []
    result = run_attention_benchmark(dataclasses.replace(SETTINGS, cases=("mta", "shaw", "none")), log=lines.append)
    rows = result.comparisons()
    names = [KERAS, CORE, "none", "Shaw k=16", "Conv2d (2, 9) before softmax"]  # the table's order, not the option's
    compilers = [XLA, NO_XLA] if keras.backend.backend() == "tensorflow" else [XLA]  # fit's step with / without XLA
    expected = [(name, 16, "causal", compiler) for compiler in compilers for name in names]
    assert [(r.case, r.length, r.mask, r.compiler) for r in rows] == expected
    assert all(r.step_ms > 0 and r.time_ratio > 0 for r in rows)
    assert rows[0].time_ratio == 1 and rows[0].extra_time_cores == 0
    markdown = render_markdown(result)
    assert markdown.count("\n| none |") == len(compilers)
    for compiler in compilers:
        assert f"Causal self-attention, float32, {compilation(keras.backend.backend(), compiler)} (cells" in markdown
    for name in names:
        assert f"\n| {name} |" in markdown
    assert "+Conv2d |" not in markdown
    assert "Causal self-attention" in markdown and "Bidirectional" not in markdown
    assert "Where a modification costs more than the attention matrix itself:" in markdown
    assert lines[0].startswith(f"convatt bench --attention: backend {keras.backend.backend()}")
    if keras.backend.backend() == "jax":
        _check_memory({r.case: dataclasses.asdict(r) for r in rows})
    else:
        assert all(r.memory_mib is None and r.extra_temp_matrices is None for r in rows)
        assert "memory: under JAX only" in markdown


@pytest.mark.slow  # a JAX process compiling every modification; in-process: the quick run above
def test_cli_under_jax_writes_the_memory_of_every_modification(tmp_path):
    """The command end to end in a JAX process (the memory analysis), every modification, its CSV read back."""
    out = tmp_path / "attention.csv"
    # without LLVM's optimisations XLA compiles 2-3x faster (the weights' initializers too)
    env = {**os.environ, "KERAS_BACKEND": "jax", "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
    command = [sys.executable, "-m", "convatt", "bench", "--attention", "--quick", "--masks", "causal"]
    done = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "backend jax" in done.stdout and f"wrote {out}" in done.stdout
    for name in NAMES:
        assert f"\n| {name} |" in done.stdout
    with open(out) as f:
        rows = {row["case"]: row for row in csv.DictReader(f)}
    assert list(rows) == NAMES
    figures = ("_mib", "_ratio", "_matrices")
    numbers = {name: {k: float(v) for k, v in row.items() if k.endswith(figures)} for name, row in rows.items()}
    assert all(row["time_ratio"] > 0 for row in numbers.values())
    _check_memory(numbers)


def test_a_mixed_policy_counts_matrices_in_its_compute_dtype_and_a_refused_flash_path_is_left_out(monkeypatch, capsys):
    """Asked for Keras' flash path where it cannot run (this CPU: neither backend has it here),
    the run goes on without that row and says why; the attention matrix is bfloat16's size."""
    monkeypatch.setattr(bench_steps, "flash_possible", lambda settings: True)  # as if on a GPU
    settings = dataclasses.replace(
        SETTINGS, cases=("none", "conv2d"), dtype_policy="mixed_bfloat16", jit_compile=(True,)
    )
    result = run_attention_benchmark(settings, log=lambda line: None)
    rows = result.comparisons()
    assert [r.case for r in rows] == [KERAS, CORE, "none", "+Conv2d"]
    assert "Keras' flash attention unavailable: " in capsys.readouterr().err
    (length,) = settings.lengths
    assert rows[0].attention_matrix_mib * MIB == settings.batch_size * settings.num_heads * length**2 * 2
    assert "Causal self-attention, mixed_bfloat16, " in render_markdown(result)


def test_the_flash_reference_row_shows_where_it_was_measured():
    """A GPU run's third reference row (no GPU needed: the rendering of given measurements)."""
    settings = dataclasses.replace(SETTINGS, lengths=(16, 32), cases=("none",), dtype_policy="mixed_bfloat16")
    result = AttentionBenchmark(settings, "jax", "gpu (test)")
    for length in settings.lengths:
        for name, seconds in ((KERAS, 0.002), (CORE, 0.001), ("none", 0.003), (KERAS_FLASH, 0.0015)):
            if name != KERAS_FLASH or length == 32:
                result.measurements.append(Measurement(name, length, "causal", seconds, 1024, 4096))
    markdown = render_markdown(result)
    assert f"\n| {KERAS_FLASH} | - | 1.5 ms / 4.0 KiB |" in markdown
    assert "\n| none | 1.50x / 1.00x / +0.0 | 1.50x / 1.00x / +0.0 |" in markdown
    assert [r.case for r in result.comparisons()] == [KERAS, CORE, "none", KERAS, KERAS_FLASH, CORE, "none"]
    assert result.compare(KERAS_FLASH, 32, "causal").time_ratio == 0.75


def test_cli_takes_the_dtype_policy_with_attention_and_refuses_the_taggers_options(capsys):
    from convatt.cli import build_parser
    from convatt.cli.bench import _attention_settings, _check_options

    parse = build_parser().parse_args
    args = parse(["bench", "--attention", "--quick", "--precision", "mixed_bfloat16"])
    _check_options(args)
    assert _attention_settings(args) == dataclasses.replace(QUICK_SETTINGS, dtype_policy="mixed_bfloat16")
    args = parse(["bench", "--attention", "--jit-compile", "false", "false", "--cross-backend"])
    assert _attention_settings(args) == AttentionSettings(jit_compile=(False,), cross_backend=True)
    assert not _attention_settings(parse(["bench", "--attention", "--no-cross-backend"])).cross_backend
    with pytest.raises(ConvattError, match="--variant is an option of the tagger's benchmark"):
        _check_options(parse(["bench", "--attention", "--variant", "san-pe-add-conv2d"]))
    with pytest.raises(ConvattError, match="--lengths is an option of --attention"):
        _check_options(parse(["bench", "--lengths", "64"]))


def test_what_is_measured_is_handed_on_after_each_length():
    """`measured` sees each length's rows as soon as they are timed (the CLI rewrites its CSV
    then, so an interrupted run keeps them)."""
    seen = []
    settings = dataclasses.replace(SETTINGS, lengths=(8, 16), cases=("none",), jit_compile=(False,))
    run_attention_benchmark(
        settings, log=lambda line: None, measured=lambda r: seen.append([(c.case, c.length) for c in r.comparisons()])
    )
    first = [(KERAS, 8), (CORE, 8), ("none", 8)]
    assert seen == [first, [*first, (KERAS, 16), (CORE, 16), ("none", 16)]]


def test_keras_layer_by_backend_is_over_the_fastest_at_each_length_and_mask(tmp_path):
    """The cross-backend rows (given measurements: the rendering and the CSV): each backend's
    Keras layer over the fastest of them at its length and mask."""
    settings = dataclasses.replace(SETTINGS, lengths=(16, 32), cases=("none",), jit_compile=(True,))
    result = AttentionBenchmark(settings, "tensorflow", "CPU (test)")
    for length in settings.lengths:
        for name, seconds in ((KERAS, 0.002), (CORE, 0.001), ("none", 0.003)):
            result.measurements.append(Measurement(name, length, "causal", seconds, None, None))
    for backend, compiler, at_16, at_32 in (("jax", XLA, 0.004, 0.010), ("tensorflow", XLA, 0.002, 0.020)):
        for length, seconds in ((16, at_16), (32, at_32)):
            case = compilation(backend, compiler)
            result.backends.append(Measurement(case, length, "causal", seconds, None, None, compiler))
    markdown = render_markdown(result)
    assert "\n| JAX (jitted) | 4.0 ms / 2.00x | 10.0 ms / 1.00x |" in markdown
    assert "\n| TensorFlow with XLA (`jit_compile=True`) | 2.0 ms / 1.00x | 20.0 ms / 2.00x |" in markdown
    write_csv(result, tmp_path / "attention.csv")
    with open(tmp_path / "attention.csv") as f:
        rows = [row for row in csv.DictReader(f) if row["case"] == "JAX (jitted)"]
    assert [(row["length"], float(row["time_ratio"])) for row in rows] == [("16", 2.0), ("32", 1.0)]


@pytest.mark.slow  # a JAX and a TensorFlow process, each compiling Keras' layer
def test_keras_layer_is_measured_under_each_backend_in_a_process_of_its_own():
    from convatt.speed.attention_bench.cross_backend import measure_backends

    settings = dataclasses.replace(SETTINGS, cases=("none",))
    lines = []
    rows = measure_backends(settings, log=lines.append)
    expected = ["JAX (jitted)", *[compilation("tensorflow", c) for c in (XLA, NO_XLA)]]
    assert [(m.case, m.length, m.mask) for m in rows] == [(name, 16, "causal") for name in expected]
    assert all(m.step_s > 0 for m in rows) and len(lines) == 2


def test_a_step_out_of_memory_is_a_cell_not_the_end_of_the_run(capsys):
    """A step whose run lacks memory (the backend's error) is NaN and "out of memory" in the
    table, the others timed; any other error still stops the run."""

    class ResourceExhaustedError(Exception):  # TensorFlow's name; XLA says RESOURCE_EXHAUSTED
        pass

    def lacks_memory():
        raise ResourceExhaustedError("Out of memory while trying to allocate 10.01GiB.")

    steps = {KERAS: bench_steps.CompiledStep(lambda: None), "none": bench_steps.CompiledStep(lacks_memory)}
    medians = bench_steps.median_times(steps, repeats=2, warmup=0)
    assert np.isnan(medians["none"]) and medians[KERAS] >= 0
    assert "none: out of memory (Out of memory while trying to allocate 10.01GiB.)" in capsys.readouterr().err
    result = AttentionBenchmark(dataclasses.replace(SETTINGS, cases=("none",)), "tensorflow", "cpu (test)")
    for name, seconds in ((KERAS, 0.002), (CORE, 0.001), ("none", medians["none"])):
        result.measurements.append(Measurement(name, 16, "causal", seconds, None, None, XLA))
        result.measurements.append(Measurement(name, 16, "causal", seconds, None, None, NO_XLA))
    assert "\n| none | out of memory |" in render_markdown(result)
    steps["none"] = bench_steps.CompiledStep(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        bench_steps.median_times(steps, repeats=1, warmup=0)


def test_a_step_out_of_memory_when_compiled_is_one_too():
    def lacks_memory():
        raise MemoryError("no room for the step")

    step = bench_steps.unless_out_of_memory(lacks_memory)
    assert np.isnan(bench_steps.median_times({"none": step}, repeats=1, warmup=0)["none"])
    with pytest.raises(ZeroDivisionError):
        bench_steps.unless_out_of_memory(lambda: 1 / 0)
