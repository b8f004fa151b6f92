"""The Makefile's grid: which runs `make` would start, and that finished runs are never redone.

Dry runs (`make -n`) with RUNS and VENV in a temporary directory, so nothing here
creates the virtual environment or touches runs/; one real `make` runs a fake
`convatt` (CONVATT=...) that only writes result.json.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETUP_CFG = (ROOT / "setup.cfg").read_text()
SHARED_UD = ROOT.parent / "shared" / "data" / "ud-2.2"
sys.path.insert(0, str(ROOT / "experiments"))
import grid  # noqa: E402  (experiments/grid.py)

from convatt.model.variants import (  # noqa: E402
    ATTENTION_VARIANTS,
    CHARLM_VARIANTS,
    PAPER_VARIANTS,
    POSITION_VARIANTS,
    TOY_VARIANTS,
    UD_VARIANTS,
)

EMBEDDED_UD = ["Afrikaans-AfriBooms", "English-GUM", "English-LinES", "Vietnamese-VTB"]


def make_env() -> dict:
    # an outer `make test` passes its flags and variables down; these runs must not see them
    return {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"}}


@pytest.fixture
def venv(tmp_path) -> Path:
    """A VENV whose install stamp is up to date, so make has nothing to do for it."""
    path = tmp_path / "venv"
    path.mkdir()
    (path / ".convatt-installed").touch()
    return path


def make(
    *args: str, tmp: Path, venv: Path | None = None, dry: bool = True, check: bool = True, env: dict | None = None
):
    cmd = [
        "make",
        "--no-print-directory",
        "-C",
        str(ROOT),
        *(["-n"] if dry else []),
        f"RUNS={tmp / 'runs'}",
        f"VENV={venv or tmp / 'no-venv'}",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=make_env() | (env or {}), timeout=120)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def train_commands(stdout: str) -> list[dict]:
    """The `convatt train` command lines of a dry run, each as {option: value}."""
    found = []
    for line in stdout.splitlines():
        if re.search(r"convatt train ", line):
            words = shlex.split(line.split(" 2>&1")[0])
            args = words[words.index("train") + 1 :]
            opts, i = {}, 0
            while i < len(args):
                if i + 1 < len(args) and not args[i + 1].startswith("--"):
                    opts[args[i]] = args[i + 1]
                    i += 2
                else:
                    opts[args[i]] = True
                    i += 1
            opts["_prefix"] = words[: words.index("train") - 1]
            found.append(opts)
    return found


def test_grid_lists_come_from_convatt_variants_and_the_paper():
    lists = grid.variant_lists()
    assert lists == {
        "paper": PAPER_VARIANTS,
        "ud": UD_VARIANTS,
        "positions": POSITION_VARIANTS,
        "attention": ATTENTION_VARIANTS,
        "toy": TOY_VARIANTS,
        "charlm": CHARLM_VARIANTS,
    }
    treebanks = grid.paper_treebanks()
    assert len(treebanks) == 47 and "Ancient_Greek-PROIEL" in treebanks
    out = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "grid.py")], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "paper:" + ",".join(PAPER_VARIANTS)


def test_ptb_all_is_27_runs(tmp_path):
    proc = make("ptb-all", tmp=tmp_path)
    cmds = train_commands(proc.stdout)
    assert len(cmds) == 27
    expected = {(v, str(s)) for v, s in itertools.product(PAPER_VARIANTS, (1, 2, 3))}
    assert {(c["--variant"], c["--seed"]) for c in cmds} == expected
    for c in cmds:
        assert c["--preset"] == "ptb" and c["--data"] == "convatt/embedded/ptb-sample.tar.gz"
        assert c["--out"] == f"{tmp_path}/runs/ptb/{c['--variant']}/seed{c['--seed']}"
        assert "--embeddings" not in c and "--epochs" not in c and "--limit" not in c
    assert "without pretrained fastText vectors" in proc.stdout


def test_dry_run_does_not_create_the_venv(tmp_path):
    proc = make("ptb-all", tmp=tmp_path)
    assert "-m venv" in proc.stdout  # it would, for real
    assert not (tmp_path / "no-venv").exists() and not (tmp_path / "runs").exists()


@pytest.mark.skipif(not SHARED_UD.is_dir(), reason="needs ../shared/data/ud-2.2 beside the checkout")
def test_ud_all_on_the_shared_treebanks_is_60_runs(tmp_path):
    proc = make("ud-all", f"UD_DIR={SHARED_UD}", tmp=tmp_path)
    cmds = train_commands(proc.stdout)
    assert len(cmds) == 60
    assert {Path(c["--data"]).name for c in cmds} == {f"UD_{t}" for t in EMBEDDED_UD}
    assert {c["--variant"] for c in cmds} == set(UD_VARIANTS)
    assert proc.stdout.count("skipped:") == 1  # the missing 43 are named once
    assert "43 of 47 treebanks" in proc.stdout


def test_ud_all_takes_paper_treebanks_found_and_skips_others(tmp_path):
    ud = tmp_path / "ud"
    for name in ("UD_English-LinES", "UD_Ancient_Greek-PROIEL", "UD_Klingon-Example"):
        (ud / name).mkdir(parents=True)
    proc = make("ud-all", f"UD_DIR={ud}", tmp=tmp_path)
    cmds = train_commands(proc.stdout)
    assert len(cmds) == 2 * 5 * 3
    assert {Path(c["--data"]).name for c in cmds} == {"UD_English-LinES", "UD_Ancient_Greek-PROIEL"}
    c = cmds[0]
    assert c["--preset"] == "ud"
    assert c["--out"] == f"{tmp_path}/runs/ud/{Path(c['--data']).name}/{c['--variant']}/seed{c['--seed']}"
    # a treebank named explicitly need not be the paper's; "UD_" is optional
    proc = make(
        "ud-all", f"UD_DIR={ud}", "TREEBANKS=Klingon-Example UD_English-LinES", "VARIANTS=san", "SEEDS=1", tmp=tmp_path
    )
    assert sorted(Path(c["--data"]).name for c in train_commands(proc.stdout)) == [
        "UD_English-LinES",
        "UD_Klingon-Example",
    ]
    proc = make("ud-all", f"UD_DIR={tmp_path / 'nothing'}", tmp=tmp_path, check=False)
    assert proc.returncode != 0 and "none of the 47 treebanks" in proc.stderr


def test_positions_grids(tmp_path):
    ud = tmp_path / "ud"
    (ud / "UD_English-GUM").mkdir(parents=True)
    ptb = train_commands(make("ptb-positions", tmp=tmp_path).stdout)
    assert {c["--variant"] for c in ptb} == set(POSITION_VARIANTS) and len(ptb) == 15
    udp = train_commands(make("ud-positions", f"UD_DIR={ud}", tmp=tmp_path).stdout)
    assert {c["--variant"] for c in udp} == set(POSITION_VARIANTS) and len(udp) == 15


def test_attention_grids(tmp_path):
    ud = tmp_path / "ud"
    (ud / "UD_English-LinES").mkdir(parents=True)
    n = len(ATTENTION_VARIANTS) * 3
    ptb = train_commands(make("ptb-attention", tmp=tmp_path).stdout)
    assert {c["--variant"] for c in ptb} == set(ATTENTION_VARIANTS) and len(ptb) == n
    uda = train_commands(make("ud-attention", f"UD_DIR={ud}", tmp=tmp_path).stdout)
    assert {c["--variant"] for c in uda} == set(ATTENTION_VARIANTS) and len(uda) == n
    assert {"san-pe-add", "san-pe-add-conv2d"} <= set(ATTENTION_VARIANTS)  # the references beside the new ones


def test_sequence_task_grids(tmp_path):
    toy = train_commands(make("toy-all", tmp=tmp_path).stdout)
    assert {(c["--variant"], c["--seed"]) for c in toy} == set(itertools.product(TOY_VARIANTS, "123"))
    lm = train_commands(make("lm-all", "SEEDS=1", tmp=tmp_path).stdout)
    assert {c["--variant"] for c in lm} == set(CHARLM_VARIANTS) and len(lm) == len(CHARLM_VARIANTS)
    for c, preset, data in [(toy[0], "toy", "find-block/n5-l2.json"), (lm[0], "charlm", "UD_English-GUM")]:
        assert c["--preset"] == preset and c["--data"].endswith(data) and c["--curve-until"] == "-1"
        assert c["--out"] == f"{tmp_path}/runs/{preset}/{c['--variant']}/seed{c['--seed']}"


def test_variables_reach_the_command(tmp_path):
    proc = make(
        "ptb-all",
        "VARIANTS=san-p",
        "SEEDS=7",
        "EPOCHS=5",
        "LIMIT=10",
        "EMBEDDINGS=/v/wiki.vec",
        "MASK_PADDING=1",
        "TRAIN_FLAGS=--jit-compile off",
        "GPUS=0 1",
        "PTB_DIR=/ptb/wsj",
        tmp=tmp_path,
    )
    (c,) = train_commands(proc.stdout)
    assert (c["--variant"], c["--seed"], c["--epochs"], c["--limit"]) == ("san-p", "7", "5", "10")
    assert c["--embeddings"] == "/v/wiki.vec" and c["--data"] == "/ptb/wsj"
    assert c["--mask-padding"] is True and c["--jit-compile"] == "off"
    assert c["_prefix"] == [
        f"JAX_COMPILATION_CACHE_DIR={tmp_path / 'runs' / '.jax-cache'}",
        "GPUS=0 1",
        "experiments/gpu_slot.sh",
    ]
    (c,) = train_commands(make("ptb-all", "VARIANTS=san-p", "SEEDS=7", "JAX_CACHE=", tmp=tmp_path).stdout)
    assert c["_prefix"] == []
    # UD runs never get the PTB vectors
    ud = tmp_path / "ud"
    (ud / "UD_English-GUM").mkdir(parents=True)
    (c,) = train_commands(
        make("ud-all", f"UD_DIR={ud}", "VARIANTS=san", "SEEDS=1", "EMBEDDINGS=/v/wiki.vec", tmp=tmp_path).stdout
    )
    assert "--embeddings" not in c


def test_finished_runs_are_not_redone(tmp_path, venv):
    for v, s in itertools.product(PAPER_VARIANTS, (1, 2, 3)):
        path = tmp_path / "runs" / "ptb" / v / f"seed{s}" / "result.json"
        path.parent.mkdir(parents=True)
        path.write_text("{}")
    proc = make("ptb-all", tmp=tmp_path, venv=venv)
    assert train_commands(proc.stdout) == []
    assert make("-q", "ptb-all", tmp=tmp_path, venv=venv, dry=False, check=False).returncode == 0
    # an interrupted grid: only the missing run
    (tmp_path / "runs" / "ptb" / "san-r" / "seed2" / "result.json").unlink()
    (c,) = train_commands(make("ptb-all", tmp=tmp_path, venv=venv).stdout)
    assert (c["--variant"], c["--seed"]) == ("san-r", "2")
    # a newer setup.cfg reinstalls the venv but does not redo finished runs
    os.utime(venv / ".convatt-installed", (time.time() - 10**6,) * 2)
    proc = make("ptb-all", tmp=tmp_path, venv=venv)
    assert "pip install" in proc.stdout and len(train_commands(proc.stdout)) == 1


FAKE_CONVATT = """#!/usr/bin/env bash
# writes result.json like the real one (last), after logging its arguments
set -euo pipefail
echo "$@" >> "$(dirname "$0")/calls.log"
out=""; prev=""
for a in "$@"; do [ "$prev" = "--out" ] && out=$a; prev=$a; done
if [ -n "${FAIL_ON:-}" ] && [[ "$*" == *"$FAIL_ON"* ]]; then echo "failing on purpose"; exit 3; fi
echo "training into $out"
echo '{"args": "'"$*"'"}' > "$out/result.json"
"""


def test_make_runs_the_grid_in_parallel_and_resumes(tmp_path, venv):
    fake = tmp_path / "bin" / "convatt"
    fake.parent.mkdir()
    fake.write_text(FAKE_CONVATT)
    fake.chmod(0o755)
    args = ("ptb-all", "VARIANTS=san san-p", "SEEDS=1 2", f"CONVATT={fake}")
    proc = make(*args, "-j", "3", tmp=tmp_path, venv=venv, dry=False)
    results = sorted((tmp_path / "runs").rglob("result.json"))
    assert len(results) == 4
    log = (tmp_path / "runs" / "ptb" / "san-p" / "seed2" / "train.log").read_text()
    assert "training into" in log
    assert len((tmp_path / "bin" / "calls.log").read_text().splitlines()) == 4
    # a second make does nothing
    proc = make(*args, tmp=tmp_path, venv=venv, dry=False)
    assert "Nothing to be done" in proc.stdout
    assert len((tmp_path / "bin" / "calls.log").read_text().splitlines()) == 4
    # a failing run fails make (through the `| tee` pipe) and leaves no result.json
    proc = make(
        "ptb-all",
        "VARIANTS=san-r",
        "SEEDS=1",
        f"CONVATT={fake}",
        tmp=tmp_path,
        venv=venv,
        dry=False,
        check=False,
        env={"FAIL_ON": "san-r"},
    )
    assert proc.returncode != 0 and "failing on purpose" in proc.stdout
    assert not (tmp_path / "runs" / "ptb" / "san-r" / "seed1" / "result.json").exists()


def test_status_counts_finished_runs(tmp_path, venv):
    path = tmp_path / "runs" / "ptb" / "san" / "seed1" / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    proc = make("status", tmp=tmp_path, venv=venv, dry=False)
    assert "ptb-all:       1 of 27 runs finished" in proc.stdout
    assert f"ptb-attention: 0 of {3 * len(ATTENTION_VARIANTS)} runs finished" in proc.stdout


def test_gpu_slots_give_concurrent_jobs_different_gpus(tmp_path):
    env = make_env() | {"GPUS": "3 5", "GPU_LOCK_DIR": str(tmp_path / "locks")}
    script = str(ROOT / "experiments" / "gpu_slot.sh")
    first = subprocess.Popen(
        [script, "sh", "-c", "echo $CUDA_VISIBLE_DEVICES; exec sleep 30"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert first.stdout.readline().strip() == "3"  # printed once it holds slot 0
        second = subprocess.run(
            [script, "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], env=env, capture_output=True, text=True, timeout=30
        )
        assert second.stdout.strip() == "5"
    finally:
        first.terminate()  # the slot's holder (sleep, exec'd), so the lock goes with it
        first.wait(timeout=30)
        first.stdout.close()
    # without GPUS the command just runs
    plain = subprocess.run(
        [script, "echo", "plain"], env=make_env() | {"GPUS": ""}, capture_output=True, text=True, check=True
    )
    assert plain.stdout == "plain\n"


def test_ci_runs_make_test_all():
    text = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in text and "make test-all" in text and "make lint" in text


FAKE_PYTHON = """#!/bin/sh
echo "$KERAS_BACKEND $*" >> "$(dirname "$0")/calls"
[ "$KERAS_BACKEND" = "$FAIL_BACKEND" ] && exit 1
exit 0
"""


@pytest.mark.parametrize("target", ["test", "test-all"])
def test_make_test_runs_every_part_and_names_the_failed_ones(venv, tmp_path, target):
    """A part that fails stops none of the others; the target fails at the end, naming it.
    `make test` leaves out the slow tier, `make test-all` runs it, then test-compat's two parts
    (in COMPAT_VENV: a fake one here); each prints its slowest 15."""
    (venv / "bin").mkdir()
    for program in ("python", "pip", "pytest"):
        (venv / "bin" / program).write_text(FAKE_PYTHON)
        (venv / "bin" / program).chmod(0o755)
    args = (target, f"COMPAT_VENV={venv}")
    env = {"KERAS_BACKEND": ""}  # the backend each part sets, not the one of this test's process
    done = make(*args, tmp=tmp_path, venv=venv, dry=False, check=False, env=env | {"FAIL_BACKEND": "tensorflow"})
    failed = "TensorFlow" + (", the floors" if target == "test-all" else "")
    assert done.returncode != 0 and f"make {target}: FAILED: {failed}" in done.stdout, done.stdout
    calls = [c for c in (venv / "bin" / "calls").read_text().splitlines() if "-m pytest" in c]
    floors = ["tensorflow", "jax"] if target == "test-all" else []  # the failed first TF part skips the slow one
    assert [c.split()[0] for c in calls] == ["tensorflow", "jax", "jax", *floors]
    assert all("-m pytest -q --durations=15" in c for c in calls)
    assert all(("not slow" in c) == (target == "test") for c in calls[:3]), calls
    assert "-m not tf_only" in calls[1] and "-m jax_too" in calls[2]
    passed = make(*args, tmp=tmp_path, venv=venv, dry=False, check=False, env=env | {"FAIL_BACKEND": "none"})
    assert passed.returncode == 0 and f"make {target}: every part passed" in passed.stdout


def test_make_test_compat_pins_the_floors_of_setup_cfg(tmp_path):
    """Without KERAS, TF and JAX: setup.cfg's floors, what CI runs; with them: those."""
    floors = make("test-compat", tmp=tmp_path).stdout
    for name, version in re.findall(r"^ *(keras|tensorflow|jax)(?:\[\w+\])?>=([\d.]+)", SETUP_CFG, re.M):
        assert f"{name}{'[cpu]' if name == 'jax' else ''}=={version}" in floors
    chosen = make("test-compat", "KERAS=3.10.0", "TF=2.19.1", "JAX=0.6.2", tmp=tmp_path).stdout
    assert "keras==3.10.0 tensorflow==2.19.1 jax[cpu]==0.6.2" in chosen and "keras3.10.0-tf2.19.1-jax0.6.2" in chosen


def test_make_test_compat_runs_the_compatibility_file_at_the_floor_and_every_layer_file_when_asked(tmp_path):
    """CI's scope (the default): the compatibility and KerasHub files, not the whole layer suite;
    COMPAT_SCOPE=all: every layer test file and docs/layers.md's examples."""
    floor = make("test-compat", tmp=tmp_path).stdout
    everything = make("test-compat", "COMPAT_SCOPE=all", tmp=tmp_path).stdout
    layer_files = sorted(p.name for p in (ROOT / "tests").glob("test_layers_*.py"))
    assert "test_layers_keras_compat.py" in floor and "test_layers_keras_hub.py" in floor
    assert "test_layers_multi_head_attention.py" not in floor and "test_layers_docs.py" not in floor
    assert all(name in everything for name in layer_files), everything


@pytest.mark.skipif(not (ROOT.parent / "shared" / "reference").is_dir(), reason="needs ../shared")
def test_reference_tables_are_the_shared_ones():
    shared = sorted((ROOT.parent / "shared" / "reference").glob("paper_*.csv"))
    assert shared, "no paper_*.csv in ../shared/reference"
    for src in shared:
        assert (ROOT / "convatt" / "embedded" / "paper" / src.name).read_text() == src.read_text()


def test_make_help_lists_every_variable_with_its_default_and_an_example(tmp_path):
    declared = re.findall(r"^([A-Z_]+)[ \t]*\?=[ \t]*(.*)$", (ROOT / "Makefile").read_text(), re.M)
    block = [(name, value) for name, value in declared if name != "DOCS_RESULTS"]  # the grid's variables
    out = make("help", tmp=tmp_path, dry=False).stdout
    listed = dict(re.findall(r"^  ([A-Z_]+) +default: (.*)$", out, re.M))
    assert [name for name, _ in block] == list(listed), "every variable of the block, in its order"
    for name, value in block:
        assert listed[name] == (value.strip() or "(empty)"), name
        note = out.split(f"  {name} ", 1)[1].splitlines()[1]
        assert "e.g. " in note and len(note.strip()) > 20, f"{name}: {note!r}"
