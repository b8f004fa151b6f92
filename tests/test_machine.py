"""convatt.machine: the machine a run computes on, probed (its CPU, the kernels' instruction
sets, oneDNN, the packages that compute)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import keras
import numpy as np
import pytest
from helpers import ROOT

from convatt import machine


def test_the_summary_names_the_cpus_and_the_device():
    arch, cpus, device = machine.summary().split(", ")
    assert cpus.endswith(" CPUs") and int(cpus.split()[0]) >= 1 and ":" in device and arch


INTEL = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8 sha_ni

processor\t: 1
model name\t: not the first
"""


def test_the_cpu_model_and_the_instruction_sets_that_choose_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(machine, "CPUINFO", tmp_path / "cpuinfo")
    (tmp_path / "cpuinfo").write_text(INTEL)
    assert machine.cpu_model() == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert machine.cpu_features() == [
        *("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
    ]
    (tmp_path / "cpuinfo").unlink()  # not Linux: Python's platform module, the architecture at least
    assert machine.cpu_model() and machine.cpu_features() == []


def test_this_platform_names_its_packages():
    here = machine.platform()
    backend = keras.backend.backend()
    assert here.backend == backend and here.cpu
    assert set(here.cpu_features.split()) <= set(machine.KERNEL_FEATURES)
    assert here.packages["keras"] == keras.__version__ and here.packages["numpy"] == np.__version__
    expected = {"tensorflow": ["tensorflow"], "jax": ["jax", "jaxlib"]}[backend]
    assert list(here.packages) == [*expected, "keras", "numpy"]
    assert here.onednn in (("on", "off") if backend == "tensorflow" else ("not used",))
    assert f"keras {keras.__version__}" in here.describe()


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() == "x86_64"), reason="oneDNN: Linux x86"
)
@pytest.mark.slow  # two TensorFlow processes
def test_onednn_as_tensorflow_runs_it():
    """TF_ENABLE_ONEDNN_OPTS decides where set (real processes: TensorFlow reads it once)."""
    script = "from convatt.machine import onednn_state; print(onednn_state('tensorflow'))"
    for value, state in (("0", "off"), ("1", "on")):
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": value, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
        assert done.stdout.strip() == state, done.stderr[-2000:]
