"""convatt.rundir.provenance: the commit (in real git repositories and archives) and the machine
a run records."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import keras
import numpy as np
import pytest
from conftest import ROOT

from convatt.rundir import provenance


def _git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_source_commit_names_the_commit_and_uncommitted_changes(tmp_path, monkeypatch):
    package = tmp_path / "repo" / "convatt"
    package.mkdir(parents=True)
    (package / "model.py").write_text("x = 1\n")
    _git(tmp_path / "repo", "init", "-q")
    _git(tmp_path / "repo", "add", ".")
    _git(tmp_path / "repo", "commit", "-qm", "one")
    monkeypatch.setattr(provenance, "PACKAGE_DIR", package)
    commit = _git(tmp_path / "repo", "rev-parse", "--short", "HEAD")
    assert provenance.source_commit() == commit
    (tmp_path / "repo" / "notes.txt").write_text("outside the package, untracked: not a change of the code\n")
    assert provenance.source_commit() == commit
    (package / "model.py").write_text("x = 2\n")
    assert provenance.source_commit() == commit + "+changes"


def test_no_git_checkout_gives_an_empty_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "PACKAGE_DIR", tmp_path)
    assert provenance.source_commit() == ""
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all
    assert provenance.source_commit() == ""


def test_machine_names_the_cpus_and_the_device():
    arch, cpus, device = provenance.machine().split(", ")
    assert cpus.endswith(" CPUs") and int(cpus.split()[0]) >= 1 and ":" in device and arch


def test_a_copy_without_git_takes_the_commit_it_was_given(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "PACKAGE_DIR", tmp_path)
    monkeypatch.setattr(provenance, "COMMIT_FILE", tmp_path / "COMMIT")
    (tmp_path / "COMMIT").write_text("$Format:%h$\n")  # as in the repository: not a commit
    assert provenance.source_commit() == ""
    monkeypatch.setenv(provenance.COMMIT_VARIABLE, "abc1234")
    assert provenance.source_commit() == "abc1234"


def test_git_archive_writes_the_commit_into_the_copy(tmp_path, monkeypatch):
    """A real `git archive` of a repository laid out as convatt's (the file, .gitattributes)."""
    repo = tmp_path / "repo"
    (repo / "convatt" / "rundir").mkdir(parents=True)
    for name in ("COMMIT", ".gitattributes"):  # the repository's own two files, as they are
        source = provenance.COMMIT_FILE if name == "COMMIT" else ROOT / ".gitattributes"
        (repo / ("convatt/rundir/COMMIT" if name == "COMMIT" else name)).write_text(source.read_text())
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    archive = subprocess.run(["git", "-C", str(repo), "archive", "HEAD"], check=True, capture_output=True).stdout
    copy = tmp_path / "copy"
    copy.mkdir()
    subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
    monkeypatch.setattr(provenance, "PACKAGE_DIR", copy / "convatt" / "rundir")  # no .git above it
    monkeypatch.setattr(provenance, "COMMIT_FILE", copy / "convatt" / "rundir" / "COMMIT")
    monkeypatch.delenv(provenance.COMMIT_VARIABLE, raising=False)
    assert provenance.source_commit() == _git(repo, "rev-parse", "--short", "HEAD")


INTEL = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16 amx_int8 sha_ni

processor\t: 1
model name\t: not the first
"""


def test_the_cpu_model_and_the_instruction_sets_that_choose_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "CPUINFO", tmp_path / "cpuinfo")
    (tmp_path / "cpuinfo").write_text(INTEL)
    assert provenance.cpu_model() == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert provenance.cpu_features() == [
        *("avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
    ]
    (tmp_path / "cpuinfo").unlink()  # not Linux: Python's platform module, the architecture at least
    assert provenance.cpu_model() and provenance.cpu_features() == []


def test_this_platform_names_its_packages():
    here = provenance.platform()
    backend = keras.backend.backend()
    assert here.backend == backend and here.cpu
    assert set(here.cpu_features.split()) <= set(provenance.KERNEL_FEATURES)
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
    script = "from convatt.rundir.provenance import onednn_state; print(onednn_state('tensorflow'))"
    for value, state in (("0", "off"), ("1", "on")):
        env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": value, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
        assert done.stdout.strip() == state, done.stderr[-2000:]
