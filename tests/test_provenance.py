"""convatt.rundir.provenance: the commit (in real git repositories and archives) and what result.json
records of how a run was made."""

from __future__ import annotations

import subprocess

import keras
from helpers import ROOT

from convatt import machine
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


def test_the_run_record_holds_the_backend_the_version_the_commit_and_the_machine():
    import convatt

    record = provenance.run_record()
    here = machine.platform()
    assert record["backend"] == keras.backend.backend() == here.backend
    assert record["convatt_version"] == convatt.__version__ and record["source_commit"] == provenance.source_commit()
    assert record["machine"] == machine.summary() and record["packages"] == here.packages
    assert (record["cpu"], record["cpu_features"], record["onednn"]) == (here.cpu, here.cpu_features, here.onednn)
