"""convatt.run.provenance: the commit and the machine a run records, in a real git repository."""

from __future__ import annotations

import subprocess

from convatt.run import provenance


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
