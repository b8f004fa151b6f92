"""The same numbers for the same seed: a short real run against numbers recorded before
the trainer trained through `keras.Model.fit` (tests/data/training_regression.json, which
names the commit that produced them)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import LINES

EXPECTED = json.loads((Path(__file__).parent / "data" / "training_regression.json").read_text())
ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "KERAS_BACKEND": "tensorflow"}


def train(out: Path, protocol: str) -> None:
    command = [sys.executable, "-m", "convatt", "train", "--preset", "ud", "--variant", "san-pe-add-conv2d"]
    command += ["--seed", "1", "--data", str(LINES), "--limit", "60", "--epochs", "3", "--curve-every", "2"]
    subprocess.run([*command, "--protocol", protocol, "--out", str(out)], check=True, env=os.environ | ONE_THREAD)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["original", "keras3"])
def test_a_short_run_gives_the_recorded_numbers(tmp_path, protocol):
    expected = EXPECTED["protocols"][protocol]
    train(tmp_path / "run", protocol)
    for name in ("history", "curve"):
        ours = pd.read_csv(tmp_path / "run" / f"{name}.csv").drop(columns="seconds", errors="ignore")
        pd.testing.assert_frame_equal(ours, pd.DataFrame(expected[name]), rtol=1e-4, atol=0, obj=name)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    ours = {
        "epochs_run": result["epochs_run"],
        "best_epoch": result["best_epoch"],
        "parameters": result["parameters"],
        "dev_all": result["dev"]["all"],
        "test_all": result["test"]["all"],
        "test_oov": result["test"]["oov"],
        "test_ambiguous": result["test"]["ambiguous"],
    }
    assert ours == {k: pytest.approx(v, rel=1e-4) for k, v in expected["result"].items()}
