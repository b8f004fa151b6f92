"""experiments/ud_data.py (`make ud-data`) against real services on loopback.

The tarball source downloads from an `http.server` on 127.0.0.1 serving a small
`ud-treebanks-v2.2.tgz` built here from two embedded treebanks; the git source
clones local bare repositories (tag r2.2) through `file://` URLs. The script runs
as a subprocess, as `make ud-data` runs it, so exit codes and messages are its own.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import io
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "experiments" / "ud_data.py"
EMBEDDED = ROOT / "convatt" / "embedded" / "ud-2.2"
TREEBANKS = ("Afrikaans-AfriBooms", "Vietnamese-VTB")
GIT = ("git", "-c", "user.name=test", "-c", "user.email=test@example.org", "-c", "init.defaultBranch=main")


def plain_files(name: str) -> dict[str, bytes]:
    """An embedded treebank's files as the UD release has them (CoNLL-U decompressed)."""
    files = {}
    for path in (EMBEDDED / f"UD_{name}").iterdir():
        if path.name.endswith(".gz"):
            files[path.name[:-3]] = gzip.decompress(path.read_bytes())
        else:
            files[path.name] = path.read_bytes()
    files["stats.xml"] = b"<treebank/>\n"  # in the release, not wanted in the output
    return files


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A directory with ud-treebanks-v2.2.tgz of the two treebanks."""
    root = tmp_path_factory.mktemp("source")
    with tarfile.open(root / "ud-treebanks-v2.2.tgz", "w:gz") as tar:
        for name in TREEBANKS:
            for filename, data in sorted(plain_files(name).items()):
                info = tarfile.TarInfo(f"ud-treebanks-v2.2/UD_{name}/{filename}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return root


@pytest.fixture(scope="module")
def tarball(source) -> tuple[str, str]:
    """(URL of the tarball on a loopback HTTP server, its SHA-256)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(source))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sha = hashlib.sha256((source / "ud-treebanks-v2.2.tgz").read_bytes()).hexdigest()
    yield f"http://127.0.0.1:{server.server_port}/ud-treebanks-v2.2.tgz", sha
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> str:
    """A `--git-url` template of bare repositories: the two treebanks tagged r2.2, and
    English-GUM without the tag."""
    root = tmp_path_factory.mktemp("repos")
    for name in (*TREEBANKS, "English-GUM"):
        work = root / "work" / name
        work.mkdir(parents=True)
        for filename, data in plain_files(name).items():
            (work / filename).write_bytes(data)
        subprocess.run([*GIT, "init", "-q", str(work)], check=True)
        subprocess.run([*GIT, "-C", str(work), "add", "."], check=True)
        subprocess.run([*GIT, "-C", str(work), "commit", "-q", "-m", "data"], check=True)
        if name != "English-GUM":
            subprocess.run([*GIT, "-C", str(work), "tag", "r2.2"], check=True)
        subprocess.run([*GIT, "clone", "-q", "--bare", str(work), str(root / f"UD_{name}.git")], check=True)
    return (root / "UD_{name}.git").as_uri().replace("%7B", "{").replace("%7D", "}")


def ud_data(out: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the script; its completed process."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args], capture_output=True, text=True, timeout=60
    )


def from_tarball(out: Path, tarball, *args: str, sha: str | None = None):
    """Run the script on the loopback tarball."""
    url, good = tarball
    return ud_data(out, "--url", url, "--sha256", sha or good, "--treebanks", ",".join(TREEBANKS), *args)


def assert_identical(out: Path, name: str) -> None:
    """The output treebank holds the source's CoNLL-U, LICENSE and README files, byte for byte."""
    expected = {k: v for k, v in plain_files(name).items() if k != "stats.xml"}
    got = {p.name: p.read_bytes() for p in (out / f"UD_{name}").iterdir()}
    assert got == expected


def assert_one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    """Exit status 1 and one `ud_data: error:` line naming `words`, no traceback."""
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ud_data: error: "), done.stderr
    for word in words:
        assert word in lines[0]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_tarball_success_byte_identical(tmp_path, tarball):
    done = from_tarball(tmp_path, tarball)
    assert done.returncode == 0, done.stderr
    for name in TREEBANKS:
        assert_identical(tmp_path, name)
        assert f"{name}: written" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"UD_{t}" for t in TREEBANKS]


def test_wrong_checksum_leaves_nothing(tmp_path, tarball):
    done = from_tarball(tmp_path, tarball, sha="0" * 64)
    assert_one_line_error(done, "wrong SHA-256", tarball[1])
    assert list(tmp_path.iterdir()) == []


def test_missing_treebank_is_named_and_others_written(tmp_path, tarball):
    url, sha = tarball
    done = ud_data(tmp_path, "--url", url, "--sha256", sha, "--treebanks", "Afrikaans-AfriBooms,UD_English-GUM")
    assert_one_line_error(done, "English-GUM", "not in the tarball", "1 of 2")
    assert_identical(tmp_path, "Afrikaans-AfriBooms")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["UD_Afrikaans-AfriBooms"]


def test_unreachable_server_is_named(tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/ud-treebanks-v2.2.tgz"
    done = ud_data(tmp_path, "--url", url, "--sha256", "0" * 64, "--treebanks", TREEBANKS[0])
    assert_one_line_error(done, url, "no network?")
    assert list(tmp_path.iterdir()) == []


def test_http_error_is_named(tmp_path, tarball):
    url = tarball[0].replace("v2.2.tgz", "v9.tgz")
    done = ud_data(tmp_path, "--url", url, "--sha256", tarball[1], "--treebanks", TREEBANKS[0])
    assert_one_line_error(done, url, "HTTP 404")


def test_rerun_skips_completed(tmp_path, tarball):
    assert from_tarball(tmp_path, tarball).returncode == 0
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    # nothing left to do: the (unreachable) server is not even asked
    done = ud_data(tmp_path, "--url", f"http://127.0.0.1:{closed_port()}/x.tgz", "--treebanks", ",".join(TREEBANKS))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("already complete, skipped") == 2
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_interrupted_leftovers_are_not_complete(tmp_path, tarball):
    name = TREEBANKS[0]
    stale = tmp_path / f".UD_{name}.partial-x1y2"  # a run killed while extracting
    stale.mkdir()
    (stale / "af_afribooms-ud-train.conllu").write_bytes(b"1\tDie\n")
    half = tmp_path / f"UD_{TREEBANKS[1]}"  # not made by the script: left alone, named
    half.mkdir()
    (half / "vi_vtb-ud-train.conllu").write_bytes(b"")
    done = from_tarball(tmp_path, tarball)
    assert_one_line_error(done, TREEBANKS[1], "exists but is incomplete")
    assert f"{name}: written" in done.stdout
    assert_identical(tmp_path, name)
    assert not stale.exists()
    assert [p.name for p in half.iterdir()] == ["vi_vtb-ud-train.conllu"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_local_tarball_is_checked(tmp_path, source, tarball):
    archive = str(source / "ud-treebanks-v2.2.tgz")
    bad = ud_data(tmp_path, "--tarball", archive, "--sha256", "f" * 64, "--treebanks", TREEBANKS[0])
    assert_one_line_error(bad, "wrong SHA-256", archive)
    good = ud_data(tmp_path, "--tarball", archive, "--sha256", tarball[1], "--treebanks", TREEBANKS[0])
    assert good.returncode == 0, good.stderr
    assert_identical(tmp_path, TREEBANKS[0])


def test_git_success_byte_identical(tmp_path, repos):
    done = ud_data(tmp_path, "--source", "git", "--git-url", repos, "--treebanks", ",".join(TREEBANKS))
    assert done.returncode == 0, done.stderr
    for name in TREEBANKS:
        assert_identical(tmp_path, name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"UD_{t}" for t in TREEBANKS]


def test_git_missing_tag_and_repository_are_named(tmp_path, repos):
    done = ud_data(
        tmp_path, "--source", "git", "--git-url", repos, "--treebanks", "English-GUM,Afrikaans-AfriBooms,Klingon-KDT"
    )
    assert_one_line_error(done, "English-GUM", "has no tag r2.2", "Klingon-KDT", "no repository at", "2 of 3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["UD_Afrikaans-AfriBooms"]
    assert_identical(tmp_path, "Afrikaans-AfriBooms")


def test_git_url_needs_name(tmp_path):
    done = ud_data(tmp_path, "--source", "git", "--git-url", "file:///nowhere", "--treebanks", TREEBANKS[0])
    assert_one_line_error(done, "has no {name}")


def test_default_list_is_the_papers_less_excluded(tmp_path):
    # all 47 already "complete" (empty split files): nothing is fetched
    sys.path.insert(0, str(ROOT / "experiments"))
    from grid import paper_treebanks

    for name in paper_treebanks():
        (tmp_path / f"UD_{name}").mkdir()
        for split in ("train", "dev", "test"):
            (tmp_path / f"UD_{name}" / f"xx-ud-{split}.conllu").touch()
    done = ud_data(tmp_path, "--exclude", "Greek-GDT,UD_French-Spoken")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("already complete, skipped") == 45
    assert "Greek-GDT" not in done.stdout and "[45/45]" in done.stdout
    bad = ud_data(tmp_path, "--exclude", "Klingon-KDT")
    assert_one_line_error(bad, "Klingon-KDT")
