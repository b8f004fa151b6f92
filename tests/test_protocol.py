"""The training protocol: the original code's computations, Keras 3's, and ablations of one item."""

import json

import keras
import numpy as np
import pytest
from helpers import LINES

from convatt.cli import build_parser
from convatt.cli.train import run_config_of
from convatt.data import build_vocabularies, encode_split, load_corpus
from convatt.data.batching import iterate_batches
from convatt.errors import ConvattError
from convatt.model.tagger import build_tagger
from convatt.model.variants import make_config
from convatt.protocol import DEFAULT_PROTOCOL, TrainingProtocol
from convatt.rundir.run_config import DeparturesFromPaper, RunConfig
from convatt.rundir.schema import COMPUTATION, COMPUTATION_BEFORE_SPARSE_FIX


def test_named_protocols_and_labels():
    original, keras3 = TrainingProtocol.named("original"), TrainingProtocol.named("keras3")
    assert DEFAULT_PROTOCOL == original and original.name == "original" and keras3.label() == "keras3"
    assert all(getattr(original, f.name) != getattr(keras3, f.name) for f in TrainingProtocol.items())
    mixed = original.with_overrides(optimizer="keras3-rmsprop", loss=None)
    assert mixed.name is None and mixed.label() == "original with optimizer=keras3-rmsprop"
    assert TrainingProtocol.from_dict(mixed.to_dict()) == mixed
    with pytest.raises(ConvattError, match="optimizer must be one of"):
        original.with_overrides(optimizer="adam")
    with pytest.raises(ConvattError, match="unknown protocol item"):
        TrainingProtocol.from_dict({"optimiser": "keras2-rmsprop"})
    with pytest.raises(ConvattError, match="unknown protocol 'keras2'"):
        TrainingProtocol.named("keras2")


def test_cli_options_set_the_protocol_and_its_items():
    parse = lambda *extra: (
        run_config_of(
            build_parser().parse_args(["train", "--preset", "ud", "--variant", "san", "--out", "x", *extra])
        ).protocol
    )
    assert parse() == DEFAULT_PROTOCOL
    assert parse("--protocol", "keras3") == TrainingProtocol.named("keras3")
    ablation = parse("--relative-bias", "lookup", "--early-stopping", "exact")
    assert (ablation.relative_bias, ablation.early_stopping, ablation.optimizer) == (
        "lookup",
        "exact",
        "keras2-rmsprop",
    )


def test_runs_before_protocols_load_as_keras3():
    old = {"preset": "ud", "variant": "san", "seed": 1, "data": "d", "out": "o", "epochs": 100}  # no protocol
    config = RunConfig.from_json(old)
    assert config.protocol == TrainingProtocol.named("keras3") and config.setting == DeparturesFromPaper(
        protocol="keras3"
    )
    new = RunConfig(preset="ud", variant="san", seed=1, data="d", out="o")
    assert config.differences(new) == ["protocol: keras3 -> original", "computation: 1 -> 2"]
    assert RunConfig.from_json(json.loads(json.dumps(new.to_json()))) == new
    assert new.setting.is_paper and new.setting.label() == ""
    assert DeparturesFromPaper("keras3", True, 200, 5).label() == "keras3, mask, limit 200, max 5 epochs"


def test_an_item_an_older_run_did_not_record_takes_its_protocols_choice():
    keras3 = TrainingProtocol.named("keras3").to_dict()
    del keras3["oov_vector"]
    assert TrainingProtocol.from_dict(keras3) == TrainingProtocol.named("keras3")
    original = TrainingProtocol.named("original").to_dict()
    del original["oov_vector"]
    assert TrainingProtocol.from_dict(original) == TrainingProtocol.named("original")
    mixed = {**original, "optimizer": "keras3-rmsprop"}
    assert TrainingProtocol.from_dict(mixed).oov_vector == "oov-word"


def test_runs_before_the_sparse_rmsprop_fix_are_another_setting():
    # trained under the original protocol before an embedding's repeated rows were summed
    # before squaring: never averaged with later runs, and never resumed by this code
    before = RunConfig(preset="ud", variant="san", seed=1, data="d", out="o").to_json()
    del before["computation"]
    config = RunConfig.from_json(before)
    assert config.computation == COMPUTATION_BEFORE_SPARSE_FIX < COMPUTATION
    assert config.setting.label() == "RMSprop per slice" and not config.setting.is_paper
    now = RunConfig(preset="ud", variant="san", seed=1, data="d", out="o")
    assert now.differences(config) == [f"computation: {COMPUTATION} -> {COMPUTATION_BEFORE_SPARSE_FIX}"]
    # Keras 3's RMSprop was never ours: its runs computed the same before and after
    keras3 = RunConfig.from_json({**before, "protocol": TrainingProtocol.named("keras3").to_dict()})
    assert keras3.setting == DeparturesFromPaper(protocol="keras3")


def _padded_batch(protocol: TrainingProtocol):
    corpus = load_corpus("ud", LINES)
    vocab = build_vocabularies(corpus, "ud", protocol)
    split = encode_split(corpus.dev[:8], vocab)
    config = make_config("ud", "san-p-r", protocol)
    keras.utils.set_random_seed(0)
    model = build_tagger(
        config, len(vocab.words), len(vocab.chars), len(vocab.tags), jit_compile=False, protocol=protocol
    )
    x, y, w = next(iterate_batches(split, 8))
    return model, x, y, w


@pytest.mark.parametrize("name", ["original", "keras3"])
def test_loss_normalisation_by_hand(name):
    model, x, y, w = _padded_batch(TrainingProtocol.named(name))
    assert 0 < w.mean() < 0.8  # a padded batch
    probs = np.clip(model.predict_on_batch(x).astype("float64"), 1e-7, 1 - 1e-7)
    cross_entropy = -np.log(np.take_along_axis(probs, y[..., None], axis=-1))[..., 0]
    denominator = w.sum() if name == "original" else w.size  # real tokens / all positions
    expected = (cross_entropy * w).sum() / denominator
    loss = model.test_on_batch(x, y, sample_weight=w, return_dict=True)["loss"]
    assert float(loss) == pytest.approx(expected, rel=1e-4)


def test_residual_adds_the_dropped_tensor_in_the_original():
    for protocol, source in (
        (TrainingProtocol.named("original"), "dropout_1"),
        (TrainingProtocol.named("keras3"), "layer_0_input"),
    ):
        model = build_tagger(make_config("ud", "san", protocol), 50, 20, 10, jit_compile=False, protocol=protocol)
        residual = model.get_layer("residual_1")
        assert residual._inbound_nodes[0].input_tensors[0]._keras_history.operation.name == source


def test_network_items_reach_the_layers():
    original = build_tagger(make_config("ud", "san-p-r"), 50, 20, 10, jit_compile=False)
    attention = original.get_layer("attention_1")
    assert attention.relative_bias_parameterization == "circulant"
    assert attention.get_config()["kernel_initializer"]["class_name"] == "GlorotNormal"
    assert type(original.optimizer).__name__ == "RMSpropKeras2"
    keras3 = build_tagger(
        make_config("ud", "san-p-r", TrainingProtocol.named("keras3")),
        50,
        20,
        10,
        jit_compile=False,
        protocol=TrainingProtocol.named("keras3"),
    )
    assert keras3.get_layer("attention_1").relative_bias_parameterization == "lookup"
    assert type(keras3.optimizer) is keras.optimizers.RMSprop
