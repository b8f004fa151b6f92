"""`convatt generate`: cached decoding = whole-prefix decoding for every char-LM variant; the
CLI's text, speed line and one-line errors."""

import json
import shutil
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
from float_order import assert_clear_choices
from helpers import ROOT
from test_sequence_tasks import LINES, tiny_run

from convatt.inference.generation import CausalSteps, Sampling, generate
from convatt.model.variants import CHARLM_VARIANTS
from convatt.sequence.config import make_sequence_config
from convatt.sequence.model import build_causal_model

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
    assert_clear_choices([steps.whole_prefix_logits(prompt + whole.ids[:k]) for k in range(len(whole.ids))])
    assert cached.ids == whole.ids  # exactly: every choice is clear of float order (above)
    ids = prompt + cached.ids[:-1]
    assert len(set(ids)) > 3, "a varied text: the comparison says something"
    np.testing.assert_allclose(steps.cached_logits(ids[-1:], len(ids) - 1), steps.whole_prefix_logits(ids), atol=1e-4)


@pytest.fixture(scope="module")
def charlm_run(tmp_path_factory):
    from convatt.training.trainer import train_run

    out = tmp_path_factory.mktemp("generate") / "charlm" / "san-pe-add-conv2d-pre" / "seed3"  # as make lm-all lays out
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
    assert "symbols/s (cached), after" in cached.stderr and "(whole prefix), after" in whole.stderr
    assert cached.stderr.strip().endswith("s tracing"), cached.stderr  # the rate is decoding's, tracing apart
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
        (["--prompt", "The", "--temperature", 0], "--temperature takes a finite number > 0"),
        (["--prompt", "The", "--temperature", "nan"], "--temperature takes a finite number > 0"),
        (["--prompt", "The", "--seed", -1], "--seed takes a whole number >= 0"),
        (["--prompt", "The " * 40, "--length", 1], "shorten --prompt to at most 128 symbols"),
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


@pytest.mark.slow  # a timing benchmark; cached = whole-prefix decoding: the first test
def test_the_decoding_benchmark_prints_both_rates_and_their_ratio(capsys):
    from convatt.speed.generation import main

    main(["--lengths", "12", "--steps", "2", "--variants", "san-pe-add-conv2d-pre"])
    row = capsys.readouterr().out.splitlines()[-1].split("|")
    assert row[1].strip() == "san-pe-add-conv2d-pre" and row[2].strip() == "12"
    assert float(row[3]) > 0 and float(row[4]) > 0 and row[5].strip().endswith("x")


def _lm_samples():
    sys.path.insert(0, str(ROOT / "experiments"))
    import lm_samples  # experiments/lm_samples.py

    return lm_samples


@pytest.mark.slow  # decoding every test prompt twice; the CLI's both ways: the test above
def test_the_samples_script_writes_each_test_prompts_text_cached_and_by_the_whole_prefix(charlm_run, tmp_path):
    from convatt.data.char_text import split_text
    from convatt.data.ud import read_ud

    lm_samples = _lm_samples()
    runs = charlm_run.parents[2]
    argv = ["collect", "--runs", runs, "--seed", 3, "--prompts", 2, "--length", 6, "--out", tmp_path]
    assert lm_samples.main([str(a) for a in argv]) == 0
    samples = pd.read_csv(tmp_path / "lm_samples.csv", keep_default_na=False)
    assert len(samples) == 2 and samples["identical"].all() and (samples["cached"].str.len() == 6).all()
    assert (samples["largest_logit_difference"] < 1e-4).all() and samples["largest_logit_difference"].notna().all()
    test_text = "\n" + split_text(read_ud(LINES).test[:48])
    assert all(f"\n{prompt}" in test_text for prompt in samples["prompt"])  # each begins a test sentence
    page = (tmp_path / "lm_samples.md").read_text()
    assert "| SAN+PE[add]+Conv2d[pre] |" in page and "2 of 2 texts are the same" in page


def test_the_samples_page_shows_a_text_that_differs_without_the_cache_and_newlines_as_marks():
    sample = dict(variant="san-pe-add", seed=1, source_commit="abc1234", test_bits_per_symbol=3.6, prompt="The ")
    texts = {"cached": "a|b\nc", "whole_prefix": "a|b\nd", "identical": False, "largest_logit_difference": 0.25}
    page = _lm_samples().render(pd.DataFrame([{**sample, **texts}]))
    assert "| `The ` | `a\\|b⏎c` | no: `a\\|b⏎d` (largest logit difference 2.5e-01) |" in page
    assert "0 of 1 texts are the same" in page
    assert "(seed 1; the code that trained them: commit abc1234)" in page


def test_the_samples_page_reads_a_commit_and_a_prompt_of_digits_back_as_text(tmp_path):
    """A commit such as 70065e4 is a number to pandas' CSV reader (7.0065e8), a prompt "12" too."""
    lm_samples = _lm_samples()
    sample = dict(variant="san-pe-add", seed=1, source_commit="70065e4", test_bits_per_symbol=3.6, prompt="12")
    texts = {"cached": "345", "whole_prefix": "345", "identical": True, "largest_logit_difference": 0.0}
    pd.DataFrame([{**sample, **texts}]).to_csv(tmp_path / f"{lm_samples.NAME}.csv", index=False)
    lm_samples.write_page(tmp_path)
    page = (tmp_path / f"{lm_samples.NAME}.md").read_text()
    assert "the code that trained them: commit 70065e4)" in page and "| `12` | `345` |" in page


def test_the_samples_script_without_finished_runs_is_one_line(tmp_path, capsys):
    assert _lm_samples().main(["collect", "--runs", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"lm_samples: error: no finished run RUNS/charlm/<variant>/seed1 (result.json) under {tmp_path}"
    )


def test_the_progress_line_appears_by_time_not_by_length(capsys):
    """A short generation prints no line; one that takes long shows it, at most every PROGRESS_EVERY."""
    from convatt.cli.generate import PROGRESS_AFTER, PROGRESS_EVERY, ProgressLine

    quick = ProgressLine()
    for done in range(1, 50):
        quick(done, done * PROGRESS_AFTER / 100)
    quick.close()
    assert capsys.readouterr().err == ""
    slow = ProgressLine()
    times = [PROGRESS_AFTER * 0.9, PROGRESS_AFTER, PROGRESS_AFTER + PROGRESS_EVERY / 2, PROGRESS_AFTER + PROGRESS_EVERY]
    for done, seconds in enumerate(times, 1):
        slow(done, seconds)
    slow.close()
    shown = capsys.readouterr().err
    assert shown.count("\rgenerated") == 0 and shown.count("generated ") == 2, repr(shown)
    assert "generated 2 symbols" in shown and "generated 4 symbols" in shown and shown.endswith("\n")
