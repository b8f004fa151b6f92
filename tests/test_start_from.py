"""`convatt train --from RUN`: a run that starts from a finished run's weights, the variant's
further modifications at identity (`convatt.training.start_from`)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import LINES, tiny_command, tiny_options

from convatt.errors import ConvattError

# (source, converted) pairs: every modification with a start at identity, in the tagger and the causal LM
TAGGER_PAIRS = [
    ("san-pe-add", "san-pe-add-conv2d"),
    ("san-pe-add", "san-pe-add-conv"),
    ("san-pe-add", "san-pe-add-conv2d-pre"),
    ("san-pe-add", "san-pe-add-temp"),
    ("san-pe-add", "san-pe-add-talking"),
    ("san", "san-p-r"),
    ("san", "san-shaw"),
]
LM_PAIRS = [
    ("san-pe-add", "san-pe-add-conv2d"),
    ("san-pe-add", "san-pe-add-conv2d-pre"),
    ("san-pe-add", "san-pe-add-conv"),
    ("san-pe-add", "san-pe-add-talking"),
    ("san-pe-add", "san-pe-add-temp"),
]


def _tagger(variant: str, seed: int):
    import keras

    from convatt.model.tagger import build_tagger
    from convatt.model.variants import make_config

    keras.utils.set_random_seed(seed)
    return build_tagger(make_config("ud", variant), 50, 30, 12, jit_compile=False)


def _tagger_batch():
    from convatt.data.batching import make_inputs
    from convatt.data.corpus import MAX_LEN, MAX_WORD_LEN

    rng = np.random.default_rng(0)
    lengths = [MAX_LEN, 17, 5]
    words = np.array([[rng.integers(2, 50) if t < n else 0 for t in range(MAX_LEN)] for n in lengths])
    chars = rng.integers(1, 30, (len(lengths), MAX_LEN, MAX_WORD_LEN)) * (words[..., None] > 0)
    return make_inputs(words, chars)


@pytest.mark.parametrize(("source", "target"), TAGGER_PAIRS)
def test_a_converted_tagger_computes_what_its_source_computes(source, target):
    from convatt.training.start_from import copy_source_weights

    trained, converted = _tagger(source, 1), _tagger(target, 2)  # other seeds: every weight must be copied
    copy_source_weights(converted, trained, causal=False)
    inputs = _tagger_batch()
    before = converted.predict(inputs, verbose=0)
    np.testing.assert_allclose(before, trained.predict(inputs, verbose=0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(before, _tagger(target, 2).predict(inputs, verbose=0), atol=1e-3)  # not by chance


@pytest.mark.parametrize(("source", "target"), LM_PAIRS)
def test_a_converted_causal_lm_computes_what_its_source_computes(source, target):
    import keras

    from convatt.sequence.config import make_sequence_config
    from convatt.sequence.model import build_causal_model
    from convatt.training.start_from import copy_source_weights

    def model(variant, seed):
        keras.utils.set_random_seed(seed)
        return build_causal_model(make_sequence_config("charlm", variant, max_len=24), 40, jit_compile=False)

    trained, converted = model(source, 1), model(target, 2)
    copy_source_weights(converted, trained, causal=True)
    symbols = np.random.default_rng(0).integers(1, 40, (3, 24))
    before = converted.predict(symbols, verbose=0)
    np.testing.assert_allclose(before, trained.predict(symbols, verbose=0), rtol=1e-5, atol=1e-5)
    assert not np.allclose(before, model(target, 2).predict(symbols, verbose=0), atol=1e-3)


@pytest.mark.parametrize(
    ("source", "target", "says"),
    [
        ("san-pe-add", "san-pe-con", "position_embedding"),
        ("san-pe-add", "san-pe-add-denser", "attention"),
        ("san", "san-alibi", "ALiBi"),
        ("san-pe-add-conv2d", "san-pe-add", "attention_conv"),
        ("san-pe-add-conv2d", "san-pe-add-conv2d-pre", "conv_before_softmax"),
    ],
)
def test_a_variant_with_no_start_at_identity_is_refused(source, target, says):
    from convatt.model.variants import VARIANTS
    from convatt.training.start_from import variant_refusal

    assert says in variant_refusal(VARIANTS[source], VARIANTS[target])
    assert variant_refusal(VARIANTS[source], VARIANTS[source]) is None


def _from_run(tiny_plain_runs: Path, out: Path, variant: str = "san-pe-add-conv2d", **changes):
    source = str(tiny_plain_runs / "ptb" / "san-pe-add" / "seed1")
    return tiny_options(out, variant, **{"start_from": source, **changes})


def test_a_tagger_started_from_a_run_records_it_and_starts_where_it_ended(tiny_plain_runs, tmp_path):
    from convatt.rundir.reading import read_run
    from convatt.training.trainer import train_run

    source = tiny_plain_runs / "ptb" / "san-pe-add" / "seed1"
    result = train_run(_from_run(tiny_plain_runs, tmp_path / "run", epochs=1), log=lambda line: None)
    started = result["started_from"]
    source_result = json.loads((source / "result.json").read_text())
    assert started["path"] == str(source.resolve()) and started["variant"] == "san-pe-add"
    assert started["source_commit"] == source_result["source_commit"] and started["same_data"]
    assert started["dev_at_start"] == pytest.approx(source_result["dev"]["all"], abs=1e-3)
    assert started["start_step"] == source_result["best_epoch"] * 5  # 160 sentences, batches of 32
    assert json.loads((tmp_path / "run" / "config.json").read_text())["start_from"] == str(source.resolve())
    setting = read_run(tmp_path / "run" / "result.json").setting
    assert setting.continued and setting.label().endswith("continued")  # apart in the tables


@pytest.mark.slow
def test_a_causal_lm_started_from_a_run_learns_and_resumes_without_its_source(tmp_path, monkeypatch):
    from helpers import train_stopped_in_epoch

    from convatt.training.api import run_config
    from convatt.training.trainer import train_run

    monkeypatch.setenv("CONVATT_PROGRESS_EVERY", "1")
    size = dict(preset="charlm", data=LINES, seed=1, limit=48, curve_every=1, curve_until=-1, jit_compile="off")
    train_run(run_config(variant="san-pe-add", out=tmp_path / "source", epochs=1, **size), log=lambda line: None)
    options = lambda out: run_config(
        variant="san-pe-add-conv2d", out=out, epochs=3, start_from=tmp_path / "source", **size
    )
    whole = train_run(options(tmp_path / "whole"), log=lambda line: None)
    start = whole["started_from"]
    assert start["dev_bits_at_start"] == pytest.approx(start["dev_bits_per_symbol"], abs=1e-4)
    assert whole["dev"]["bits_per_symbol"] < start["dev_bits_at_start"] - 0.05  # it learns from there
    train_stopped_in_epoch(options(tmp_path / "stopped"), 2)
    shutil.move(tmp_path / "source", tmp_path / "moved")  # a resumed run reads its own checkpoint only
    resumed = train_run(options(tmp_path / "stopped"), log=lambda line: None)
    assert resumed["test"] == pytest.approx(whole["test"]) and resumed["started_from"] == whole["started_from"]


def test_resuming_with_another_from_names_the_option(tiny_plain_runs, tmp_path):
    from convatt.training.trainer import train_run

    started = tmp_path / "run"  # a run that has written its config.json (as a killed one has)
    started.mkdir()
    _from_run(tiny_plain_runs, started, epochs=1).save(started)
    other = _from_run(
        tiny_plain_runs, started, epochs=1, start_from=str(tiny_plain_runs / "ptb" / "san-pe-add" / "seed2")
    )
    with pytest.raises(ConvattError, match="--from .*seed1"):
        train_run(other, log=lambda line: None)


def _refusal(options, out: Path) -> str:
    from convatt.training.trainer import train_run

    with pytest.raises(ConvattError) as caught:
        train_run(options, log=lambda line: None)
    assert not out.exists()  # refused before anything was written
    return str(caught.value)


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def _relabelled(runs: Path, out: Path, **config_changes) -> Path:
    """A copy of the SAN+PE[add] seed-1 run whose config.json says `config_changes` (its refusals
    read the config before any weight)."""
    run = _copy(runs / "ptb" / "san-pe-add" / "seed1", out)
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, **config_changes}))
    return run


def test_runs_it_cannot_start_from_are_refused_before_anything_is_written(tiny_plain_runs, tmp_path):
    out = tmp_path / "run"
    assert "give other vocabularies (ambiguous, chars, tags, words)" in _refusal(
        _from_run(tiny_plain_runs, out, limit=100), out
    )
    conv2d = str(_relabelled(tiny_plain_runs, tmp_path / "conv2d", variant="san-pe-add-conv2d"))
    dropped = _refusal(_from_run(tiny_plain_runs, out, "san-pe-add", start_from=conv2d), out)
    assert "it changes attention_conv ('2d' -> None)" in dropped
    tagging_ud = _relabelled(tiny_plain_runs, tmp_path / "ud", preset="ud")
    assert "another preset (ud, not ptb)" in _refusal(_from_run(tiny_plain_runs, out, start_from=str(tagging_ud)), out)
    other_network = _refusal(_from_run(tiny_plain_runs, out, mask_padding=True), out)
    assert "the network differs from this run's in mask_padding (False -> True)" in other_network
    unfinished = _copy(tiny_plain_runs / "ptb" / "san-pe-add" / "seed1", tmp_path / "unfinished")
    (unfinished / "result.json").unlink()
    assert "has not finished" in _refusal(_from_run(tiny_plain_runs, out, start_from=str(unfinished)), out)
    assert "not found" in _refusal(_from_run(tiny_plain_runs, out, start_from=str(tmp_path / "nowhere")), out)


def test_the_command_line_refuses_in_one_line(tiny_plain_runs, tmp_path):
    source = _relabelled(tiny_plain_runs, tmp_path / "conv2d", variant="san-pe-add-conv2d")
    command = tiny_command(tmp_path / "run", variant="san-pe-add") + ["--from", str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--from: san-pe-add cannot start from a san-pe-add-conv2d run" in done.stderr
    assert not (tmp_path / "run").exists()
