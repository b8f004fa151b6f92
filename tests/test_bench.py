"""The benchmark: the fast tagger computes the straightforward port's function, and the
benchmark runs end to end (no timing assertions)."""

import re

import keras
import numpy as np
import pytest

from convatt.data.batching import make_inputs
from convatt.model.parameters import count_parameters
from convatt.model.tagger import build_tagger
from convatt.model.variants import make_config
from convatt.speed.baseline import baseline_inputs, build_baseline, by_path, copy_weights_to_tagger, to_tagger_layout
from convatt.speed.bench import run_benchmark, synthetic_batches

TINY = dict(word_dim=8, char_dim=4, char_filters=4, max_len=10, max_word_len=6)  # d_model 12, head_dim 3
SIZES = (40, 12, 7)  # words, chars, labels
VARIANTS = ["san-pe-add", "san-p-r", "san-pe-add-temp", "san-pe-add-conv", "san-pe-add-conv2d"]


def _gradients(model, x, tags, weights):
    """Gradients of the weighted loss wrt the trainable weights, by path (dropout off)."""
    tf = pytest.importorskip("tensorflow")
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    with tf.GradientTape() as tape:
        loss = loss_fn(tags, model(x, training=False), sample_weight=weights)
    grads = tape.gradient(loss, model.trainable_weights)
    return {w.path: np.asarray(tf.convert_to_tensor(g)) for w, g in zip(model.trainable_weights, grads)}


@pytest.mark.parametrize("variant, preset", [(v, "ud") for v in VARIANTS] + [("san-pe-add-temp", "ptb")])
def test_fast_tagger_matches_the_straightforward_port(variant, preset):
    """Same weights (mapped) -> same predictions and same gradients of the loss wrt every
    trainable weight; the same parameter count. UD trains the word embeddings, PTB freezes them."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the gradient check uses tf.GradientTape")
    config = make_config(preset, variant, **TINY)
    keras.utils.set_random_seed(0)
    baseline = build_baseline(config, *SIZES)
    tagger = build_tagger(config, *SIZES)
    assert count_parameters(tagger) == count_parameters(baseline)
    assert sum(np.prod(w.shape) for w in tagger.trainable_weights) == sum(
        np.prod(w.shape) for w in baseline.trainable_weights
    )
    rng = np.random.default_rng(0)  # move every weight off its initial value (gammas 1, biases 0, ...)
    for w in baseline.weights:
        if "seed_generator" not in w.path:
            w.assign(np.asarray(w) + rng.normal(0, 0.1, w.shape).astype("float32"))
    copy_weights_to_tagger(baseline, tagger, config.num_heads)

    words, chars, tags, weights = synthetic_batches(
        1, *SIZES, n_forms=60, batch_size=5, max_len=config.max_len, max_word_len=config.max_word_len, seed=1
    )[0]
    x_fast, x_base = make_inputs(words, chars), baseline_inputs(words, chars)
    assert x_fast["char_rows"].shape[1] < config.max_len  # the packing does dedupe
    np.testing.assert_allclose(tagger.predict_on_batch(x_fast), baseline.predict_on_batch(x_base), rtol=1e-5, atol=1e-6)

    fast = _gradients(tagger, x_fast, tags, weights)
    base = _gradients(baseline, x_base, tags, weights)
    expected = to_tagger_layout(by_path(baseline, base), tagger, config.num_heads)
    assert sorted(expected) == sorted(fast)  # every trainable weight has its counterpart
    for path, grad in fast.items():
        scale = max(np.abs(expected[path]).max(), 1e-6)
        np.testing.assert_allclose(grad / scale, expected[path] / scale, atol=1e-5, err_msg=path)


@pytest.mark.slow  # the bench's timing output; the fast path's numbers: the first test
def test_run_benchmark_prints_the_speedup_line():
    lines = []
    result = run_benchmark(
        preset="ud",
        variant="san-pe-add-conv",
        steps=2,
        warmup=1,
        batch_size=4,
        sizes=(40, 12, 7, 60),
        log=lines.append,
        num_layers=1,
        num_heads=2,
        **TINY,
    )
    assert re.fullmatch(r"speedup \d+\.\d\dx", lines[-1]), lines
    assert any(line.startswith("baseline") and "tokens/s" in line for line in lines)
    assert any(line.startswith("tagger") and "steps/s" in line for line in lines)
    assert result["speedup"] > 0 and result["tagger"]["tokens_per_s"] > 0


@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.slow  # the bench's timing output; the policies' numbers: tests/test_model.py
def test_run_benchmark_prints_the_mixed_precision_speedup(precision):
    lines = []
    result = run_benchmark(
        preset="ud",
        variant="san-pe-add",
        steps=2,
        warmup=1,
        batch_size=4,
        sizes=(40, 12, 7, 60),
        log=lines.append,
        precision=precision,
        num_layers=1,
        num_heads=2,
        **TINY,
    )
    assert re.fullmatch(rf"speedup \d+\.\d\dx \({precision} over float32\)", lines[-1]), lines
    assert any(line.startswith("float32") and "steps/s" in line for line in lines)
    assert any(line.startswith(precision) and "tokens/s" in line for line in lines)
    assert result["speedup"] == pytest.approx(result["float32"]["step_s"] / result[precision]["step_s"])
    with pytest.raises(ValueError, match="precision"):
        run_benchmark(precision="bfloat16")


@pytest.mark.slow  # the bench's timing output; the fast path's numbers: the first test
def test_variants_beyond_the_port_are_timed_against_san_pe_add_with_memory():
    """Issue 16's variants are not in the port: the reference is SAN+PE[add] by build_tagger, in the
    same process; memory comes from two processes of their own."""
    lines = []
    result = run_benchmark(
        preset="ud",
        variant="san-pe-add-denser",
        steps=2,
        warmup=1,
        batch_size=4,
        sizes=(40, 12, 7, 60),
        log=lines.append,
        memory=True,
        num_layers=1,
        num_heads=2,
        **TINY,
    )
    assert "baseline" not in result and {"reference", "tagger"} <= set(result)
    assert any(line.startswith("reference (build_tagger, san-pe-add") for line in lines)
    assert re.fullmatch(r"step time relative to san-pe-add \d+\.\d\dx", lines[-2]), lines
    for name in ("reference", "tagger"):
        memory = result[name]  # the steps' growth is a part of the peak, which the imports (> 50 MB) reached before
        assert memory["peak_rss_mb"] > 50 and 0 <= memory["step_growth_mb"] < memory["peak_rss_mb"] - 50
    assert any(line.startswith("peak RSS relative to the reference") for line in lines)
    assert result["speedup"] == pytest.approx(result["reference"]["step_s"] / result["tagger"]["step_s"])


@pytest.mark.slow  # the bench's timing output; the fast path's numbers: the first test
def test_a_paper_variant_against_san_pe_add():
    lines = []
    result = run_benchmark(
        preset="ud",
        variant="san-pe-add-conv2d",
        steps=2,
        warmup=1,
        batch_size=4,
        sizes=(40, 12, 7, 60),
        log=lines.append,
        reference="san-pe-add",
        num_layers=1,
        num_heads=2,
        **TINY,
    )
    assert "baseline" not in result and any(line.startswith("reference (build_tagger, san-pe-add") for line in lines)
    assert lines[-2].startswith("step time relative to san-pe-add ")


def test_forms_benchmark_times_the_tagger_against_its_rewritten_twin():
    """`convatt bench --forms` runs end to end on a tiny tagger: both forms timed, ratios logged;
    the twin's four attention layers switched to the rewritten forms."""
    from convatt.speed.forms_bench import forms_variants, run_forms_benchmark, with_rewritten_forms

    assert "san-pe-add-conv2d" in forms_variants() and "san-denser" not in forms_variants()
    keras.utils.set_random_seed(0)
    assert with_rewritten_forms(build_tagger(make_config("ud", "san-pe-add-talking", **TINY), *SIZES)) == 4
    lines = []
    options = dict(steps=2, epochs=2, repeats=1, batch_size=4, sizes=(*SIZES, 60), **TINY)
    result = run_forms_benchmark(["san-pe-add-conv2d"], "ud", log=lines.append, **options)
    figures = result["san-pe-add-conv2d"]
    assert all(figures[form][key] > 0 for form in ("tagger", "rewritten") for key in ("first_epoch_s", "epoch_s"))
    assert re.search(r"san-pe-add-conv2d .* first epoch .*x \| later epochs .*x$", lines[-1])


def test_forms_cli_refuses_the_other_benchmarks_options():
    from convatt.cli import build_parser
    from convatt.cli.bench import _check_options
    from convatt.errors import ConvattError

    parse = build_parser().parse_args
    _check_options(parse(["bench", "--forms", "--preset", "ud", "--repeats", "5", "--quick"]))
    for options, flag in ((["--memory"], "memory"), (["--lengths", "64"], "lengths"), (["--attention"], "attention")):
        with pytest.raises(ConvattError, match=f"--{flag} is not an option of --forms"):
            _check_options(parse(["bench", "--forms", *options]))
    with pytest.raises(ConvattError, match="--repeats is an option of --attention and --forms"):
        _check_options(parse(["bench", "--repeats", "3"]))
