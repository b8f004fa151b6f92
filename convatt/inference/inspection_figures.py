"""Figures of `convatt inspect`, from the numbers of `convatt.inference.inspection`.

Matplotlib `Figure`s made without pyplot (Agg), as in `convatt.results.plots`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

DIVERGING = "RdBu_r"


def _grid(nrows: int, ncols: int, size: float = 2.6) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(size * ncols + 0.8, size * nrows + 0.6), layout="constrained")
    return fig, np.atleast_2d(fig.subplots(nrows, ncols, squeeze=False))


def _title(fig: Figure, text: str) -> None:
    """The figure's title, wrapped to its width (long variant labels on a one-panel figure)."""
    fig.suptitle(text, fontsize=10, wrap=True)


def _heatmap(fig: Figure, ax, values: np.ndarray, title: str, symmetric: bool = True) -> None:
    limit = float(np.abs(values).max()) or 1.0
    style = dict(cmap=DIVERGING, vmin=-limit, vmax=limit) if symmetric else dict(cmap="viridis", vmin=0)
    image = ax.imshow(values, interpolation="nearest", **style)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8)


def position_interactions(matrices: dict[int, np.ndarray], label: str) -> Figure:
    """A^p per head, one row per layer that has it; rows are queries, columns keys."""
    fig, axes = _grid(len(matrices), next(iter(matrices.values())).shape[0])
    for row, (layer, heads) in zip(axes, matrices.items()):
        for h, (ax, matrix) in enumerate(zip(row, heads), start=1):
            _heatmap(fig, ax, matrix, f"layer {layer}, head {h}")
            ax.set_xlabel("key position")
            ax.set_ylabel("query position")
    _title(fig, f"{label}: position interactions $A^p$")
    return fig


def relative_biases(biases: dict[int, tuple[np.ndarray, np.ndarray]], label: str) -> Figure:
    """The relative bias of each head against the distance i - j, one panel per layer."""
    fig, axes = _grid(1, len(biases), size=4.0)
    for ax, (layer, (distances, heads)) in zip(axes[0], biases.items()):
        for h, values in enumerate(heads, start=1):
            ax.plot(distances, values, label=f"head {h}", lw=1)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_xlabel("distance i - j (query minus key position)")
        ax.set_ylabel("bias added to the score")
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.legend(fontsize=7)
    _title(fig, f"{label}: relative biases $A^r$")
    return fig


def temperatures(table: pd.DataFrame, label: str) -> Figure:
    """gamma_q, gamma_k, gamma_v: one panel each, bars per layer and head."""
    fig, axes = _grid(1, 3, size=3.4)
    heads = sorted(table["head"].unique())
    width = 0.8 / len(heads)
    for ax, name in zip(axes[0], ("gamma_q", "gamma_k", "gamma_v")):
        for i, head in enumerate(heads):
            part = table[table["head"] == head]
            ax.bar(part["layer"] + (i - (len(heads) - 1) / 2) * width, part[name], width, label=f"head {head}")
        ax.axhline(1.0, color="grey", lw=0.5)  # the initial value
        ax.set_xticks(sorted(table["layer"].unique()))
        ax.set_xlabel("layer")
        ax.set_title(f"$\\gamma_{name[-1]}$", fontsize=10)
    axes[0][0].legend(fontsize=7)
    _title(fig, f"{label}: learned temperatures (1 at the start)")
    return fig


def conv2d_kernels(kernels: dict[int, tuple[str, np.ndarray, np.ndarray]], label: str) -> Figure:
    """Each head's k x k filter per layer, with its values and bias."""
    heads = next(iter(kernels.values()))[1].shape[0]
    fig, axes = _grid(len(kernels), heads, size=2.2)
    for row, (layer, (_, kernel, bias)) in zip(axes, kernels.items()):
        for h, ax in enumerate(row):
            _heatmap(fig, ax, kernel[h], f"layer {layer}, head {h + 1}, bias {bias[h]:+.2f}")
            for (r, c), value in np.ndenumerate(kernel[h]):
                ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=7)
            ax.set_xticks([])
            ax.set_yticks([])
    _title(fig, f"{label}: 2d attention convolution filters (rows: query offset, columns: key offset)")
    return fig


def conv1d_kernels(layer: int, kernel: np.ndarray, label: str) -> Figure:
    """One layer's 1d convolution: per head and tap, the (key in, key out) weight matrix."""
    heads, taps = kernel.shape[:2]
    fig, axes = _grid(heads, taps)
    for h in range(heads):
        for tap in range(taps):
            _heatmap(fig, axes[h][tap], kernel[h, tap], f"head {h + 1}, query offset {tap - (taps - 1) // 2:+d}")
            axes[h][tap].set_xlabel("output key column")
            axes[h][tap].set_ylabel("input key column")
    _title(fig, f"{label}: layer {layer}, 1d attention convolution kernels")
    return fig


def attention_maps(
    layer: int, tokens: list[str], softmax: np.ndarray, convolved: np.ndarray | None, label: str
) -> Figure:
    """One sentence's attention per head (columns), softmax and after the convolution (rows).

    softmax, convolved: (heads, t, t); drawn for the sentence's tokens (queries and
    keys); the share of each panel's weight on PAD keys is given in its title.
    """
    n = len(tokens)
    stages = [("softmax", softmax)] + ([("after conv", convolved)] if convolved is not None else [])
    fig, axes = _grid(len(stages), softmax.shape[0], size=max(3.0, 0.16 * n + 1.5))
    for row, (stage, maps) in zip(axes, stages):
        for h, ax in enumerate(row):
            pad_share = maps[h, :n, n:].sum() / max(maps[h, :n].sum(), 1e-12)
            _heatmap(
                fig, ax, maps[h, :n, :n], f"head {h + 1}, {stage} (PAD keys: {100 * pad_share:.0f}%)", symmetric=False
            )
            ax.set_xticks(range(n), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(n), tokens, fontsize=6)
    _title(fig, f"{label}: layer {layer} attention (rows: queries, columns: keys)")
    return fig


def position_embedding_similarity(similarity: np.ndarray, label: str) -> Figure:
    fig, axes = _grid(1, 1, size=4.0)
    _heatmap(fig, axes[0][0], similarity, "cosine similarity of position embeddings")
    axes[0][0].set_xlabel("position")
    axes[0][0].set_ylabel("position")
    _title(fig, label)
    return fig


STAGE_NAMES = {"softmax": "softmax", "after_conv": "after the convolution"}
STAGE_STYLES = {"softmax": dict(marker="o", color="#1f77b4"), "after_conv": dict(marker="s", color="#d62728")}


def entropy_by_layer(stats: pd.DataFrame, label: str) -> Figure:
    """Mean attention entropy of every stage the run has (softmax; after the convolution for the
    conv variants), one panel per layer, each head a point (heads are not ordered: no lines),
    and the entropy of a uniform attention over the same keys for scale."""
    layers = sorted(stats["layer"].unique())
    fig = Figure(figsize=(2.4 * len(layers) + 1.0, 3.4), layout="constrained")
    axes = fig.subplots(1, len(layers), sharey=True, squeeze=False)[0]
    stages = [s for s in STAGE_NAMES if s in set(stats["stage"])]
    stages += sorted(set(stats["stage"]) - set(stages))  # any other stage, in its own style
    for ax, layer in zip(axes, layers):
        part = stats[stats["layer"] == layer]
        for i, stage in enumerate(stages):
            rows = part[part["stage"] == stage]
            offset = (i - (len(stages) - 1) / 2) * 0.15  # stages side by side at each head
            style = STAGE_STYLES.get(stage, dict(marker="^"))
            ax.plot(
                rows["head"] + offset, rows["mean_entropy"], ls="none", label=STAGE_NAMES.get(stage, stage), **style
            )
        ax.axhline(part["uniform_entropy"].iloc[0], color="grey", ls="--", lw=0.8, label="uniform")
        heads = sorted(part["head"].unique())
        ax.set_xticks(heads)
        ax.set_xlim(min(heads) - 0.6, max(heads) + 0.6)
        ax.set_xlabel("head")
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("mean entropy of a query's\nattention (nats)")
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="outside right center")  # never over a point
    _title(fig, f"{label}: attention entropy over the dev split")
    return fig
