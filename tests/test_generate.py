"""`convatt generate`: cached decoding = whole-prefix decoding for every char-LM variant; the
CLI's text, speed line and one-line errors."""

import json
import shutil
from dataclasses import dataclass

import numpy as np
import pytest

from convatt.inference.generation import CausalSteps, Sampling, generate
from convatt.model.variants import CHARLM_VARIANTS
from convatt.sequence.config import make_sequence_config
from convatt.sequence.model import build_causal_model
from tests.test_sequence_tasks import LINES, tiny_run

N_SYMBOLS, MAX_LEN = 12, 16


@pytest.mark.jax_too
@pytest.mark.parametrize("variant", CHARLM_VARIANTS)
def test_cached_greedy_decoding_is_whole_prefix_decoding(variant):
    config = make_sequence_config("charlm", variant, max_len=MAX_LEN).replace(d_model=16, ff_dim=32)
    model = build_causal_model(config, N_SYMBOLS, jit_compile=False)
    rng = np.random.default_rng(0)
    for weight in model.weights:  # away from identities and zeros: every weight matters
        weight.assign(rng.normal(0.0, 0.5, weight.shape).astype("float32"))
    steps = CausalSteps(model)
    prompt = [2, 5, 3, 7]
    cached = generate(steps, prompt, MAX_LEN + 1 - len(prompt), Sampling(greedy=True))
    whole = generate(steps, prompt, MAX_LEN + 1 - len(prompt), Sampling(greedy=True), use_cache=False)
    assert cached.ids == whole.ids
    ids = prompt + cached.ids[:-1]
    assert len(set(ids)) > 3, "a varied text: the comparison says something"
    np.testing.assert_allclose(steps.cached_logits(ids[-1:], len(ids) - 1), steps.whole_prefix_logits(ids), atol=1e-4)


@pytest.fixture(scope="module")
def charlm_run(tmp_path_factory):
    from convatt.training.trainer import train_run

    out = tmp_path_factory.mktemp("generate") / "lm"
    train_run(tiny_run("charlm", LINES, out, epochs=1), log=lambda line: None)
    return out


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def convatt(capsys):
    """`convatt ARGS` in this process (fast): its exit code and output."""
    from convatt.cli import main

    def run(*args) -> Done:
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Done(code, captured.out, captured.err)

    return run


def test_the_cli_writes_the_prompt_and_its_continuation_the_same_with_and_without_the_cache(charlm_run, convatt):
    cached = convatt("generate", charlm_run, "--prompt", "The ", "--length", 12, "--greedy")
    whole = convatt("generate", charlm_run, "--prompt", "The ", "--length", 12, "--greedy", "--no-cache")
    assert cached.returncode == 0, cached.stderr
    assert cached.stdout == whole.stdout and cached.stdout.startswith("The ") and len(cached.stdout) == 4 + 12 + 1
    assert "symbols/s (cached)" in cached.stderr and "(whole prefix)" in whole.stderr
    sampled = convatt("generate", charlm_run, "--prompt", "The ", "--length", 12, "--top-k", 5, "--seed", 3)
    assert sampled.returncode == 0 and sampled.stdout.startswith("The "), sampled.stderr


def _tagger_clone(run, tmp_path):
    clone = shutil.copytree(run, tmp_path / "tagger", ignore=shutil.ignore_patterns("checkpoint"))
    config = json.loads((clone / "config.json").read_text())
    (clone / "config.json").write_text(json.dumps({**config, "preset": "ptb"}))
    return clone


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompt", ""], "--prompt is empty"),
        (["--prompt", "ab\u00e6"], "characters the run never saw: '\u00e6'"),
        (["--prompt", "The", "--length", 5000], "exceed the model's"),
        (["--prompt", "The", "--temperature", 0], "--temperature takes a number > 0"),
        (["--prompt", "The", "--tagger"], "is a tagger, not a causal model"),
    ],
)
def test_bad_requests_are_one_line_and_exit_2(charlm_run, convatt, tmp_path, args, message):
    run = charlm_run
    if "--tagger" in args:
        run, args = _tagger_clone(charlm_run, tmp_path), args[:-1]
    done = convatt("generate", run, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_decoding_benchmark_prints_both_rates_and_their_ratio(capsys):
    from convatt.speed.generation import main

    main(["--lengths", "12", "--steps", "2", "--variants", "san-pe-add-conv2d-pre"])
    row = capsys.readouterr().out.splitlines()[-1].split("|")
    assert row[1].strip() == "san-pe-add-conv2d-pre" and row[2].strip() == "12"
    assert float(row[3]) > 0 and float(row[4]) > 0 and row[5].strip().endswith("x")
