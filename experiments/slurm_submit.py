#!/usr/bin/env python3
"""The experiment grid on Slurm: one job array per submission, one array task per run.

The Makefile calls this with `SUBMIT=slurm` (`make ptb-all SUBMIT=slurm`); it is not
meant to be typed by hand, but every file it writes is meant to be read.

    slurm_submit.py submit --grid ptb-all --runs RUNS --runs-file RUNS/slurm/ptb-all.runs \
                           --python .venv/bin/python [--sbatch-flags "..."] [--max-parallel N]
    slurm_submit.py task TASKS_FILE INDEX      (what each array task runs; see job.sbatch)
    slurm_submit.py counts RUN_DIR...          ("2 queued, 1 running", for `make status`)

`RUNS_FILE` (written by make) has one line per run of the grid: the run directory, a
space, and the exact command that plain `make` runs for it (`convatt train ... --out
RUN_DIR`, with the same variables). `submit` sorts the runs into finished (result.json
exists), queued or running on Slurm (an array task of an earlier submission under
`RUNS/slurm/` that `squeue` still lists), and the rest, which it submits as ONE array:

    RUNS/slurm/<grid>-<YYYYmmdd-HHMMSS>/tasks.txt    line i: the run of array task i
    RUNS/slurm/<grid>-<YYYYmmdd-HHMMSS>/job.sbatch   the batch script given to sbatch
    RUNS/slurm/<grid>-<YYYYmmdd-HHMMSS>/job_id       the array's job id (for the user; runs are
                                                     matched to squeue by the batch script's path)
    RUNS/slurm/<grid>-<YYYYmmdd-HHMMSS>/logs/<task>.out   Slurm's output of each task

Each array task (`task`) appends the command's output to its run's `train.log` and
replaces itself with the command (exec), so signals from Slurm (`--signal`, `scancel`,
preemption, the time limit) reach `convatt train` directly, which stops cleanly at the
next batch boundary; a rerun resumes from the last finished epoch. Before that it
removes a run lock left by a Slurm task that is gone (see `clear_stale_lock`): on
NFS/Lustre an flock held by a dead node can outlive it.

Standard library only: this runs before anything is installed on the submitting side.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# squeue states of a job that is not over yet (everything else is final)
ACTIVE_STATES = {
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "RESV_DEL_HOLD",
    "POWER_UP_NODE",
}
# default sbatch options (SBATCH_FLAGS on the command line override them)
DEFAULT_SIGNAL = "B:TERM@120"  # 2 minutes before the time limit: stop at a batch boundary
SLURM_DIR = "slurm"
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class SubmitError(Exception):
    """A problem the user can fix; printed as one line, without a traceback."""


@dataclass(frozen=True)
class Run:
    run_dir: str
    command: str


def read_runs(path: Path) -> list[Run]:
    """The runs of a runs or tasks file; a missing or unreadable one is a SubmitError naming it."""
    if not path.is_file():
        raise SubmitError(f"{path}: {'expected a file, found a directory' if path.is_dir() else 'file not found'}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SubmitError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from e
    runs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        run_dir, _, command = line.strip().partition(" ")
        if not command:
            raise SubmitError(f"{path}:{number}: expected 'RUN_DIR COMMAND', got {line!r}")
        runs.append(Run(run_dir, command))
    return runs


@dataclass(frozen=True)
class QueuedTask:
    """One array task that squeue lists, not yet over."""

    job_id: str
    task_id: str
    state: str
    script: str  # the batch script sbatch was given: RUNS/slurm/<submission>/job.sbatch for ours


def squeue_tasks() -> list[QueuedTask] | None:
    """This user's array tasks that are not over (one line each: squeue -r); None if squeue fails."""
    try:
        proc = subprocess.run(
            ["squeue", "-h", "-r", "-u", getpass.getuser(), "-o", "%F|%K|%T|%o"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    tasks = []
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[2] in ACTIVE_STATES:
            tasks.append(QueuedTask(*parts))
    return tasks


def active_runs(runs_root: Path, tasks: list[QueuedTask]) -> dict[str, str]:
    """{absolute run dir: squeue state} of the runs that earlier submissions into RUNS have queued
    or running. A task is ours when its batch script is RUNS/slurm/*/job.sbatch, and it trains
    the run on its line of the tasks.txt beside it; job ids alone would not do, as a
    reinstalled Slurm counts them from 1 again."""
    slurm_dir = (runs_root / SLURM_DIR).resolve()
    task_lists: dict[Path, list[Run]] = {}
    found = {}
    for task in tasks:
        script = Path(task.script)
        if script.name != "job.sbatch" or script.parent.parent != slurm_dir or not task.task_id.isdigit():
            continue
        if script not in task_lists:
            tasks_file = script.parent / "tasks.txt"
            task_lists[script] = read_runs(tasks_file) if tasks_file.exists() else []
        runs = task_lists[script]
        if int(task.task_id) < len(runs):
            found[os.path.abspath(runs[int(task.task_id)].run_dir)] = task.state
    return found


def batch_script(sub: Path, python: str, chdir: str, grid: str) -> str:
    """The sbatch script: its #SBATCH lines are defaults that SBATCH_FLAGS override."""
    here = Path(__file__).resolve()
    return f"""#!/bin/bash
# Generated by experiments/slurm_submit.py for `make {grid} SUBMIT=slurm`.
# Array task i trains the run on line i of tasks.txt (line 0 is the first), its output
# appended to that run's train.log. Options given with SBATCH_FLAGS override these.
#SBATCH --job-name=convatt-{grid}
#SBATCH --chdir={chdir}
#SBATCH --output={sub}/logs/%a.out
#SBATCH --ntasks=1
#SBATCH --signal={DEFAULT_SIGNAL}
#SBATCH --requeue
#SBATCH --open-mode=append
exec {shlex.quote(python)} {shlex.quote(str(here))} task {shlex.quote(str(sub / 'tasks.txt'))} "$SLURM_ARRAY_TASK_ID"
"""


def write_submission(runs_root: Path, args: argparse.Namespace, todo: list) -> Path:
    """A new RUNS/slurm/<grid>-<date>-<time>/ with tasks.txt (a line per run to submit), job.sbatch and logs/."""
    sub = runs_root / SLURM_DIR / f"{args.grid}-{time.strftime('%Y%m%d-%H%M%S')}"
    while sub.exists():  # two submissions within a second
        sub = sub.with_name(sub.name + "x")
    (sub / "logs").mkdir(parents=True)
    sub = sub.resolve()
    (sub / "tasks.txt").write_text("".join(f"{r.run_dir} {r.command}\n" for r in todo))
    (sub / "job.sbatch").write_text(batch_script(sub, args.python, args.chdir, args.grid))
    return sub


def submit(args: argparse.Namespace) -> int:
    runs = read_runs(Path(args.runs_file))
    if shutil.which("sbatch") is None:
        raise SubmitError(
            "SUBMIT=slurm: sbatch is not on PATH (is this a Slurm login node? "
            "experiments/slurm_local.sh start brings up a local one)"
        )
    runs_root = Path(args.runs)
    squeue = squeue_tasks()
    if squeue is None:
        raise SubmitError(
            "squeue failed, so the runs already queued or running are unknown; "
            "nothing submitted (is slurmctld reachable? try `squeue`)"
        )
    active = active_runs(runs_root, squeue)
    finished = [r for r in runs if (Path(r.run_dir) / "result.json").exists()]
    queued = [r for r in runs if r not in finished and os.path.abspath(r.run_dir) in active]
    todo = [r for r in runs if r not in finished and r not in queued]
    print(
        f"{args.grid}: {len(runs)} runs: {len(finished)} finished, {len(queued)} already queued or "
        f"running on Slurm, {len(todo)} to submit"
    )
    if not todo:
        print(f"{args.grid}: submitted 0 runs (nothing left to do)")
        return 0
    sub = write_submission(runs_root, args, todo)
    array = f"0-{len(todo) - 1}" + (f"%{args.max_parallel}" if args.max_parallel else "")
    cmd = ["sbatch", "--parsable", f"--array={array}", *shlex.split(args.sbatch_flags or ""), str(sub / "job.sbatch")]
    print("+ " + shlex.join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(sub)
        raise SubmitError(f"sbatch failed (exit {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    job_id = proc.stdout.strip().split(";")[0]
    (sub / "job_id").write_text(job_id + "\n")
    print(
        f"{args.grid}: submitted {len(todo)} runs as job array {job_id} "
        f"(skipped {len(finished)} finished, {len(queued)} queued or running)"
    )
    print(f"  tasks and batch script: {sub}/")
    print(
        f"  follow: squeue -j {job_id}   |   make status RUNS={args.runs}   |   "
        f"tail -f <run dir>/train.log   |   cancel: scancel {job_id}"
    )
    return 0


def clear_stale_lock(run_dir: Path, own_task: str, squeue: list[QueuedTask] | None) -> None:
    """Remove `run_dir/.lock` if the Slurm task named in it is gone (or is this task, requeued).

    `convatt train` writes "host pid N slurm JOB_TASK" into the lock file it flocks. On
    a local disk the kernel drops the lock with its process and the file blocks nothing,
    but on NFS/Lustre a node that died may keep holding it. Only Slurm's word that the
    holder is gone removes it: never a lock without a Slurm id, and nothing when squeue
    does not answer.
    """
    lock = run_dir / ".lock"
    try:
        holder = lock.read_text(errors="replace").strip()
    except OSError:
        return
    match = re.search(r"\bslurm (\d+)_(\d+)\b", holder)
    if not match or squeue is None:
        return
    listed = {(t.job_id, t.task_id) for t in squeue}
    if match.group(0) == f"slurm {own_task}" or (match.group(1), match.group(2)) not in listed:
        lock.unlink(missing_ok=True)
        print(f"removed the lock of Slurm task {match.group(1)}_{match.group(2)}, which is gone ({holder})", flush=True)


def split_command(command: str) -> tuple[dict[str, str], list[str]]:
    """'A=1 B=2 prog args' -> ({'A': '1', 'B': '2'}, ['prog', 'args'])."""
    words = shlex.split(command)
    env = {}
    while words and ENV_ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        raise SubmitError(f"no command in {command!r}")
    return env, words


def task(args: argparse.Namespace) -> int:
    """One array task: line INDEX of TASKS_FILE, exec'd with its output appended to train.log."""
    runs = read_runs(Path(args.tasks_file))
    if not 0 <= args.index < len(runs):
        raise SubmitError(f"{args.tasks_file} has {len(runs)} runs; there is no task {args.index}")
    run = runs[args.index]
    run_dir = Path(run.run_dir)
    own_task = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', '?')}"
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S')} task {own_task} on {os.uname().nodename}: {run.run_dir}\n"
        f"+ {run.command}",
        flush=True,
    )
    run_dir.mkdir(parents=True, exist_ok=True)
    clear_stale_lock(run_dir, own_task, squeue_tasks())
    env, argv = split_command(run.command)
    log = os.open(run_dir / "train.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.execvpe(argv[0], argv, os.environ | env)  # signals now reach convatt itself


def counts(args: argparse.Namespace) -> int:
    """'N queued, M running on Slurm' for the given run dirs; nothing when Slurm is not there."""
    if shutil.which("squeue") is None:
        return 0
    squeue = squeue_tasks()
    if squeue is None:
        print(", Slurm: squeue failed")
        return 0
    active = active_runs(Path(args.runs), squeue)
    states = [active[d] for d in map(os.path.abspath, args.run_dirs) if d in active]
    running = sum(s == "RUNNING" for s in states)
    print(f", {len(states) - running} queued, {running} running on Slurm")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("submit", help="submit a grid's unfinished runs as one job array")
    p.add_argument("--grid", required=True, help="the make target, e.g. ptb-all (names the job)")
    p.add_argument("--runs", required=True, help="the RUNS directory")
    p.add_argument("--runs-file", required=True, help="one line per run: RUN_DIR COMMAND")
    p.add_argument("--python", required=True, help="the Python that runs each task on the nodes")
    p.add_argument("--chdir", default=os.getcwd(), help="the tasks' working directory (the checkout)")
    p.add_argument("--sbatch-flags", default="", help="more sbatch options, e.g. '--gres=gpu:1 --time=4:00:00'")
    p.add_argument("--max-parallel", type=int, help="at most N array tasks at once (--array=...%%N)")
    p.set_defaults(func=submit)
    p = sub.add_parser("task", help="run one array task (called by job.sbatch)")
    p.add_argument("tasks_file")
    p.add_argument("index", type=int)
    p.set_defaults(func=task)
    p = sub.add_parser("counts", help="queued and running counts for `make status`")
    p.add_argument("--runs", required=True)
    p.add_argument("run_dirs", nargs="*")
    p.set_defaults(func=counts)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SubmitError as e:
        print(f"slurm_submit: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a read-only or full RUNS, a file where a directory should be: one line
        where = f"{e.filename}: " if e.filename else ""
        print(f"slurm_submit: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
