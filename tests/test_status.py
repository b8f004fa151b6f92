"""`convatt status`: unfinished runs' epoch and best dev accuracy so far, training or stopped."""

import json
import subprocess
import sys

from helpers import lock_held

from convatt.cli.status import format_status, unfinished_runs

HISTORY = "epoch,loss,train_accuracy,dev_accuracy,dev_batch_mean_accuracy,seconds\n"


def make_run(directory, epochs=100, history_rows=(), finished=False):
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"format": "convatt-run", "epochs": epochs}))
    if history_rows:
        rows = "".join(f"{e},1.0,0.5,{dev},{dev},3.0\n" for e, dev in history_rows)
        (directory / "history.csv").write_text(HISTORY + rows)
    if finished:
        (directory / "result.json").write_text("{}")


def test_status_lists_unfinished_runs_with_epoch_best_dev_and_state(tmp_path):
    make_run(tmp_path / "ptb/san/seed1", finished=True, history_rows=[(1, 0.9)])
    make_run(tmp_path / "ptb/san/seed2", history_rows=[(1, 0.81), (2, 0.875), (3, 0.86)])
    make_run(tmp_path / "ud/UD_English-LinES/san/seed1", epochs=5, history_rows=[(1, 0.5)])
    make_run(tmp_path / "ud/UD_English-LinES/san/seed2")
    with lock_held(tmp_path / "ud/UD_English-LinES/san/seed1/.lock", "here pid 1"):
        runs, finished = unfinished_runs(tmp_path)
        text = subprocess.run(
            [sys.executable, "-m", "convatt", "status", "--runs", str(tmp_path)], capture_output=True, text=True
        ).stdout
    assert finished == 1 and [r.path for r in runs] == [
        "ptb/san/seed2",
        "ud/UD_English-LinES/san/seed1",
        "ud/UD_English-LinES/san/seed2",
    ]
    stopped, training, new = runs
    assert (stopped.state, stopped.epochs_done, stopped.max_epochs, stopped.best_epoch) == ("stopped", 3, 100, 2)
    assert stopped.best_dev == 0.875
    assert (training.state, training.epochs_done, training.max_epochs, training.best_dev) == ("training", 1, 5, 0.5)
    assert (new.state, new.epochs_done, new.best_dev) == ("not started", 0, None)
    table = format_status(runs, finished).splitlines()
    assert [line.split()[:4] for line in text.strip().splitlines()] == [line.split()[:4] for line in table]
    assert "1 finished run(s), 3 unfinished" in text and "87.50% (ep 2)" in text and "1/5" in text
    # the lock released (its process gone): the run shows as stopped
    assert unfinished_runs(tmp_path)[0][1].state == "stopped"
