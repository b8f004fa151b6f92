"""A short real run against the numbers recorded for it (tests/data/training_regression.json),
in two tests:

- on every machine, what must not change: the parameters and weight shapes, the epochs run, the
  best epoch where the recorded accuracies leave no doubt about it, the columns and steps;
  the loss to LOSS_RTOL and every accuracy to ACCURACY_TOKENS tokens of its split. TensorFlow
  (oneDNN, Eigen, XLA) chooses its kernels by CPU, so another CPU sums floats in another order:
  the last bits differ, and a dev token at the margin may flip (docs/reliability.md).
- on the machine that recorded them (the same `convatt.machine.Platform`: CPU model and
  kernel-choosing instruction sets, oneDNN on or off, the packages), every number exactly;
  elsewhere it is skipped with both machines named.

To record the numbers again (after a change that is meant to change them), on one machine:
`PYTHONPATH=. python tests/test_training_regression.py` writes the JSON from fresh runs, with
the machine they ran on.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import LINES, ROOT

pytestmark = pytest.mark.slow  # two real training runs

EXPECTED_FILE = Path(__file__).parent / "data" / "training_regression.json"
PROTOCOLS = ("original", "keras3")
ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "KERAS_BACKEND": "tensorflow"}
LIMIT = 60  # sentences per split
LOSS_RTOL = 1e-3  # another CPU's float order moves the loss in its 6th digit; a real change by far more
ACCURACY_TOKENS = 3  # ... and may flip a token or two at the margin
TRAIN_OPTIONS = ["--preset", "ud", "--variant", "san-pe-add-conv2d", "--seed", "1", "--limit", str(LIMIT)]
TRAIN_OPTIONS += ["--epochs", "3", "--curve-every", "2"]
RESULT_KEYS = ("epochs_run", "best_epoch", "parameters")
SCORE_KEYS = {"dev_all": ("dev", "all"), "test_all": ("test", "all")}
SCORE_KEYS |= {"test_oov": ("test", "oov"), "test_ambiguous": ("test", "ambiguous")}

# Run in the trained run's environment: its platform and its model's weight shapes.
DESCRIBE = """
import json, sys
from convatt.machine import platform
from convatt.inference.loading import load_model
model = load_model(sys.argv[1])
print(json.dumps({"platform": platform().to_json(), "weight_shapes": [list(w.shape) for w in model.weights]}))
"""


def _env() -> dict[str, str]:
    return os.environ | ONE_THREAD | {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}


def run_once(out: Path, protocol: str) -> dict:
    """Train the run into `out`; what the tests compare: its CSVs, result, platform, weights."""
    command = [sys.executable, "-m", "convatt", "train", *TRAIN_OPTIONS, "--data", str(LINES)]
    subprocess.run([*command, "--protocol", protocol, "--out", str(out)], check=True, env=_env())
    described = subprocess.run(
        [sys.executable, "-c", DESCRIBE, str(out)], check=True, capture_output=True, text=True, env=_env()
    )
    result = json.loads((out / "result.json").read_text())
    return {
        **{n: _csv(out / f"{n}.csv") for n in ("history", "curve")},
        "result": {**{k: result[k] for k in RESULT_KEYS}, **{k: result[a][b] for k, (a, b) in SCORE_KEYS.items()}},
        "tokens": {"dev": result["dev"]["n_all"], "test": result["test"]["n_all"], "train": train_tokens()},
        **json.loads(described.stdout.strip().splitlines()[-1]),
    }


def _csv(path: Path) -> list[dict]:
    return pd.read_csv(path).drop(columns="seconds", errors="ignore").to_dict("records")


def train_tokens() -> int:
    from convatt.data.load import load_corpus

    return sum(len(sentence) for sentence in load_corpus("ud", LINES).train[:LIMIT])


@pytest.fixture(scope="module", params=PROTOCOLS)
def trained(request, tmp_path_factory) -> tuple[dict, dict]:
    """(this machine's numbers, the recorded ones) for one protocol."""
    recorded = json.loads(EXPECTED_FILE.read_text())
    ours = run_once(tmp_path_factory.mktemp("regression") / "run", request.param)
    return ours, {**recorded["protocols"][request.param], "platform": recorded["platform"]}


def test_what_must_not_change(trained):
    ours, expected = trained
    assert ours["weight_shapes"] == expected["weight_shapes"]
    assert {k: ours["result"][k] for k in ("epochs_run", "parameters")} == {
        k: expected["result"][k] for k in ("epochs_run", "parameters")
    }
    assert ours["tokens"] == expected["tokens"]
    accuracy_atol = {split: ACCURACY_TOKENS / n for split, n in expected["tokens"].items()}
    for name in ("history", "curve"):
        frames = [pd.DataFrame(rows) for rows in (ours[name], expected[name])]
        assert list(frames[0].columns) == list(frames[1].columns), name
        for column in frames[1].columns:
            atol, rtol = _tolerance(column, accuracy_atol)
            pd.testing.assert_series_equal(frames[0][column], frames[1][column], atol=atol, rtol=rtol, obj=name)
    for key, (split, _) in SCORE_KEYS.items():
        assert ours["result"][key] == pytest.approx(expected["result"][key], abs=accuracy_atol[split]), key
    assert ours["result"]["best_epoch"] in _possible_best_epochs(expected["history"], accuracy_atol["dev"])


def _tolerance(column: str, accuracy_atol: dict[str, float]) -> tuple[float, float]:
    """(atol, rtol) of one column of history.csv or curve.csv: counts exactly."""
    if column == "loss":
        return 0.0, LOSS_RTOL
    if column.endswith("accuracy"):
        return accuracy_atol["train" if column.startswith("train") else "dev"], 0.0
    return 0.0, 0.0


def _possible_best_epochs(history: list[dict], atol: float) -> set[int]:
    """The epochs whose recorded selection score (dev batch mean accuracy) is within twice the
    tolerance of the best: the recorded best alone where its lead leaves no doubt."""
    scores = {row["epoch"]: row["dev_batch_mean_accuracy"] for row in history}
    best = max(scores.values())
    return {epoch for epoch, score in scores.items() if score >= best - 2 * atol}


def test_the_recorded_numbers_exactly_on_the_recording_machine(trained):
    ours, expected = trained
    if ours["platform"] != expected["platform"]:
        pytest.skip(
            f"recorded on {describe(expected['platform'])}; this machine is {describe(ours['platform'])}: "
            "other kernels sum floats in another order, so only test_what_must_not_change applies "
            "(docs/reliability.md)"
        )
    for name in ("history", "curve", "result", "tokens", "weight_shapes"):
        assert ours[name] == expected[name], name


def describe(platform: dict) -> str:
    from convatt.machine import Platform

    return Platform(**platform).describe()


def record() -> None:
    """Write EXPECTED_FILE from fresh runs of both protocols on this machine."""
    import tempfile

    from convatt.rundir.provenance import source_commit

    with tempfile.TemporaryDirectory() as tmp:
        runs = {p: run_once(Path(tmp) / p, p) for p in PROTOCOLS}
    platforms = [r.pop("platform") for r in runs.values()]
    assert all(p == platforms[0] for p in platforms), platforms
    recorded = {
        "comment": f"`convatt train {' '.join(TRAIN_OPTIONS)} --protocol P` on the embedded UD_English-LinES "
        "with one thread, TensorFlow backend, CPU; written by `python tests/test_training_regression.py` "
        "(tests/test_training_regression.py compares).",
        "recorded": {"date": datetime.date.today().isoformat(), "commit": source_commit()},
        "platform": platforms[0],
        "protocols": runs,
    }
    EXPECTED_FILE.write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"wrote {EXPECTED_FILE}")


if __name__ == "__main__":
    record()
