"""The machine this process computes on, probed: what a run's result.json records of it.

summary()     "x86_64, 2 CPUs, cpu:0" / "x86_64, 16 CPUs, gpu:0": the architecture, the
              machine's CPU count and the first device Keras computes on
platform()    what decides the float order of a run's numbers (`Platform`): the CPU model
              and its kernel-choosing instruction sets, oneDNN on or off (TensorFlow),
              the backend and the versions of the packages that compute

The one module that asks the backend about the machine (oneDNN's state is TensorFlow's own
answer, through a private API: `onednn_state`); `convatt.rundir.provenance` puts its answers
into result.json.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform as _platform
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import keras

CPUINFO = Path("/proc/cpuinfo")
# Instruction sets by which oneDNN, XLA and Eigen choose their kernels (and so the order of a
# float sum): two CPUs that differ in these may differ in the last bits of every result.
KERNEL_FEATURES = (
    *("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni"),
    *("amx_tile", "amx_bf16", "amx_int8", "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16"),
)
ONEDNN_ON, ONEDNN_OFF, ONEDNN_UNUSED = "on", "off", "not used"  # not used: a backend other than TensorFlow
BACKEND_PACKAGES = {"tensorflow": ("tensorflow",), "jax": ("jax", "jaxlib"), "torch": ("torch",)}


def summary() -> str:
    """The architecture, the machine's CPU count and the first device Keras computes on."""
    devices = keras.distribution.list_devices()
    return f"{_platform.machine()}, {os.cpu_count()} CPUs, {devices[0] if devices else 'cpu'}"


@dataclass(frozen=True)
class Platform:
    """What decides the last bits of a run's numbers. Two runs of the same code and seed give
    the same numbers bit for bit where these are equal (one thread); elsewhere float sums may
    run in another order (docs/reliability.md)."""

    cpu: str  # the CPU's model name, e.g. "AMD EPYC 7B13"
    cpu_features: str  # the KERNEL_FEATURES the CPU has, space-separated; "" where unknown
    onednn: str  # ONEDNN_ON / ONEDNN_OFF under TensorFlow, else ONEDNN_UNUSED
    backend: str
    packages: dict[str, str] = field(default_factory=dict)  # package -> version, those that compute

    def describe(self) -> str:
        """One line: "AMD EPYC [avx avx2 fma], oneDNN off, tensorflow 2.21.0, keras 3.15.1, numpy 2.4.6"."""
        onednn = f", oneDNN {self.onednn}" if self.onednn != ONEDNN_UNUSED else ""
        versions = ", ".join(f"{name} {version}" for name, version in self.packages.items())
        return f"{self.cpu} [{self.cpu_features or 'features unknown'}]{onednn}, {versions}"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def platform() -> Platform:
    """This process's `Platform` (the backend Keras runs on now)."""
    backend = keras.backend.backend()
    return Platform(cpu_model(), " ".join(cpu_features()), onednn_state(backend), backend, package_versions(backend))


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (Linux); {} elsewhere."""
    try:
        text = CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    fields = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model() -> str:
    """The CPU's model name: /proc/cpuinfo on Linux, sysctl on macOS, else what Python's
    `platform` knows (the architecture at least)."""
    info = _cpuinfo()
    for key in ("model name", "Model", "cpu model", "Hardware"):
        if info.get(key):
            return info[key]
    if sys.platform == "darwin":
        try:
            brand = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True)
            if brand.returncode == 0 and brand.stdout.strip():
                return brand.stdout.strip()
        except OSError:
            pass
    return _platform.processor() or _platform.machine() or "unknown CPU"


def cpu_features() -> list[str]:
    """The KERNEL_FEATURES the CPU has (/proc/cpuinfo's flags or Features); [] where unknown."""
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return [f for f in KERNEL_FEATURES if f in flags]


def onednn_state(backend: str) -> str:
    """Whether TensorFlow runs oneDNN's kernels: on by default on Linux x86 CPUs with AVX-512
    VNNI/BF16, AVX-VNNI or AMX, else off; TF_ENABLE_ONEDNN_OPTS decides where set. "" if
    TensorFlow cannot say."""
    if backend != "tensorflow":
        return ONEDNN_UNUSED
    try:
        from tensorflow.python.util import _pywrap_util_port  # TensorFlow's own answer
    except ImportError:
        return ""
    return ONEDNN_ON if _pywrap_util_port.IsMklEnabled() else ONEDNN_OFF


def package_versions(backend: str) -> dict[str, str]:
    """The versions of the packages that compute a run's numbers: the backend's, Keras, NumPy."""
    versions = {}
    for name in (*BACKEND_PACKAGES.get(backend, (backend,)), "keras", "numpy"):
        try:
            versions[name] = str(importlib.import_module(name).__version__)
        except (ImportError, AttributeError):
            versions[name] = "not installed"
    return versions
