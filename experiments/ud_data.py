#!/usr/bin/env python3
"""Download UD 2.2 (the CoNLL 2018 shared task release) for the paper's treebanks.

    python3 experiments/ud_data.py --out data/ud-2.2                  # the LINDAT tarball
    python3 experiments/ud_data.py --out data/ud-2.2 --source git     # GitHub, tag r2.2
    make ud-data                      # the same, into UD_DATA_DIR; then make ud-all UD_DIR=...

Writes `<out>/UD_<Name>/<code>-ud-{train,dev,test}.conllu` plus the treebank's
LICENSE and README files, for the 47 treebanks of the paper's Table 2d (the rows
of `convatt/embedded/paper/paper_table2d_ud_per_treebank.csv`, read by `grid.py`)
or those named by `--treebanks`, less `--exclude`.

Sources:
- `tarball` (default): `ud-treebanks-v2.2.tgz` of LINDAT handle 11234/1-2837,
  streamed to a temporary file beside the output, and only the wanted treebanks'
  files are extracted. `--tarball PATH` uses a file downloaded before. No SHA-256
  of the tarball is built in (none could be established); `--sha256 HEX` checks
  one you trust.
- `git`: each treebank's repository at tag `r2.2`, cloned with depth 1 from
  `--git-url` (a template with `{name}`, e.g. a local mirror
  `file:///srv/mirror/UD_{name}.git`).

Every file kept, from either source, is checked against the manifest
`experiments/ud22_manifest.csv` (written by `ud_manifest.py` from the treebanks'
repositories at tag r2.2): its git blob SHA-1 must be the manifest's, and the
treebank must have exactly the manifest's files. A treebank that differs is not
kept; each differing file is named with both hashes. Treebanks not in the manifest
are refused before anything is downloaded (`--manifest` names another one).

Each treebank is written into a hidden temporary directory beside its target
(`.UD_<Name>.partial-*`) and renamed into place when complete and verified, so a
`UD_<Name>/` directory is always whole; a complete one is verified again and
skipped on a rerun, and leftovers of an interrupted run are removed. Stdlib only:
the Makefile calls it with the system Python. Errors are one line on stderr, with
exit status 1; treebanks that cannot be had are named, the others are still written.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grid import ROOT, paper_treebanks  # noqa: E402  (experiments/grid.py, stdlib only)

UD22_URL = "https://lindat.mff.cuni.cz/repository/xmlui/bitstream/handle/11234/1-2837/ud-treebanks-v2.2.tgz"
GIT_URL = "https://github.com/UniversalDependencies/UD_{name}.git"
GIT_TAG = "r2.2"
SPLITS = ("train", "dev", "test")
SPLIT_FILE = re.compile(r"[a-z_]+-ud-(train|dev|test)\.conllu")
EXTRA_FILE = re.compile(r"(LICENSE|README)(\.[A-Za-z]+)?")
NETWORK_ERRORS = (
    "could not resolve host",
    "failed to connect",
    "connection refused",
    "connection timed out",
    "network is unreachable",
    "unable to access",
)
CHUNK = 1 << 20
# treebank, path, git blob SHA-1 and tag commit of every kept file at r2.2 (ud_manifest.py)
MANIFEST = ROOT / "experiments" / "ud22_manifest.csv"
MANIFEST_FIELDS = ("treebank", "path", "blob_sha1", "commit")


class DataError(Exception):
    """An error reported as one line, ending the run with exit status 1."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="data/ud-2.2", help="output directory (default: %(default)s)")
    p.add_argument("--source", choices=("tarball", "git"), default="tarball")
    p.add_argument("--treebanks", default="", help="comma-separated names (default: the paper's 47)")
    p.add_argument("--exclude", default="", help="comma-separated names to leave out")
    p.add_argument("--url", default=UD22_URL, help="tarball URL (default: LINDAT's)")
    p.add_argument("--sha256", default="", help="a SHA-256 you trust for the tarball (default: none)")
    p.add_argument("--tarball", default="", help="use this downloaded tarball instead of --url")
    p.add_argument("--git-url", default=GIT_URL, help="repository URL template with {name} (default: %(default)s)")
    p.add_argument("--tag", default=GIT_TAG, help="git tag (default: %(default)s)")
    p.add_argument("--manifest", default=str(MANIFEST), help="the files' git blob SHA-1s (default: %(default)s)")
    return p.parse_args(argv)


def names(text: str) -> list[str]:
    """Treebank names from a comma- or space-separated list, without a "UD_" prefix."""
    parts = [t.strip() for t in re.split(r"[,\s]+", text) if t.strip()]
    return [t[3:] if t.startswith("UD_") else t for t in parts]


def wanted_treebanks(treebanks: str, exclude: str) -> list[str]:
    """The treebanks to obtain: --treebanks (default: the paper's) less --exclude."""
    chosen = names(treebanks) or paper_treebanks()
    unknown = [t for t in names(exclude) if t not in chosen]
    if unknown:
        raise DataError(f"--exclude names treebanks that are not selected: {', '.join(unknown)}")
    left = [t for t in dict.fromkeys(chosen) if t not in names(exclude)]
    if not left:
        raise DataError("no treebank left to obtain (--treebanks/--exclude)")
    return left


def read_manifest(path: Path) -> dict[str, dict[str, str]]:
    """{treebank: {file name: git blob SHA-1}} of a manifest written by ud_manifest.py."""
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != MANIFEST_FIELDS:
                raise DataError(f"{path}: not a manifest (columns {', '.join(MANIFEST_FIELDS)} expected)")
            manifest: dict[str, dict[str, str]] = {}
            for row in reader:
                manifest.setdefault(row["treebank"], {})[row["path"]] = row["blob_sha1"]
    except OSError as e:
        raise DataError(f"cannot read the manifest {path}: {e.strerror}") from None
    return manifest


def check_listed(wanted: list[str], manifest: dict[str, dict[str, str]], path: str) -> None:
    """An error, before anything is fetched, for treebanks that nothing could verify."""
    unlisted = [t for t in wanted if t not in manifest]
    if unlisted:
        raise DataError(f"not in the manifest {path}, so they could not be verified: {', '.join(unlisted)}")


def blob_sha1(path: Path) -> str:
    """A file's git blob SHA-1, `sha1(b"blob <size>\\0" + content)` as `git hash-object` computes it;
    a `.gz` file's content is the decompressed one."""
    if path.suffix == ".gz":
        data = gzip.decompress(path.read_bytes())
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    digest = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def mismatches(directory: Path, expected: dict[str, str]) -> list[str]:
    """How a treebank directory differs from its manifest entries: one item per file."""
    present = {p.name[:-3] if p.suffix == ".gz" else p.name: p for p in directory.iterdir() if p.is_file()}
    found = []
    for name, blob in sorted(expected.items()):
        if name not in present:
            found.append(f"{name} missing")
        elif (got := blob_sha1(present[name])) != blob:
            found.append(f"{name} has blob SHA-1 {got}, the manifest {blob}")
    found += [f"{name} not in the manifest" for name in sorted(set(present) - set(expected))]
    return found


def split_files(directory: Path) -> dict[str, Path]:
    """{split: file} of a treebank directory's `*-ud-{split}.conllu[.gz]` files."""
    found = {}
    for split in SPLITS:
        matches = sorted(directory.glob(f"*-ud-{split}.conllu")) + sorted(directory.glob(f"*-ud-{split}.conllu.gz"))
        if len(matches) == 1:
            found[split] = matches[0]
    return found


def is_complete(directory: Path) -> bool:
    """Whether a treebank directory holds one train, dev and test file."""
    return directory.is_dir() and len(split_files(directory)) == len(SPLITS)


def clean_leftovers(out: Path, name: str) -> None:
    """Remove temporary directories of an interrupted run for one treebank."""
    for stale in out.glob(f".UD_{name}.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)


def new_partial(out: Path, name: str) -> Path:
    """A fresh hidden temporary directory beside `out/UD_<name>`."""
    return Path(tempfile.mkdtemp(prefix=f".UD_{name}.partial-", dir=out))


def finish(partial: Path, out: Path, name: str, expected: dict[str, str]) -> str | None:
    """Rename a filled temporary directory to `out/UD_<name>` if it is the manifest's; else why
    not (and remove it)."""
    differences = mismatches(partial, expected)
    if differences:
        shutil.rmtree(partial, ignore_errors=True)
        return "differs from the manifest: " + "; ".join(differences)
    target = out / f"UD_{name}"
    if target.exists():
        shutil.rmtree(partial, ignore_errors=True)
        return f"{target} exists but is incomplete: remove it and rerun"
    os.rename(partial, target)
    return None


def wanted_file(filename: str) -> bool:
    """Whether a file of a treebank is copied: a split's CoNLL-U, LICENSE or README."""
    return bool(SPLIT_FILE.fullmatch(filename) or EXTRA_FILE.fullmatch(filename))


def report(index: int, total: int, name: str, message: str) -> None:
    """One progress line per treebank."""
    print(f"[{index}/{total}] {name}: {message}", flush=True)


# ---- the tarball ----


def download(url: str, directory: Path) -> tuple[Path, str]:
    """Stream `url` to a temporary file in `directory`; (its path, its SHA-256)."""
    fd, name = tempfile.mkstemp(prefix=".ud-treebanks.download-", suffix=".tgz", dir=directory)
    path, digest, size = Path(name), hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as f, urllib.request.urlopen(url, timeout=60) as response:
            total = int(response.headers.get("Content-Length") or 0)
            print(f"downloading {url} ({total / 1e6:.0f} MB)" if total else f"downloading {url}", flush=True)
            while chunk := response.read(CHUNK):
                f.write(chunk)
                digest.update(chunk)
                size += len(chunk)
                if size % (50 * CHUNK) < len(chunk):
                    print(f"  {size / 1e6:.0f} MB", flush=True)
    except urllib.error.HTTPError as e:
        path.unlink(missing_ok=True)
        raise DataError(f"cannot download {url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        path.unlink(missing_ok=True)
        reason = getattr(e, "reason", e)
        raise DataError(f"cannot download {url} (no network?): {reason}") from None
    except BaseException:  # Ctrl-C: no partial download left behind
        path.unlink(missing_ok=True)
        raise
    return path, digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_sha256(got: str, expected: str, what: str) -> None:
    """An error unless the SHA-256 is the expected one (given with --sha256); none expected: a note."""
    if not expected:
        print(f"SHA-256 of {what}: {got} (not checked: no --sha256; every file is checked against the manifest)")
    elif got.lower() != expected.strip().lower():
        raise DataError(f"wrong SHA-256 for {what}: expected {expected.strip()}, got {got} (a corrupt or other file)")
    else:
        print(f"SHA-256 checked: {got}", flush=True)


def tarball_treebank(member: tarfile.TarInfo, wanted: set[str]) -> tuple[str, str] | None:
    """(treebank, file name) of a tarball member `.../UD_<Name>/<file>` that is wanted."""
    parts = member.name.split("/")
    if not member.isfile() or len(parts) < 2 or not parts[-2].startswith("UD_"):
        return None
    name, filename = parts[-2][3:], parts[-1]
    return (name, filename) if name in wanted and wanted_file(filename) else None


def extract(archive: Path, out: Path, todo: list[str]) -> dict[str, Path]:
    """One pass over the tarball: each wanted treebank's files into its temporary directory."""
    partials: dict[str, Path] = {}
    try:
        with tarfile.open(archive, "r:*") as tf:
            for member in tf:
                hit = tarball_treebank(member, set(todo))
                if hit is None:
                    continue
                name, filename = hit
                if name not in partials:
                    partials[name] = new_partial(out, name)
                source = tf.extractfile(member)
                with source, (partials[name] / filename).open("wb") as target:
                    shutil.copyfileobj(source, target, CHUNK)
    except (tarfile.TarError, EOFError, OSError) as e:
        for partial in partials.values():
            shutil.rmtree(partial, ignore_errors=True)
        raise DataError(f"cannot read the tarball {archive}: {e}") from None
    return partials


def from_tarball(args: argparse.Namespace, out: Path, todo: list[str]) -> dict[str, Path]:
    """Download (or take --tarball), verify, extract: {treebank: temporary directory}."""
    if args.tarball:
        archive = Path(args.tarball)
        if not archive.is_file():
            raise DataError(f"--tarball {archive}: no such file")
        check_sha256(file_sha256(archive), args.sha256, str(archive))
        return extract(archive, out, todo)
    archive, got = download(args.url, out)
    try:
        check_sha256(got, args.sha256, args.url)
        return extract(archive, out, todo)
    finally:
        archive.unlink(missing_ok=True)


# ---- git ----


def git(*command: str) -> subprocess.CompletedProcess:
    """Run git without prompts; the completed process (output captured)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        return subprocess.run(["git", *command], capture_output=True, text=True, env=env)
    except FileNotFoundError:
        raise DataError("git is not installed (needed by --source git)") from None


def git_message(text: str) -> str:
    """The telling line of git's messages: the first "fatal:" one, else the last."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    fatal = [line for line in lines if line.startswith("fatal:")]
    return (fatal or lines or ["no message"])[0 if fatal else -1]


def check_tag(url: str, tag: str) -> str | None:
    """None if the repository at `url` has `tag`; else why not (an error if unreachable)."""
    done = git("ls-remote", "--tags", url, f"refs/tags/{tag}")
    if done.returncode != 0:
        if any(s in done.stderr.lower() for s in NETWORK_ERRORS):
            raise DataError(f"cannot reach {url} (no network?): {git_message(done.stderr)}")
        return f"no repository at {url} ({git_message(done.stderr)})"
    if not done.stdout.strip():
        return f"{url} has no tag {tag}"
    return None


def from_git(url: str, tag: str, out: Path, name: str) -> tuple[Path | None, str | None]:
    """Clone one treebank at `tag` into a temporary directory: (it, None) or (None, why not)."""
    problem = check_tag(url, tag)
    if problem:
        return None, problem
    partial = new_partial(out, name)
    clone = partial / ".clone"
    done = git("-c", "advice.detachedHead=false", "clone", "--quiet", "--depth", "1", "--branch", tag, url, str(clone))
    if done.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        return None, f"git clone {url} failed: {git_message(done.stderr)}"
    for path in clone.iterdir():
        if path.is_file() and wanted_file(path.name):
            os.replace(path, partial / path.name)
    shutil.rmtree(clone)
    return partial, None


# ---- the run ----


def prepare(out: Path, wanted: list[str], manifest: dict[str, dict[str, str]]) -> tuple[list[str], list[str]]:
    """Create `out`, remove leftovers, verify complete treebanks: (those still to do, those
    already there that differ from the manifest, each with its reason)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DataError(f"cannot create {out}: {e.strerror}") from None
    for stale in out.glob(".ud-treebanks.download-*"):
        stale.unlink(missing_ok=True)
    todo, refused = [], []
    for i, name in enumerate(wanted, 1):
        clean_leftovers(out, name)
        target = out / f"UD_{name}"
        if not is_complete(target):
            todo.append(name)
        elif differences := mismatches(target, manifest[name]):
            why = f"{target} differs from the manifest: {'; '.join(differences)}; remove it and rerun"
            report(i, len(wanted), name, f"NOT KEPT: {why}")
            refused.append(f"{name} ({why})")
        else:
            report(i, len(wanted), name, "already complete and verified, skipped")
    return todo, refused


def conclude(wanted: list[str], name: str, why: str | None, written: str, missing: list[str]) -> None:
    """Report one treebank's outcome; add it to `missing` with its reason if it was not written."""
    report(wanted.index(name) + 1, len(wanted), name, f"NOT WRITTEN: {why}" if why else written)
    if why:
        missing.append(f"{name} ({why})")


def run_tarball(args: argparse.Namespace, out: Path, wanted: list[str], todo: list[str], manifest) -> list[str]:
    """Obtain `todo` from the tarball; the missing treebanks, each with its reason."""
    partials = from_tarball(args, out, todo)
    missing: list[str] = []
    for name in todo:
        why = finish(partials[name], out, name, manifest[name]) if name in partials else "not in the tarball"
        conclude(wanted, name, why, "written and verified", missing)
    return missing


def run_git(args: argparse.Namespace, out: Path, wanted: list[str], todo: list[str], manifest) -> list[str]:
    """Obtain `todo` from their repositories; the missing treebanks, each with its reason."""
    if "{name}" not in args.git_url:
        raise DataError(f"--git-url {args.git_url!r} has no {{name}}")
    missing: list[str] = []
    for name in todo:
        partial, why = from_git(args.git_url.format(name=name), args.tag, out, name)
        if partial is not None:
            why = finish(partial, out, name, manifest[name])
        conclude(wanted, name, why, f"written and verified (tag {args.tag})", missing)
    return missing


def load_manifest(args: argparse.Namespace, wanted: list[str]) -> dict[str, dict[str, str]]:
    """The manifest, checked to be of `--tag` and to list every wanted treebank."""
    if args.tag != GIT_TAG and Path(args.manifest) == MANIFEST:
        raise DataError(
            f"--tag {args.tag}: the built-in manifest is of {GIT_TAG}; "
            f"pass --manifest written by ud_manifest.py --tag {args.tag}"
        )
    manifest = read_manifest(Path(args.manifest))
    check_listed(wanted, manifest, args.manifest)
    return manifest


def main(argv: list[str] | None = None) -> int:
    """Obtain the treebanks; 0 if all are there in the end, else 1 (one line on stderr)."""
    args = parse_args(argv)
    try:
        out = Path(args.out)
        wanted = wanted_treebanks(args.treebanks, args.exclude)
        manifest = load_manifest(args, wanted)
        todo, missing = prepare(out, wanted, manifest)
        run = run_git if args.source == "git" else run_tarball
        missing += run(args, out, wanted, todo, manifest) if todo else []
    except DataError as e:
        print(f"ud_data: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ud_data: interrupted (rerun to resume)", file=sys.stderr)
        return 130
    if missing:
        print(
            f"ud_data: error: {len(missing)} of {len(wanted)} treebanks not obtained: " + "; ".join(missing),
            file=sys.stderr,
        )
        return 1
    print(f"{len(wanted)} treebanks under {out}, every file verified: make ud-all UD_DIR={out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
