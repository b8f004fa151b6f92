"""The causal transformer's configuration: a named variant (`convatt.model.variants`) at the
scale of its preset. The scales are chosen so that one run takes minutes on a 2-core CPU
(docs/results/toy_task.md and docs/results/char_lm.md give the measured times)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from convatt.data.char_text import CHUNK_LEN
from convatt.data.formats import DataFormat, data_format
from convatt.errors import ConvattError
from convatt.model.variants import CHARLM_VARIANTS, TOY_VARIANTS, VARIANTS, Variant, check_variant

SEQUENCE_VARIANTS = list(dict.fromkeys(CHARLM_VARIANTS + TOY_VARIANTS))
"""The variants a causal model supports: the paper's (bar SAN and PE[con]) and the attention ones."""


@dataclass(frozen=True)
class SequenceModelConfig:
    """A pre-LayerNorm causal transformer: embeddings (+ learned positions for PE[add]),
    `num_layers` blocks of causal attention and a GELU feed-forward, logits over the symbols."""

    preset: str
    variant: str
    max_len: int  # the sequence length (positions, +P, +R and +Conv's weights)
    num_layers: int = 2
    d_model: int = 64
    num_heads: int = 2
    ff_dim: int = 256
    dropout: float = 0.0
    learning_rate: float = 1e-3
    pre_softmax_kernel: tuple[int, int] = (2, 9)  # MTA's key-query convolution: 2 queries x 9 keys
    post_softmax_kernel: int = 3  # the paper's +Conv / +Conv2d kernel

    @property
    def spec(self) -> Variant:
        return VARIANTS[self.variant]

    def replace(self, **changes) -> SequenceModelConfig:
        return dataclasses.replace(self, **changes)


def _toy_len() -> int:
    from convatt.data.find_block import FindBlockSpec

    spec = FindBlockSpec.load(data_format("toy").default_data)
    return spec.input_len + spec.block_len - 1


SCALES = {
    "find-block": dict(num_layers=2, d_model=64, num_heads=2, ff_dim=256, dropout=0.0),
    "char-lm": dict(num_layers=2, d_model=64, num_heads=2, ff_dim=256, dropout=0.1),
}


def check_sequence_run(preset: str, variant: str) -> DataFormat:
    """`preset`'s data format if it is a causal sequence task and `variant` a causal model builds,
    else a ConvattError saying what it takes."""
    fmt = data_format(preset)
    if not fmt.is_sequence_task:
        raise ConvattError(f"preset {preset!r} is a tagging preset, not a causal sequence task")
    check_variant(variant)
    if variant not in SEQUENCE_VARIANTS:
        raise ConvattError(
            f"variant {variant!r} is not built as a causal model; the {preset} preset takes "
            f"{', '.join(SEQUENCE_VARIANTS)}"
        )
    return fmt


def make_sequence_config(preset: str, variant: str, max_len: int | None = None) -> SequenceModelConfig:
    """The configuration of `variant` at `preset`'s scale; `max_len`: the data's sequence length
    (default: the embedded data's)."""
    fmt = check_sequence_run(preset, variant)
    if max_len is None:
        max_len = CHUNK_LEN if fmt.task == "char-lm" else _toy_len()
    return SequenceModelConfig(preset, variant, max_len, **SCALES[fmt.task])
