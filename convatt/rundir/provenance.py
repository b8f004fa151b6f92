"""Where a run was trained: the code's git commit and the machine, for result.json.

source_commit()   "c44886e", "c44886e+changes" (uncommitted changes to tracked files), the
                  commit a copy without .git was given (COMMIT_VARIABLE, or COMMIT_FILE as
                  `git archive` writes it), or "" where none is known
machine()         "x86_64, 2 CPUs, cpu:0" / "x86_64, 16 CPUs, gpu:0": the architecture,
                  the machine's CPU count and the first device Keras computes on
platform()        what decides the float order of a run's numbers (`Platform`): the CPU model
                  and its kernel-choosing instruction sets, oneDNN on or off (TensorFlow),
                  the backend and the versions of the packages that compute
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import platform as _platform
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import keras

PACKAGE_DIR = Path(__file__).resolve().parent
COMMIT_VARIABLE = "CONVATT_COMMIT"  # the commit of a copy without .git, set by whoever made the copy
COMMIT_FILE = PACKAGE_DIR / "COMMIT"  # "$Format:%h$" in the repository; `git archive` writes the commit
CPUINFO = Path("/proc/cpuinfo")
# Instruction sets by which oneDNN, XLA and Eigen choose their kernels (and so the order of a
# float sum): two CPUs that differ in these may differ in the last bits of every result.
KERNEL_FEATURES = (
    *("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni"),
    *("amx_tile", "amx_bf16", "amx_int8", "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16"),
)
ONEDNN_ON, ONEDNN_OFF, ONEDNN_UNUSED = "on", "off", "not used"  # not used: a backend other than TensorFlow
BACKEND_PACKAGES = {"tensorflow": ("tensorflow",), "jax": ("jax", "jaxlib"), "torch": ("torch",)}


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def source_commit() -> str:
    """The short commit of the checkout convatt is imported from, "+changes" if tracked files
    differ; outside a checkout the commit the copy was given, else ""."""
    commit = _git("rev-parse", "--short", "HEAD")
    if not commit:
        return _given_commit()
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".")
    return commit + ("+changes" if changed else "")


def _given_commit() -> str:
    """COMMIT_VARIABLE, else COMMIT_FILE once `git archive` has put the commit in it, else ""."""
    given = os.environ.get(COMMIT_VARIABLE, "").strip()
    if given:
        return given
    try:
        written = COMMIT_FILE.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return written if re.fullmatch(r"[0-9a-f]{4,40}", written) else ""  # not "$Format:%h$"


def machine() -> str:
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


def run_record() -> dict:
    """result.json's fields on the code and the machine (`RunResult.source_commit` .. `packages`)."""
    here = platform()
    return dict(
        source_commit=source_commit(),
        machine=machine(),
        cpu=here.cpu,
        cpu_features=here.cpu_features,
        onednn=here.onednn,
        packages=here.packages,
    )


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
