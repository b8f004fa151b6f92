"""experiments/ud_data.py (`make ud-data`) against real services on loopback.

The tarball source downloads from an `http.server` on 127.0.0.1 serving a small
`ud-treebanks-v2.2.tgz` built here from two embedded treebanks; the git source
clones local bare repositories (tag r2.2) through `file://` URLs. The script runs
as a subprocess, as `make ud-data` runs it, so exit codes and messages are its own.
Every file kept is checked against the committed manifest of UD 2.2 (git blob SHA-1s
read from the treebanks' repositories at r2.2 by experiments/ud_manifest.py); the
embedded treebanks are copies of the release, so they pass it unchanged.
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import http.server
import io
import re
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "experiments" / "ud_data.py"
MANIFEST_SCRIPT = ROOT / "experiments" / "ud_manifest.py"
MANIFEST = ROOT / "experiments" / "ud22_manifest.csv"
EMBEDDED = ROOT / "convatt" / "embedded" / "ud-2.2"
TREEBANKS = ("Afrikaans-AfriBooms", "Vietnamese-VTB")
ALTERED = ("English-LinES", "en_lines-ud-dev.conllu")  # one byte changed in the altered sources
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


def git_blob_sha1(data: bytes) -> str:
    """What `git hash-object` prints for a file holding `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def altered_files() -> dict[str, bytes]:
    """English-LinES with one byte of its dev file changed (the first token's form)."""
    files = plain_files(ALTERED[0])
    data = files[ALTERED[1]]
    first_form = data.index(b"\n1\t") + 3
    files[ALTERED[1]] = data[:first_form] + b"X" + data[first_form + 1 :]
    return files


def write_tarball(path: Path, treebanks: dict[str, dict[str, bytes]]) -> None:
    """A UD-release-like tarball of {treebank: {file name: content}}."""
    with tarfile.open(path, "w:gz") as tar:
        for name, files in treebanks.items():
            for filename, data in sorted(files.items()):
                info = tarfile.TarInfo(f"ud-treebanks-v2.2/UD_{name}/{filename}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A directory with ud-treebanks-v2.2.tgz of the two treebanks, and altered.tgz: the two
    treebanks and English-LinES with one changed byte."""
    root = tmp_path_factory.mktemp("source")
    treebanks = {name: plain_files(name) for name in TREEBANKS}
    write_tarball(root / "ud-treebanks-v2.2.tgz", treebanks)
    write_tarball(root / "altered.tgz", {**treebanks, ALTERED[0]: altered_files()})
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
    """A `--git-url` template of bare repositories: the two treebanks tagged r2.2,
    English-GUM without the tag, and English-LinES tagged r2.2 with one changed byte."""
    root = tmp_path_factory.mktemp("repos")
    for name in (*TREEBANKS, "English-GUM", ALTERED[0]):
        work = root / "work" / name
        work.mkdir(parents=True)
        for filename, data in (altered_files() if name == ALTERED[0] else plain_files(name)).items():
            (work / filename).write_bytes(data)
        subprocess.run([*GIT, "init", "-q", str(work)], check=True)
        subprocess.run([*GIT, "-C", str(work), "add", "."], check=True)
        subprocess.run([*GIT, "-C", str(work), "commit", "-q", "-m", "data"], check=True)
        if name != "English-GUM":
            subprocess.run([*GIT, "-C", str(work), "tag", "r2.2"], check=True)
        subprocess.run([*GIT, "clone", "-q", "--bare", str(work), str(root / f"UD_{name}.git")], check=True)
    return (root / "UD_{name}.git").as_uri().replace("%7B", "{").replace("%7D", "}")


def manifest_rows(path: Path = MANIFEST) -> list[dict[str, str]]:
    """The manifest's rows."""
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


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
        assert f"{name}: written and verified" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"UD_{t}" for t in TREEBANKS]


def test_tarball_without_sha256_is_verified_file_by_file(tmp_path, tarball):
    done = ud_data(tmp_path, "--url", tarball[0], "--treebanks", TREEBANKS[0])
    assert done.returncode == 0, done.stderr
    assert f"{tarball[1]} (not checked: no --sha256" in done.stdout
    assert_identical(tmp_path, TREEBANKS[0])


def test_wrong_checksum_leaves_nothing(tmp_path, tarball):
    done = from_tarball(tmp_path, tarball, sha="0" * 64)
    assert_one_line_error(done, "wrong SHA-256", tarball[1])
    assert "--sha256" not in done.stderr  # no advice to trust what was downloaded
    assert list(tmp_path.iterdir()) == []


def test_tarball_with_one_file_altered_is_refused_naming_file_and_hashes(tmp_path, tarball):
    url = tarball[0].replace("ud-treebanks-v2.2.tgz", "altered.tgz")
    done = ud_data(tmp_path, "--url", url, "--treebanks", ",".join((*TREEBANKS, ALTERED[0])))
    good = plain_files(ALTERED[0])[ALTERED[1]]
    bad = altered_files()[ALTERED[1]]
    assert git_blob_sha1(good) != git_blob_sha1(bad)
    assert_one_line_error(done, "1 of 3", ALTERED[0], ALTERED[1], git_blob_sha1(bad), git_blob_sha1(good))
    assert f"{ALTERED[0]}: NOT WRITTEN: differs from the manifest" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"UD_{t}" for t in TREEBANKS]
    for name in TREEBANKS:
        assert_identical(tmp_path, name)


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
    assert done.stdout.count("already complete and verified, skipped") == 2
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before


def test_rerun_refuses_a_complete_treebank_changed_since(tmp_path, tarball):
    assert from_tarball(tmp_path, tarball).returncode == 0
    changed = next((tmp_path / f"UD_{TREEBANKS[1]}").glob("*-ud-test.conllu"))
    changed.write_bytes(changed.read_bytes() + b"\n")
    done = from_tarball(tmp_path, tarball)
    assert_one_line_error(done, "1 of 2", TREEBANKS[1], changed.name, "remove it and rerun")
    assert git_blob_sha1(changed.read_bytes()) in done.stderr  # left as it was, named


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
    assert f"{name}: written and verified" in done.stdout
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
        tmp_path, "--source", "git", "--git-url", repos, "--treebanks", "English-GUM,Afrikaans-AfriBooms,Serbian-SET"
    )
    assert_one_line_error(done, "English-GUM", "has no tag r2.2", "Serbian-SET", "no repository at", "2 of 3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["UD_Afrikaans-AfriBooms"]
    assert_identical(tmp_path, "Afrikaans-AfriBooms")


def test_git_with_one_file_altered_is_refused_naming_file_and_hashes(tmp_path, repos):
    done = ud_data(tmp_path, "--source", "git", "--git-url", repos, "--treebanks", f"{ALTERED[0]},{TREEBANKS[0]}")
    good, bad = plain_files(ALTERED[0])[ALTERED[1]], altered_files()[ALTERED[1]]
    assert_one_line_error(done, "1 of 2", ALTERED[0], ALTERED[1], git_blob_sha1(bad), git_blob_sha1(good))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"UD_{TREEBANKS[0]}"]


def test_treebank_not_in_manifest_is_refused_before_fetching(tmp_path, repos):
    done = ud_data(tmp_path, "--source", "git", "--git-url", repos, "--treebanks", "Klingon-KDT,Afrikaans-AfriBooms")
    assert_one_line_error(done, "Klingon-KDT", "not in the manifest", "could not be verified")
    assert list(tmp_path.iterdir()) == []


def test_git_url_needs_name(tmp_path):
    done = ud_data(tmp_path, "--source", "git", "--git-url", "file:///nowhere", "--treebanks", TREEBANKS[0])
    assert_one_line_error(done, "has no {name}")


def test_default_list_is_the_papers_less_excluded(tmp_path):
    # all 47 already complete (empty split files, and a manifest that says so): nothing is fetched
    sys.path.insert(0, str(ROOT / "experiments"))
    from grid import paper_treebanks

    manifest = tmp_path / "manifest.csv"
    out = tmp_path / "out"
    rows = ["treebank,path,blob_sha1,commit"]
    for name in paper_treebanks():
        (out / f"UD_{name}").mkdir(parents=True)
        for split in ("train", "dev", "test"):
            (out / f"UD_{name}" / f"xx-ud-{split}.conllu").touch()
            rows.append(f"{name},xx-ud-{split}.conllu,{git_blob_sha1(b'')},{'0' * 40}")
    manifest.write_text("\n".join(rows) + "\n")
    done = ud_data(out, "--manifest", str(manifest), "--exclude", "Greek-GDT,UD_French-Spoken")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("already complete and verified, skipped") == 45
    assert "Greek-GDT" not in done.stdout and "[45/45]" in done.stdout
    bad = ud_data(out, "--manifest", str(manifest), "--exclude", "Klingon-KDT")
    assert_one_line_error(bad, "Klingon-KDT")


# ---- the manifest ----


def test_manifest_lists_the_papers_treebanks_at_r22():
    sys.path.insert(0, str(ROOT / "experiments"))
    from grid import paper_treebanks

    rows = manifest_rows()
    by_treebank: dict[str, list[str]] = {}
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{40}", row["blob_sha1"]), row
        by_treebank.setdefault(row["treebank"], []).append(row["path"])
    assert sorted(by_treebank) == sorted(paper_treebanks())
    for paths in by_treebank.values():
        assert sorted(p.split("-ud-")[-1] for p in paths if p.endswith(".conllu")) == [
            "dev.conllu",
            "test.conllu",
            "train.conllu",
        ]
    serbian = {r["path"]: r["blob_sha1"] for r in rows if r["treebank"] == "Serbian-SET"}
    assert serbian["sr_set-ud-train.conllu"] == "bd6b82a3afc4f704c5eef62003c5306ba886732e"  # GitHub, tag r2.2


def test_embedded_treebanks_are_the_manifests_files():
    rows = manifest_rows()
    for directory in EMBEDDED.iterdir():
        name = directory.name[3:]
        expected = {r["path"]: r["blob_sha1"] for r in rows if r["treebank"] == name}
        assert {
            path: git_blob_sha1(data) for path, data in plain_files(name).items() if path != "stats.xml"
        } == expected


def test_manifest_script_reads_tags_trees(tmp_path, repos):
    bare = repos.removeprefix("file://")
    out = tmp_path / "manifest.csv"
    done = subprocess.run(
        [sys.executable, str(MANIFEST_SCRIPT), "--repos", bare, "--out", str(out), "--treebanks",
         f"{TREEBANKS[0]},English-GUM,Serbian-SET"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "English-GUM" in done.stderr and "has no tag r2.2" in done.stderr and "no repository at" in done.stderr
    rows = manifest_rows(out)
    files = {k: v for k, v in plain_files(TREEBANKS[0]).items() if k != "stats.xml"}
    assert {r["path"]: r["blob_sha1"] for r in rows} == {k: git_blob_sha1(v) for k, v in files.items()}
    assert {r["treebank"] for r in rows} == {TREEBANKS[0]}
