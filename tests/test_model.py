"""The tagger's architecture: Table 1c parameter counts, shapes, save/load."""

import keras
import numpy as np
import pandas as pd
import pytest
from helpers import ROOT

from convatt.data.batching import make_inputs, rows_per_sentence
from convatt.errors import ConvattError
from convatt.model.parameters import count_parameters
from convatt.model.tagger import build_tagger
from convatt.model.variants import PAPER_VARIANTS, make_config

PTB_SIZES = (20_002, 84, 47)  # REFERENCE.md: 20,000 words + PAD + OOV, 84 chars, 45 tags + PAD + OOV
# Table 1c's rows: which variant adds the modification to which.
TABLE_1C = {
    "+PE[add]": ("san-pe-add", "san"),
    "+P": ("san-p", "san"),
    "+R": ("san-r", "san"),
    "+Temp": ("san-pe-add-temp", "san-pe-add"),
    "+Conv": ("san-pe-add-conv", "san-pe-add"),
    "+Conv2d": ("san-pe-add-conv2d", "san-pe-add"),
}


@pytest.fixture(scope="module")
def ptb_counts():
    return {
        v: count_parameters(build_tagger(make_config("ptb", v), *PTB_SIZES, jit_compile=False)) for v in PAPER_VARIANTS
    }


def test_table_1c_parameter_counts(ptb_counts):
    paper = pd.read_csv(ROOT / "convatt" / "embedded" / "paper" / "paper_table1c_parameters.csv")
    paper = dict(zip(paper["model"], paper["parameters_ptb"]))
    assert ptb_counts["san"] == paper["SAN"] == 7_691_823
    for row, (variant, base) in TABLE_1C.items():
        assert ptb_counts[variant] - ptb_counts[base] == paper[row], row


def test_pe_con_widens_the_model(ptb_counts):
    # PE[con]: 60 x 64 position table; d_model 428 instead of 364 in attention and output.
    d0, d1 = 364, 428
    expected = 60 * 64 + 4 * 3 * (d1 * d1 - d0 * d0) + 2 * (d1 - d0) * 47
    assert ptb_counts["san-pe-con"] - ptb_counts["san"] == expected


def test_ud_preset_sizes():
    config = make_config("ud", "san-pe-add")
    assert config.d_model == 192 and make_config("ud", "san-pe-con").d_model == 256
    model = build_tagger(config, 1000, 50, 19, jit_compile=False)
    word = model.get_layer("word_embedding")
    assert word.trainable and word.embeddings.shape == (1000, 128)
    assert (
        not build_tagger(make_config("ptb", "san"), 100, 20, 10, jit_compile=False)
        .get_layer("word_embedding")
        .trainable
    )


def _eager(model: keras.Model) -> keras.Model:
    """`model` running its predict and train steps eagerly: tracing them (several seconds a model,
    more with Conv2d attention) costs far more than a few steps on these tiny batches, and what
    these tests check (weights, dtypes, masks, round trips) does not depend on tracing; the real
    runs of test_training train the tagger in graph mode."""
    model.run_eagerly = True
    return model


def _batch(rng, n=3, t=60, tc=20, n_words=50, n_chars=12, length=(5, 25)):
    words = np.zeros((n, t), "int32")
    chars = np.zeros((n, t, tc), "int32")
    for i in range(n):
        m = rng.integers(*length)
        words[i, :m] = rng.integers(1, n_words, m)
        chars[i, :m, : rng.integers(1, tc)] = rng.integers(1, n_chars)
    return words, chars


@pytest.mark.parametrize(
    "variant", ["san-p-r", "san-pe-add-conv", "san-pe-con", "san-shaw", "san-sin-add", "san-alibi"]
)
def test_deduplicated_chars_give_the_same_output(variant):
    rng = np.random.default_rng(0)
    model = _eager(build_tagger(make_config("ptb", variant), 50, 12, 9, jit_compile=False))
    words, chars = _batch(rng)
    packed, plain = make_inputs(words, chars, dedupe=True), make_inputs(words, chars, dedupe=False)
    few = make_inputs(words, chars, few_shapes=True)
    assert packed["char_rows"].shape[1] < few["char_rows"].shape[1] < plain["char_rows"].shape[1]
    out = model.predict_on_batch(packed)
    assert out.shape == (3, 60, 9)
    np.testing.assert_allclose(out, model.predict_on_batch(plain), atol=1e-6)
    np.testing.assert_allclose(out, model.predict_on_batch(few), atol=1e-6)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize(
    "n_rows, few_shapes, expected",
    [
        (1, False, 4),
        (128, False, 4),
        (129, False, 8),
        (1000, False, 32),
        (1920, False, 60),
        (1, True, 8),
        (257, True, 16),
        (513, True, 24),
        (1537, True, 60),
        (1920, True, 60),
    ],
)
def test_rows_per_sentence_rounds_up_to_few_shapes(n_rows, few_shapes, expected):
    assert rows_per_sentence(n_rows, 32, 60, few_shapes) == expected


def test_word_vectors_are_loaded_and_checked():
    config = make_config("ptb", "san")
    vectors = np.random.default_rng(0).normal(size=(30, 300)).astype("float32")
    model = build_tagger(config, 30, 10, 5, word_vectors=vectors, jit_compile=False)
    np.testing.assert_array_equal(model.get_layer("word_embedding").get_weights()[0], vectors)
    with pytest.raises(ValueError, match="shape"):
        build_tagger(config, 31, 10, 5, word_vectors=vectors)


def test_save_and_load_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    model = _eager(
        build_tagger(make_config("ud", "san-pe-add-conv2d", mask_padding=True), 40, 12, 7, jit_compile=False)
    )
    x = make_inputs(*_batch(rng, n_words=40))
    model.save(tmp_path / "m.keras")
    again = _eager(keras.saving.load_model(tmp_path / "m.keras"))
    np.testing.assert_allclose(model.predict_on_batch(x), again.predict_on_batch(x), atol=1e-6)


def test_mask_padding_changes_attention_only_when_asked():
    rng = np.random.default_rng(2)
    words, chars = _batch(rng)
    x = make_inputs(words, chars)
    plain = _eager(build_tagger(make_config("ptb", "san-pe-add"), 50, 12, 9, jit_compile=False))
    masked = _eager(build_tagger(make_config("ptb", "san-pe-add", mask_padding=True), 50, 12, 9, jit_compile=False))
    masked.set_weights(plain.get_weights())
    a, b = plain.predict_on_batch(x), masked.predict_on_batch(x)
    real = words != 0
    assert not np.allclose(a[real], b[real], atol=1e-4)  # pads no longer take part


def test_unknown_names_suggest_the_nearest():
    with pytest.raises(ConvattError, match="Did you mean 'san-pe-add-conv2d'"):
        make_config("ptb", "san-pe-add-conv-2d")
    with pytest.raises(ConvattError, match="Did you mean 'ud'"):
        make_config("UD", "san")


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_tagger(policy, tmp_path):
    """Every layer computes in the policy's dtype except `tags` (float32 probabilities for the
    loss); weights stay float32 and are the float32 model's; predictions stay close to it;
    float16 gets loss scaling; a training step is finite; `.keras` keeps the policies."""
    rng = np.random.default_rng(3)
    config = make_config("ud", "san-pe-add-conv2d", word_dim=8, char_dim=4, char_filters=4, max_len=10, max_word_len=6)
    reference = _eager(build_tagger(config, 40, 12, 7, jit_compile=False))
    model = build_tagger(config, 40, 12, 7, jit_compile=False, dtype_policy=policy)
    if policy != "mixed_float16":  # float16's loss-scaled step stays traced: the suite's only one in a graph
        _eager(model)
    compute = keras.dtype_policies.get(policy).compute_dtype
    for layer in model.layers:
        if not isinstance(layer, keras.layers.InputLayer):
            assert layer.compute_dtype == ("float32" if layer.name == "tags" else compute), layer.name
    assert {keras.backend.standardize_dtype(w.dtype) for w in model.weights if "seed" not in w.path} == {"float32"}
    assert count_parameters(model) == count_parameters(reference)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer) == (policy == "mixed_float16")
    assert not isinstance(reference.optimizer, keras.optimizers.LossScaleOptimizer)

    model.set_weights(reference.get_weights())
    words, chars = _batch(rng, n_words=40, length=(3, 10), t=10, tc=6)
    x = make_inputs(words, chars)
    out = model.predict_on_batch(x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference.predict_on_batch(x), atol=0.03)
    np.testing.assert_allclose(out.sum(-1), 1.0, atol=1e-5)
    tags = rng.integers(2, 7, words.shape)
    loss = model.train_on_batch(x, tags, sample_weight=(words != 0).astype("float32"))
    assert np.isfinite(np.asarray(loss, dtype=float)).all()

    model.save(tmp_path / "m.keras")
    again = _eager(keras.saving.load_model(tmp_path / "m.keras"))
    assert again.get_layer("attention_1").dtype_policy.name == policy
    assert again.get_layer("attention_1")._conv.dtype_policy.name == policy
    # two programs (the reloaded model eager, the original traced): oneDNN may round float16 in
    # another order (an ulp, 2^-11, moves a probability by far less than 5e-4); a weight lost
    # in the file moves them by 1e-2 and more
    np.testing.assert_allclose(again.predict_on_batch(x), model.predict_on_batch(x), atol=5e-4)


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="dtype_policy"):
        build_tagger(make_config("ud", "san"), 40, 12, 7, dtype_policy="bfloat16")


@pytest.mark.parametrize(
    "variant",
    ["san-pe-add-conv2d-pre", "san-pe-add-talking", "san-pe-add-denser", "san-denser", "san-pe-add-narrowing"],
)
def test_attention_variants_build_save_and_load(variant, tmp_path):
    """Issue 16: each attention variant trains one step, masks padding, and survives a .keras round trip."""
    rng = np.random.default_rng(3)
    # d_model 36: narrowing splits it unevenly over 8, 16 and 32 heads, as it splits 364.
    config = make_config("ptb", variant, mask_padding=True, word_dim=16, char_dim=4, char_filters=20, max_len=12)
    model = _eager(build_tagger(config.replace(max_word_len=6), 50, 12, 9, jit_compile=False))
    words, chars = _batch(rng, t=12, tc=6, length=(3, 10))
    x = make_inputs(words, chars)
    model.train_on_batch(x, rng.integers(1, 9, words.shape), sample_weight=(words != 0).astype("float32"))
    model.save(tmp_path / "m.keras")
    again = _eager(keras.saving.load_model(tmp_path / "m.keras"))
    np.testing.assert_allclose(model.predict_on_batch(x), again.predict_on_batch(x), atol=1e-6)


def test_narrowing_doubles_the_heads_and_denser_replaces_every_layer():
    from convatt.layers import DenserSelfAttention, NarrowingSelfAttention

    narrowing = build_tagger(make_config("ptb", "san-pe-add-narrowing"), 50, 12, 9, jit_compile=False)
    layers = [narrowing.get_layer(f"attention_{i}") for i in range(1, 5)]
    assert all(isinstance(layer, NarrowingSelfAttention) for layer in layers)
    assert [layer.num_heads for layer in layers] == [4, 8, 16, 32]
    denser = build_tagger(make_config("ud", "san-denser"), 50, 12, 9, jit_compile=False)
    assert all(isinstance(denser.get_layer(f"attention_{i}"), DenserSelfAttention) for i in range(1, 5))
    assert "position_embedding" not in [layer.name for layer in denser.layers]


def _attention_configs(model: str, variant: str) -> list[dict]:
    """The attention layers' configs, first layer first, of a tagger or a causal model of `variant`."""
    if model == "tagger":
        built, n_layers = build_tagger(make_config("ptb", variant), 50, 12, 9, jit_compile=False), 4
    else:
        from convatt.sequence.config import make_sequence_config
        from convatt.sequence.model import build_causal_model

        built, n_layers = build_causal_model(make_sequence_config("charlm", variant, 16), 10, jit_compile=False), 2
    return [built.get_layer(f"attention_{i}").get_config() for i in range(1, n_layers + 1)]


@pytest.mark.parametrize("model", ["tagger", "causal"])
def test_p_and_r_act_in_the_first_layer_only_and_temperature_in_every_layer(model):
    """One rule (`attention_options`) for both models: +P and +R in the first layer, +Temp everywhere."""
    p_r = _attention_configs(model, "san-p-r")
    assert [(c["position_interaction"], c["relative_bias"]) for c in p_r] == [(True, True)] + [(False, False)] * (
        len(p_r) - 1
    )
    assert not any(c["temperature"] for c in p_r)
    assert all(c["temperature"] for c in _attention_configs(model, "san-pe-add-temp"))
