"""The guard of the tagger's computation: every variant's tagger trains the same bits as
with the attention of commit 7af1535 (`tagger_reference.ReferenceSelfAttention`), whose
operations gave the published results (docs/results.md).

A deliberate exception to the rule "no float of two different programs asserted exactly": the
two programs must be one computation. The layers' faster kernels (a convolution as shifted
multiply-adds, a batched product for the talking heads, Shaw's skews) give the same values to
float rounding only, and a change of float order moves a tagger's accuracies after a few
hundred steps (+Conv2d: 89.55 -> 89.33 on a held-out treebank) while a short run's numbers
still agree to their printed digits. So here both taggers train on the same machine, in the
same process, from the same seed, and every loss and every weight after the steps must be
equal bit for bit: `MultiHeadAttention` may take any faster form, the tagger's `SelfAttention`
only 7af1535's operations (or a change to them that re-runs the results tables).

Under `make test` the file runs under TensorFlow and, as a `test_layers_*` file, again under
JAX (the tagger compiled by XLA there) for the variants whose attention differs; `make test-all`
runs every variant under both. The variants of `DenserSelfAttention` (+Denser) are
not here: they use no `SelfAttention`.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from tagger_reference import ReferenceSelfAttention

from convatt.data.batching import make_inputs
from convatt.layers import SelfAttention
from convatt.layers.forms import drop_in_forms, on_accelerator
from convatt.model.tagger import build_tagger
from convatt.model.variants import VARIANTS, make_config
from convatt.speed.bench import synthetic_batches

pytestmark = [
    pytest.mark.jax_too,
    # On a GPU the same program twice may differ: XLA's scatter-adds (the gathers' gradients) sum in
    # no fixed order there.
    pytest.mark.skipif(on_accelerator(), reason="bit-identical training needs a deterministic device (a CPU)"),
]

# A tiny tagger: d_model 16 (4 heads of 4), 12 tokens, 2 layers; 4 steps of 6 sentences.
TINY = dict(word_dim=8, char_dim=4, char_filters=8, max_len=12, max_word_len=6, num_layers=2, shaw_clip=3)
SIZES = (40, 12, 7, 60)  # words, chars, labels, surface forms
STEPS, BATCH = 4, 6
TAGGER_VARIANTS = [name for name, variant in VARIANTS.items() if variant.attention != "denser"]
# Under JAX, make test trains the variants whose attention differs; the slow tier the rest: plain
# attention with other inputs (PE, sinusoids), +P and +R alone (san-p-r has both), a 2x9 kernel.
JAX_SLOW_TIER = {"san", "san-pe-con", "san-pe-add", "san-p", "san-r", "san-sin-add", "san-pe-add-conv2d-2x9"}


def _tagger_variants() -> list:
    jax = keras.backend.backend() == "jax"
    return [pytest.param(v, marks=pytest.mark.slow) if jax and v in JAX_SLOW_TIER else v for v in TAGGER_VARIANTS]


def _train(variant: str, attention_class, monkeypatch) -> tuple[list[float], dict[str, bytes], int]:
    """(losses, {weight path: its bytes after the steps}, attention layers of `attention_class`)
    of the tiny tagger of `variant` whose attention layers are `attention_class`, seed 1."""
    with monkeypatch.context() as patch:
        for module in ("convatt.model.tagger", "convatt.layers.narrowing_self_attention"):
            patch.setattr(f"{module}.SelfAttention", attention_class)
        keras.utils.set_random_seed(1)
        model = build_tagger(make_config("ud", variant, **TINY), *SIZES[:3])
    few_shapes = bool(model.jit_compile)
    losses = []
    for words, chars, tags, weights in synthetic_batches(STEPS, *SIZES, BATCH, TINY["max_len"], 6, seed=3):
        x = make_inputs(words, chars, few_shapes=few_shapes)
        losses.append(float(model.train_on_batch(x, tags, sample_weight=weights)[0]))
    layers = [layer for top in model.layers for layer in top._flatten_layers() if type(layer) is attention_class]
    return losses, {w.path: keras.ops.convert_to_numpy(w).tobytes() for w in model.weights}, len(layers)


@pytest.mark.parametrize("variant", _tagger_variants())
def test_the_tagger_trains_the_bits_of_7af1535s_attention(variant, monkeypatch):
    losses, weights, layers = _train(variant, SelfAttention, monkeypatch)
    expected_losses, expected_weights, reference_layers = _train(variant, ReferenceSelfAttention, monkeypatch)
    assert layers == reference_layers > 0  # both taggers built their attention from the class given
    assert np.isfinite(losses).all() and losses[-1] != losses[0]  # it trained
    assert losses == expected_losses, f"{variant}: the losses differ from 7af1535's computation"
    assert list(weights) == list(expected_weights)
    differ = [path for path in weights if weights[path] != expected_weights[path]]
    assert not differ, f"{variant}: weights differ from 7af1535's computation: {differ}"


class _RewrittenSelfAttention(SelfAttention):
    """`SelfAttention` with `MultiHeadAttention`'s forms (`drop_in_forms`): the same values to float
    rounding, in another float order (the tagger's attention at commit b825de3 took some)."""

    choose_forms = staticmethod(drop_in_forms)


def test_the_guard_sees_a_change_of_float_order(monkeypatch):
    """The comparison above is fine enough to tell a mere change of float order: +Conv2d with the
    rewritten forms trains other bits than 7af1535's (a guard that such a change slipped past,
    as past the regression test's tolerance, would guard nothing)."""
    losses, weights, _ = _train("san-pe-add-conv2d", _RewrittenSelfAttention, monkeypatch)
    expected_losses, expected_weights, _ = _train("san-pe-add-conv2d", ReferenceSelfAttention, monkeypatch)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-4)  # the same values ...
    assert any(weights[path] != expected_weights[path] for path in weights)  # ... not the same bits
