"""`make <grid> SUBMIT=slurm` against a real Slurm (no mocks).

Runs where Slurm answers (`sinfo` lists a node that takes jobs), for example after
`experiments/slurm_local.sh start` (root; `.ci/run` does it), and is skipped with the
reason otherwise (but for the first test, which needs no Slurm). The grids are tiny UD grids
on the embedded UD_English-LinES:

- 2 variants x 2 seeds, LIMIT=30, EPOCHS=2, submitted as one job array and waited for:
  every run's result.json and history.csv equal those of plain `make` (wall times aside);
- a run whose lock file is still flock'ed by a Slurm task that is gone (as a dead
  node's lock can stay on NFS) trains all the same;
- 1 variant x 2 seeds with more epochs: one task is scancel'ed after its first finished
  epoch, the same submit command then submits only that run, which resumes from its last
  finished epoch; a third submit submits nothing.

and experiments/slurm_local.sh itself (as root, on clusters of their own in tmp dirs): a second
cluster beside the first, `start --clean`, and `start` requeueing a job whose processes died.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from float_order import close_to
from helpers import lock_held
from test_makefile import ROOT, make_env

VENV = Path(sys.prefix)
TREEBANK = "English-LinES"
WAIT_LIMIT_S = 900


def slurm_unavailable() -> str | None:
    """Why the Slurm tests cannot run here, or None when they can."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no Slurm here (sinfo/sbatch not on PATH); as root, experiments/slurm_local.sh start brings one up"
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 30 s"
    if proc.returncode != 0:
        answer = (proc.stderr or proc.stdout).strip()[:200]
        return f"sinfo failed: {answer} (is slurmctld up? as root: experiments/slurm_local.sh start)"
    if not re.search(r"^(idle|mix|alloc)", proc.stdout, re.M):
        return f"Slurm has no node that takes jobs (node states: {' '.join(proc.stdout.split()) or 'none'})"
    if not (VENV / ".convatt-installed").exists():
        return f"{VENV} is not the project's make-built venv (no .convatt-installed stamp)"
    return None


SLURM_UNAVAILABLE = slurm_unavailable()  # asked once: sinfo takes ~10 s to give up on a stopped controller
needs_slurm = pytest.mark.skipif(SLURM_UNAVAILABLE is not None, reason=SLURM_UNAVAILABLE or "")


def make_grid(
    runs: Path, *variables: str, submit: bool = True, timeout: int = 600, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    """`make ud-all` on the tiny grid, with SUBMIT=slurm or run here."""
    cmd = [
        "make",
        "--no-print-directory",
        "-C",
        str(ROOT),
        "ud-all",
        # the tests' own environment as it is: never reinstalled because setup.cfg is newer than it
        f"--old-file={VENV / '.convatt-installed'}",
        f"RUNS={runs}",
        f"VENV={VENV}",
        f"TREEBANKS={TREEBANK}",
        "TRAIN_FLAGS=--curve-every 0",
        *variables,
        *(["SUBMIT=slurm"] if submit else []),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=make_env() | (env or {}), timeout=timeout)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def submit_grid(runs: Path, *variables: str) -> str:
    return make_grid(runs, *variables).stdout


def submitted(stdout: str) -> tuple[int, str | None]:
    """(how many runs were submitted, the job id or None) from the submit output."""
    match = re.search(r"submitted (\d+) runs(?: as job array (\d+))?", stdout)
    assert match, stdout
    return int(match.group(1)), match.group(2)


def active_tasks(job_id: str) -> list[str]:
    proc = subprocess.run(["squeue", "-h", "-r", "-j", job_id, "-o", "%K %T"], capture_output=True, text=True)
    return proc.stdout.split("\n") if proc.returncode == 0 and proc.stdout.strip() else []


def the_queue() -> str:
    """squeue's whole queue, for failure messages: jobs not ours that hold the node show there."""
    proc = subprocess.run(["squeue", "-o", "%i %j %T %r %M"], capture_output=True, text=True)
    return proc.stdout + proc.stderr


def wait_for(job_id: str) -> None:
    deadline = time.monotonic() + WAIT_LIMIT_S
    while active_tasks(job_id):
        assert time.monotonic() < deadline, (
            f"job {job_id} still in squeue after {WAIT_LIMIT_S} s; the queue:\n{the_queue()}"
            "(.ci/run tests on a Slurm of their own: SLURM_LOCAL_DIR/SLURM_LOCAL_PORT, start --clean)"
        )
        time.sleep(1)


def submission_of(runs: Path, job_id: str) -> Path:
    (sub,) = [p.parent for p in (runs / "slurm").glob("*/job_id") if p.read_text().strip() == job_id]
    return sub


def run_dirs(runs: Path) -> list[Path]:
    return sorted(p.parent for p in runs.glob("ud/*/*/seed*/config.json"))


def comparable_result(run: Path) -> dict:
    result = json.loads((run / "result.json").read_text())
    result.pop("wall_seconds")
    return result


def comparable_history(run: Path) -> list[dict]:
    """history.csv less the timings."""
    with (run / "history.csv").open(newline="") as f:
        return [{k: v for k, v in row.items() if k != "seconds"} for row in csv.DictReader(f)]


# A Slurm task computes with its CPUs' threads, plain make with all of them: two programs, whose
# float order moves the losses' last digits (rel 1e-5) and may flip a near tie's tag (an accuracy
# by 1/500 on these 30 sentences); another variant, seed or corpus moves them by far more.
ACCURACY_TOLERANCE = 0.01


def history_numbers(run: Path, *, close: bool = False) -> list[dict]:
    """history.csv's rows as numbers; `close`: to compare another thread count's with (above)."""

    def number(column: str, value: str):
        if column == "epoch":
            return int(value)
        if not close:
            return float(value)
        if column == "loss":
            return pytest.approx(float(value), rel=1e-5)
        return pytest.approx(float(value), rel=0, abs=ACCURACY_TOLERANCE)

    return [{k: number(k, v) for k, v in row.items()} for row in comparable_history(run)]


def failure_logs(runs: Path) -> str:
    return "\n".join(
        f"--- {p}\n{p.read_text()[-3000:]}"
        for p in sorted(runs.glob("**/*.out")) + sorted(runs.glob("ud/**/train.log"))
    )


def test_submit_without_slurm_says_so_in_one_line(tmp_path):
    bin_dir = tmp_path / "bin"  # make, python3 and the basics, but no sbatch
    bin_dir.mkdir()
    for tool in ("make", "bash", "sh", "mkdir", "sed", "python3"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    proc = make_grid(
        tmp_path / "runs",
        "VARIANTS=san",
        "SEEDS=1",
        f"PYTHON={sys.executable}",
        env={"PATH": str(bin_dir)},
        check=False,
    )
    assert proc.returncode != 0
    assert re.search(r"^slurm_submit: error: SUBMIT=slurm: sbatch is not on PATH", proc.stderr, re.M), proc.stderr
    assert not list((tmp_path / "runs").glob("slurm/*/job_id"))


@needs_slurm
def test_a_lock_of_a_slurm_task_that_is_gone_does_not_block(tmp_path):
    """On NFS a dead node's flock can outlive it: here a live process holds it for 'job 999999'."""
    runs = tmp_path / "runs"
    run = runs / "ud" / f"UD_{TREEBANK}" / "san" / "seed1"
    run.mkdir(parents=True)
    with lock_held(run / ".lock", "deadnode pid 4242 slurm 999999_3"):
        _, job_id = submitted(submit_grid(runs, "VARIANTS=san", "SEEDS=1", "EPOCHS=1", "LIMIT=30"))
        wait_for(job_id)
    assert (run / "result.json").exists(), failure_logs(runs)
    (task_log,) = submission_of(runs, job_id).glob("logs/*.out")
    assert "removed the lock of Slurm task 999999_3, which is gone" in task_log.read_text()


@needs_slurm
@pytest.mark.slow
def test_a_grid_on_slurm_gives_what_plain_make_gives(tmp_path):
    grid = ["VARIANTS=san san-pe-add", "SEEDS=1 2", "EPOCHS=2", "LIMIT=30"]
    start = time.monotonic()
    out = submit_grid(tmp_path / "slurm", *grid)
    n, job_id = submitted(out)
    assert n == 4 and job_id and "0 finished, 0 already queued or running" in out, out
    sub = submission_of(tmp_path / "slurm", job_id)
    assert len((sub / "tasks.txt").read_text().splitlines()) == 4 and (sub / "job.sbatch").exists()
    wait_for(job_id)
    print(f"the 4-run grid on Slurm: {time.monotonic() - start:.0f} s from submit to the last task's end")

    start = time.monotonic()
    make_grid(tmp_path / "plain", *grid, "JOBS=2", submit=False)
    print(f"the same grid with plain make -j 2: {time.monotonic() - start:.0f} s")

    on_slurm, plain = run_dirs(tmp_path / "slurm"), run_dirs(tmp_path / "plain")
    assert len(on_slurm) == 4 and [p.relative_to(tmp_path / "slurm") for p in on_slurm] == [
        p.relative_to(tmp_path / "plain") for p in plain
    ]
    for a, b in zip(on_slurm, plain):
        assert (a / "result.json").exists(), failure_logs(tmp_path / "slurm")
        assert comparable_result(a) == close_to(comparable_result(b), rel=0, abs_=ACCURACY_TOLERANCE), a
        assert history_numbers(a) == history_numbers(b, close=True), a
        assert "done: test accuracy" in (a / "train.log").read_text()
    assert "submitted 0 runs" in submit_grid(tmp_path / "slurm", *grid)


def finished_epoch(run: Path) -> int:
    try:
        return json.loads((run / "checkpoint" / "state.json").read_text())["epoch"]
    except (OSError, ValueError, KeyError):
        return 0


@needs_slurm
@pytest.mark.slow
def test_a_cancelled_task_is_resubmitted_alone_and_resumes(tmp_path):
    runs = tmp_path / "runs"
    grid = ["VARIANTS=san-pe-add", "SEEDS=1 2", "EPOCHS=8", "LIMIT=200"]
    _, job_id = submitted(submit_grid(runs, *grid))
    sub = submission_of(runs, job_id)
    victim = Path((sub / "tasks.txt").read_text().splitlines()[1].split()[0])  # array task 1
    status = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "status", f"RUNS={runs}", f"TREEBANKS={TREEBANK}", *grid[:2]],
        capture_output=True,
        text=True,
        env=make_env(),
    )
    counts = re.search(r"^ud-all: +0 of 2 runs finished, (\d+) queued, (\d+) running on Slurm", status.stdout, re.M)
    assert counts and int(counts.group(1)) + int(counts.group(2)) == 2, status.stdout + status.stderr
    other = Path((sub / "tasks.txt").read_text().splitlines()[0].split()[0])

    deadline = time.monotonic() + WAIT_LIMIT_S
    while finished_epoch(victim) < 1:  # cancel it in the middle: after its first epoch
        assert not (victim / "result.json").exists(), "the run finished before it could be cancelled"
        assert time.monotonic() < deadline and active_tasks(job_id), failure_logs(runs) + the_queue()
        time.sleep(0.2)
    subprocess.run(["scancel", f"{job_id}_1"], check=True)
    while any(line.startswith("1 ") for line in active_tasks(job_id)):
        time.sleep(0.5)
    assert not (victim / "result.json").exists(), "the cancelled run finished anyway"
    resume_from = finished_epoch(victim)
    assert resume_from >= 1

    out = submit_grid(runs, *grid)  # the same command again
    n, job_id2 = submitted(out)
    assert n == 1 and re.search(r"1 finished, 0 already|0 finished, 1 already", out), out
    sub2 = submission_of(runs, job_id2)
    assert [line.split()[0] for line in (sub2 / "tasks.txt").read_text().splitlines()] == [str(victim)]
    wait_for(job_id)
    other_finished_at = (other / "result.json").stat().st_mtime
    wait_for(job_id2)

    assert (victim / "result.json").exists(), failure_logs(runs)
    log = (victim / "train.log").read_text()
    assert f"resuming from epoch {resume_from} " in log, log
    epochs = [int(row["epoch"]) for row in comparable_history(victim)]
    assert epochs == list(range(1, len(epochs) + 1)) and len(epochs) > resume_from
    assert json.loads((victim / "result.json").read_text())["epochs_run"] == len(epochs)
    assert (other / "result.json").stat().st_mtime == other_finished_at  # not redone
    assert (other / "train.log").read_text().count("done: test accuracy") == 1

    assert submitted(submit_grid(runs, *grid)) == (0, None)  # a third submit: nothing left


needs_root_slurm = pytest.mark.skipif(
    SLURM_UNAVAILABLE is not None or os.geteuid() != 0,
    reason=SLURM_UNAVAILABLE or "experiments/slurm_local.sh start needs root",
)


def free_port_pair(first: int = 6857) -> int:
    """The first port P >= first with P and P + 1 free on 127.0.0.1 (slurmctld, slurmd)."""

    def taken(port: int) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    port = first
    while taken(port) or taken(port + 1):
        port += 2
    return port


def queued_ids(env: dict) -> list[str]:
    """The job ids in the queue of the cluster that `env`'s SLURM_CONF names."""
    return subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=env).stdout.split()


def slurm_local(state_dir: Path, port: int, *args: str) -> subprocess.CompletedProcess:
    env = make_env() | {"SLURM_LOCAL_DIR": str(state_dir), "SLURM_LOCAL_PORT": str(port)}
    return subprocess.run(
        [str(ROOT / "experiments" / "slurm_local.sh"), *args], capture_output=True, text=True, env=env, timeout=120
    )


@needs_root_slurm
def test_a_cluster_of_its_own_starts_clean_beside_the_running_one(tmp_path):
    """What .ci/run relies on: a second local cluster (own state, ports, queue) whose --clean
    start forgets the jobs a previous start left queued; the first cluster keeps running."""
    state, port = tmp_path / "cluster", free_port_pair()
    conf_env = make_env() | {"SLURM_CONF": str(state / "slurm.conf")}
    try:
        started = slurm_local(state, port, "start", "--clean")
        assert started.returncode == 0, started.stdout + started.stderr
        name = f"convatt-test-{tmp_path.name}"
        held = subprocess.run(
            ["sbatch", "--parsable", "--hold", f"--job-name={name}", f"--output={tmp_path}/%j.out", "--wrap", "true"],
            capture_output=True,
            text=True,
            env=conf_env,
            check=True,
        ).stdout.strip()
        own_queue = subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True, env=conf_env)
        assert own_queue.stdout.split() == [held, name], own_queue.stdout + own_queue.stderr
        assert name not in subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True).stdout.split()

        assert slurm_local(state, port, "stop").returncode == 0
        restarted = slurm_local(state, port, "start")  # without --clean the saved queue comes back
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert queued_ids(conf_env) == [held]
        refused = slurm_local(state, port, "start", "--clean")
        assert refused.returncode != 0 and "already running" in refused.stderr, refused.stdout + refused.stderr

        assert slurm_local(state, port, "stop").returncode == 0
        cleaned = slurm_local(state, port, "start", "--clean")
        assert cleaned.returncode == 0 and "forgetting the jobs" in cleaned.stdout, cleaned.stdout + cleaned.stderr
        assert queued_ids(conf_env) == []
    finally:
        slurm_local(state, port, "stop")
    assert slurm_unavailable() is None, "stopping the second cluster took the first one down"


def job_field(job_id: str, field: str, env: dict) -> str:
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, env=env).stdout
    match = re.search(rf"\b{field}=(\S*)", shown)
    return match.group(1) if match else ""


def running_job_pids(job: str, env: dict) -> list[int]:
    """The pids `scontrol listpids` gives for a job once its batch script runs (at most 60 s)."""
    deadline = time.monotonic() + 60
    while (pids := subprocess.run(["scontrol", "listpids", job], capture_output=True, text=True, env=env)).returncode:
        assert time.monotonic() < deadline, pids.stdout + pids.stderr
        time.sleep(0.5)
    return [int(line.split()[0]) for line in pids.stdout.splitlines()[1:] if line.split()[0].isdigit()]


def up_to_stepd(pid: int) -> list[int]:
    """The process and its ancestors up to its slurmstepd; only itself if no stepd is above it."""
    chain = []
    while pid > 1 and Path(f"/proc/{pid}/stat").exists():
        chain.append(pid)
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat[stat.index("(") + 1 : stat.rindex(")")] == "slurmstepd":
            return chain
        pid = int(stat[stat.rindex(")") + 2 :].split()[1])  # the parent's pid
    return chain[:1]


def kill_with_their_stepd(pids: list[int]) -> None:
    """SIGKILL these processes and their slurmstepd (as a machine going down would), then wait
    until they are gone: a stepd left alive would still answer for them."""
    doomed = {ancestor for pid in pids for ancestor in up_to_stepd(pid)}
    for pid in doomed:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:  # ended already: what we want
            pass
    deadline = time.monotonic() + 30
    while alive := [
        pid
        for pid in doomed
        if (Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text())
    ]:
        assert time.monotonic() < deadline, f"still alive after SIGKILL: {alive}"
        time.sleep(0.2)


def cluster_state(job: str, state: Path, env: dict) -> str:
    """What a failed requeue check prints: the queue, the job's pids and the controller's log."""
    shown = [
        subprocess.run(command, capture_output=True, text=True, env=env)
        for command in (["squeue", "-o", "%A %T %S"], ["scontrol", "listpids", job])
    ]
    log = (state / "slurmctld.log").read_text().splitlines()[-15:] if (state / "slurmctld.log").exists() else []
    return "\n".join([*(c.stdout + c.stderr for c in shown), *log])


@needs_root_slurm
def test_a_job_whose_processes_died_with_the_daemons_is_requeued_at_start(tmp_path):
    """The machine went down (here: the daemons stopped, the job's processes killed): the saved
    state still calls the job running, and would hold its CPU for good; start requeues it."""
    state, port = tmp_path / "cluster", free_port_pair(6877)  # not 6857: xdist may run both at once
    conf_env = make_env() | {"SLURM_CONF": str(state / "slurm.conf")}
    try:
        assert slurm_local(state, port, "start", "--clean").returncode == 0
        job = subprocess.run(
            ["sbatch", "--parsable", "--requeue", f"--output={tmp_path}/%j.out", "--wrap", "sleep 600"],
            capture_output=True,
            text=True,
            env=conf_env,
            check=True,
        ).stdout.strip()
        job_pids = running_job_pids(job, conf_env)
        assert slurm_local(state, port, "stop").returncode == 0
        kill_with_their_stepd(job_pids)
        assert job_field(job, "JobState", conf_env) == ""  # no controller to ask

        restarted = slurm_local(state, port, "start")
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert f"requeueing job(s) {job}:" in restarted.stdout, restarted.stdout + cluster_state(job, state, conf_env)
        assert job_field(job, "Restarts", conf_env) == "1"
        assert job_field(job, "JobState", conf_env) in {"PENDING", "RUNNING", "CONFIGURING"}
        again = slurm_local(state, port, "start")  # the daemons run: nothing to requeue
        assert again.returncode == 0 and "requeueing" not in again.stdout, again.stdout
    finally:
        if "job" in locals():
            subprocess.run(["scancel", job], env=conf_env, capture_output=True)
        slurm_local(state, port, "stop")
