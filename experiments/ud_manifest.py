#!/usr/bin/env python3
"""Write the manifest of UD 2.2 that `ud_data.py` checks every file against.

    python3 experiments/ud_manifest.py --repos '/srv/mirror/UD_{name}.git'
    python3 experiments/ud_manifest.py --repos '/work/.mirror/UniversalDependencies+UD_{name}/repo' \\
        --out experiments/ud22_manifest.csv

For each of the paper's 47 treebanks (or `--treebanks`), reads the tree of the
repository `UniversalDependencies/UD_<Name>` at tag `r2.2` (`git ls-tree`, so
only the tree objects are needed, not the files' contents) and writes one row per
file that `ud_data.py` keeps: the treebank, the file's path, its git blob SHA-1
(`sha1(b"blob <size>\\0" + content)`, what `git hash-object` prints) and the
commit the tag names. `--repos` is a template with `{name}` of local clones,
bare or not (e.g. `git clone --bare https://github.com/UniversalDependencies/UD_{name}.git`).

A treebank whose repository is missing, has no such tag, or lacks a train, dev or
test file at it is named on stderr and left out of the manifest (exit status 1);
no hash is ever written that was not read from the tag's tree.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grid import paper_treebanks  # noqa: E402  (experiments/grid.py, stdlib only)
from ud_data import GIT_TAG, MANIFEST, MANIFEST_FIELDS, SPLIT_FILE, names, wanted_file  # noqa: E402


@dataclass(frozen=True)
class ManifestRow:
    """One file of one treebank at the tag."""

    treebank: str
    path: str
    blob_sha1: str
    commit: str


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repos", required=True, help="local repository template with {name}, e.g. 'mirror/UD_{name}.git'")
    p.add_argument("--out", default=str(MANIFEST), help="manifest to write (default: %(default)s)")
    p.add_argument("--treebanks", default="", help="comma-separated names (default: the paper's 47)")
    p.add_argument("--tag", default=GIT_TAG, help="git tag (default: %(default)s)")
    return p.parse_args(argv)


def git(repo: str, *command: str) -> subprocess.CompletedProcess:
    """`git -C repo ...`, output captured."""
    return subprocess.run(["git", "-C", repo, *command], capture_output=True, text=True)


def tree_rows(name: str, repo: str, tag: str) -> tuple[list[ManifestRow], str | None]:
    """The wanted top-level files of `repo` at `tag`: (rows, None), or ([], why not)."""
    if not Path(repo).exists():
        return [], f"no repository at {repo}"
    commit = git(repo, "rev-parse", "--verify", "--quiet", f"refs/tags/{tag}^{{commit}}")
    if commit.returncode != 0:
        return [], f"{repo} has no tag {tag}"
    listing = git(repo, "ls-tree", "-z", f"refs/tags/{tag}")
    if listing.returncode != 0:
        return [], f"cannot read the tree of {tag} in {repo}: {listing.stderr.strip()}"
    rows = []
    for entry in filter(None, listing.stdout.split("\0")):
        meta, path = entry.split("\t", 1)
        _mode, kind, blob = meta.split()
        if kind == "blob" and wanted_file(path):
            rows.append(ManifestRow(name, path, blob, commit.stdout.strip()))
    splits = [row.path for row in rows if SPLIT_FILE.fullmatch(row.path)]
    if len(splits) != 3 or len({SPLIT_FILE.fullmatch(p).group(1) for p in splits}) != 3:
        return [], f"{tag} of {repo} has not one train, dev and test file each: {', '.join(splits) or 'none'}"
    return sorted(rows, key=lambda row: row.path), None


def write_manifest(rows: list[ManifestRow], out: Path) -> None:
    """The manifest as CSV, one row per file, sorted by treebank and path."""
    with out.open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(MANIFEST_FIELDS)
        for row in sorted(rows, key=lambda r: (r.treebank, r.path)):
            writer.writerow([row.treebank, row.path, row.blob_sha1, row.commit])


def main(argv: list[str] | None = None) -> int:
    """Read each treebank's tree; write the manifest; 1 if some treebank is missing from it."""
    args = parse_args(argv)
    if "{name}" not in args.repos:
        print(f"ud_manifest: error: --repos {args.repos!r} has no {{name}}", file=sys.stderr)
        return 1
    wanted = names(args.treebanks) or paper_treebanks()
    rows, missing = [], []
    for i, name in enumerate(wanted, 1):
        found, why = tree_rows(name, args.repos.format(name=name), args.tag)
        rows += found
        print(f"[{i}/{len(wanted)}] {name}: " + (f"MISSING: {why}" if why else f"{len(found)} files"), flush=True)
        if why:
            missing.append(f"{name} ({why})")
    write_manifest(rows, Path(args.out))
    print(f"{len(rows)} files of {len(wanted) - len(missing)} treebanks at {args.tag} written to {args.out}")
    if missing:
        print(f"ud_manifest: error: {len(missing)} treebanks left out: " + "; ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
