"""The named model variants of the paper (Table 2) and the tagger's configuration; the
presets' word embeddings (Table 1b) are attributes of their data formats (`convatt.data.formats`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from convatt.data.corpus import MAX_LEN, MAX_WORD_LEN
from convatt.data.formats import data_format
from convatt.errors import check_known
from convatt.protocol import DEFAULT_PROTOCOL, TrainingProtocol

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
"""The dtype policies the tagger supports: float32 (the paper's) and the mixed ones."""


@dataclass(frozen=True)
class Variant:
    """Which modifications a tagger uses. `label` is the paper's name for it."""

    name: str
    label: str
    position_embedding: str | None = None  # None | "add" | "con" | "sin-add"
    position_interaction: bool = False
    relative_bias: bool = False
    temperature: bool = False
    attention_conv: str | None = None  # None | "1d" | "2d"
    shaw: bool = False  # Shaw et al. (2018) relative position representations
    alibi: bool = False  # Press et al. ALiBi biases
    # Beyond the paper: other ways to process the attention matrix. A field named as an
    # attention layer's option (`convatt.layers.core.modifications.MODIFICATION_OPTIONS`) is passed
    # on to it (`attention_options`).
    attention: str = "standard"  # "standard" | "denser" (Kim §3.1) | "narrowing" (Kim §3.2)
    conv_before_softmax: bool = False  # attention_conv on the scores, before the softmax
    talking_heads: bool = False  # Shazeer et al. (2020)
    conv_kernel: tuple[int, int] | None = None  # attention_conv "2d"'s (query taps, key taps); None: the model's


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant("san", "SAN"),
        Variant("san-pe-con", "SAN+PE[con]", position_embedding="con"),
        Variant("san-pe-add", "SAN+PE[add]", position_embedding="add"),
        Variant("san-p", "SAN+P", position_interaction=True),
        Variant("san-r", "SAN+R", relative_bias=True),
        Variant("san-p-r", "SAN+P+R", position_interaction=True, relative_bias=True),
        Variant("san-pe-add-temp", "SAN+PE[add]+Temp", position_embedding="add", temperature=True),
        Variant("san-pe-add-conv", "SAN+PE[add]+Conv", position_embedding="add", attention_conv="1d"),
        Variant("san-pe-add-conv2d", "SAN+PE[add]+Conv2d", position_embedding="add", attention_conv="2d"),
        # Beyond the paper: other position methods in the same tagger.
        Variant("san-shaw", "SAN+Shaw", shaw=True),
        Variant("san-sin-add", "SAN+Sin[add]", position_embedding="sin-add"),
        Variant("san-alibi", "SAN+ALiBi", alibi=True),
        # Beyond the paper: other ways to process the attention matrix.
        Variant(
            "san-pe-add-conv2d-pre",
            "SAN+PE[add]+Conv2d[pre]",
            position_embedding="add",
            attention_conv="2d",
            conv_before_softmax=True,
        ),
        Variant("san-pe-add-talking", "SAN+PE[add]+Talking", position_embedding="add", talking_heads=True),
        Variant("san-pe-add-denser", "SAN+PE[add]+Denser", position_embedding="add", attention="denser"),
        Variant("san-denser", "SAN+Denser", attention="denser"),  # as in Kim's study: no positions
        Variant("san-pe-add-narrowing", "SAN+PE[add]+Narrowing", position_embedding="add", attention="narrowing"),
        # Beyond tagging: the paper's convolution after the softmax with Multi-Token Attention's
        # kernel shape; beside +Conv2d[pre], it tells the kernel's shape from its place. Last,
        # so that the variants before it keep their colours (`convatt.results.style`).
        Variant(
            "san-pe-add-conv2d-2x9",
            "SAN+PE[add]+Conv2d[2x9]",
            position_embedding="add",
            attention_conv="2d",
            conv_kernel=(2, 9),
        ),
    ]
}

FIRST_LAYER_ONLY = ("position_interaction", "relative_bias")
"""The modifications a model has in its first attention layer only: +P and +R, as in the paper."""

SHAW_CLIP = 16
"""Shaw et al.'s clipping distance k of the relative position representations (SAN+Shaw)."""


def attention_options(
    variant: Variant,
    layer_index: int,
    conv_kernel_size: int | tuple[int, int] | None = None,
    shaw_clip: int = SHAW_CLIP,
) -> dict[str, Any]:
    """The modification options of attention layer `layer_index` (0 = first) of a model of
    `variant`, as `SelfAttention` and `MultiHeadAttention` take them (`FIRST_LAYER_ONLY`
    in the first layer only, the others in every layer).

    Args:
        conv_kernel_size: the model's convolution kernel for a variant that names none
            (`Variant.conv_kernel`); None: the layer's default.
        shaw_clip: the clipping distance of a variant with Shaw's representations.
    """
    from convatt.layers.core.modifications import MODIFICATION_OPTIONS  # the layers load Keras: not at import

    options = {name: getattr(variant, name) for name in MODIFICATION_OPTIONS if hasattr(variant, name)}
    options["relative_position_representation"] = shaw_clip if variant.shaw else None
    for name in FIRST_LAYER_ONLY:
        options[name] = options[name] and layer_index == 0
    kernel = variant.conv_kernel or conv_kernel_size
    if variant.attention_conv and kernel is not None:
        options["conv_kernel_size"] = kernel
    return options


PAPER_VARIANTS = [
    "san",
    "san-pe-con",
    "san-pe-add",
    "san-p",
    "san-r",
    "san-p-r",
    "san-pe-add-temp",
    "san-pe-add-conv",
    "san-pe-add-conv2d",
]
UD_VARIANTS = ["san-pe-add", "san-p-r", "san-pe-add-temp", "san-pe-add-conv", "san-pe-add-conv2d"]
POSITION_VARIANTS = ["san-pe-add", "san-p-r", "san-shaw", "san-sin-add", "san-alibi"]
ATTENTION_VARIANTS = [
    "san-pe-add",
    "san-pe-add-conv2d",
    "san-pe-add-conv2d-pre",
    "san-pe-add-talking",
    "san-pe-add-denser",
    "san-denser",
    "san-pe-add-narrowing",
]

# Beyond tagging: the causal sequence tasks' grids (`convatt.sequence`; make toy-all, lm-all).
TOY_VARIANTS = [
    "san-pe-add",
    "san-pe-add-conv2d",
    "san-pe-add-conv2d-2x9",
    "san-pe-add-conv2d-pre",
    "san-pe-add-talking",
]
CHARLM_VARIANTS = [
    "san-pe-add",
    "san-p-r",
    "san-pe-add-temp",
    "san-pe-add-conv",
    "san-pe-add-conv2d",
    "san-pe-add-conv2d-pre",
    "san-pe-add-talking",
]

# Efficiency or capacity (make lm-continue, ud-continue): trained SAN+PE[add] runs continued as
# they are (the first) and converted to each other (`convatt train --from`, docs/experiments.md).
CONTINUE_CHARLM_VARIANTS = ["san-pe-add", "san-pe-add-conv2d", "san-pe-add-conv2d-pre"]
CONTINUE_UD_VARIANTS = ["san-pe-add", "san-pe-add-conv2d"]


@dataclass(frozen=True)
class TaggerConfig:
    """Everything that fixes a tagger's architecture (REFERENCE.md, "Tagger")."""

    preset: str
    variant: str
    word_dim: int
    pretrained_words: bool  # PTB: fastText, frozen; UD: random, trained
    max_len: int = MAX_LEN
    max_word_len: int = MAX_WORD_LEN
    num_layers: int = 4
    num_heads: int = 4
    char_dim: int = 64
    char_filters: int = 64
    char_kernel_size: int = 5
    char_layers: int = 3
    pe_con_dim: int = 64
    dropout: float = 0.1
    mask_padding: bool = False  # the paper lets pads take part in attention
    shaw_clip: int = SHAW_CLIP
    denser_segments: int = 2  # w of denser attention (Kim's)
    # How the protocol (convatt.protocol) shapes the network; defaults: the original code's.
    residual_adds_dropped: bool = True  # h' = D(h) + SA(D(h)); False: h + SA(D(h))
    relative_bias_parameterization: str = "circulant"
    attention_initializer: str = "glorot_normal"

    @property
    def spec(self) -> Variant:
        return VARIANTS[self.variant]

    @property
    def d_model(self) -> int:
        pe = self.pe_con_dim if self.spec.position_embedding == "con" else 0
        return self.word_dim + pe + self.char_filters

    def replace(self, **changes) -> TaggerConfig:
        return dataclasses.replace(self, **changes)


def check_variant(variant: str) -> None:
    """A ConvattError naming the known variants (and the closest) unless `variant` is one."""
    check_known("variant", variant, VARIANTS)


def make_config(preset: str, variant: str, protocol: TrainingProtocol = DEFAULT_PROTOCOL, **overrides) -> TaggerConfig:
    """Build the config of a named variant under a named preset ("ptb", "ud": a data format
    of `convatt.data.formats`), its network shaped as `protocol` says (the original code's by default)."""
    fmt = data_format(preset)
    check_variant(variant)
    from_protocol = dict(
        residual_adds_dropped=protocol.residual == "dropped",
        relative_bias_parameterization=protocol.relative_bias,
        attention_initializer=protocol.attention_init,
    )
    preset_dims = dict(word_dim=fmt.word_dim, pretrained_words=fmt.pretrained_words)
    return TaggerConfig(preset=preset, variant=variant, **{**preset_dims, **from_protocol, **overrides})
