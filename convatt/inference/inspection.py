"""`convatt inspect`: what a finished run's attention layers learned, as numbers.

The learned weights (A^p, relative biases, temperatures, convolution kernels,
position embeddings) are read from the trained layers; the attention maps come
from a probe, a sub-model from the tagger's inputs to the inputs of its
`SelfAttention` layers, and `SelfAttention.attention_probabilities`, which
computes what the layer's own call computes (dropout is off at inference).

Attention statistics (`attention_statistics`) are taken over the query rows of
real tokens (PAD query rows are left out). The keys are all the `max_len`
positions of a row, PAD included, because in the paper (and in runs without
`--mask-padding`) PAD keys take part in attention; a `--mask-padding` run gives
them weight 0, so there the keys are the sentence's tokens. Entropies are in nats;
`uniform_entropy` is that of a uniform distribution over the same keys.
After the convolution (ReLU, not renormalised) a row is divided by its sum; rows
that are all 0 there (the head passes nothing to that query) are counted in
`zero_rows` and left out of the means (`n_rows` counts the others; NaN if none).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from convatt.data import EncodedSplit, encode_split
from convatt.data.batching import iterate_batches
from convatt.errors import ConvattError
from convatt.inference.loading import TrainedRun, load_run

STAT_COLUMNS = ["layer", "head", "stage", "mean_entropy", "mean_max_weight", "uniform_entropy", "n_rows", "zero_rows"]


def attention_layers(model) -> list:
    """The tagger's SelfAttention layers, first to last."""
    from convatt.layers import SelfAttention

    return [layer for layer in model.layers if isinstance(layer, SelfAttention)]


def attention_probe(model):
    """A model from the tagger's inputs to the input of each attention layer."""
    import keras

    return keras.Model(model.input, [layer.input for layer in attention_layers(model)])


def attention_maps(run: TrainedRun, inputs: dict, probe=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer (softmax, after the convolution), each (b, heads, t, t), for one batch of inputs."""
    import keras

    probe = probe or attention_probe(run.model)
    layer_inputs = probe.predict_on_batch(inputs)
    keys = inputs["words"] != 0 if run.run_config.mask_padding else None  # as the tagger masks them
    maps = []
    for layer, x in zip(attention_layers(run.model), layer_inputs):
        kwargs = {"attention_mask": keys} if keys is not None else {}
        softmax, convolved = layer.attention_probabilities(x, **kwargs)
        maps.append((keras.ops.convert_to_numpy(softmax), keras.ops.convert_to_numpy(convolved)))
    return maps


def dev_sentences(run: TrainedRun) -> list[list[str]]:
    """The word forms of the run's dev split (cut to the run's --limit, as in training)."""
    corpus = run.corpus()
    dev = corpus.dev[: run.run_config.limit] if run.run_config.limit else corpus.dev
    return [[form for form, _ in sentence] for sentence in dev]


def encode(run: TrainedRun, sentences: list[list[str]]) -> EncodedSplit:
    """Sentences encoded as the run's training encoded them (long ones in pieces)."""
    config = run.tagger_config
    return encode_split([[(w, "") for w in s] for s in sentences], run.vocab, config.max_len, config.max_word_len)


def row_statistics(attention: np.ndarray, queries: np.ndarray, renormalise: bool) -> np.ndarray:
    """Sums over the chosen query rows, per head: (entropy, max weight, rows, all-zero rows), (4, h).

    attention (b, h, q, k); queries (b, q) bool. With `renormalise`, each row is
    divided by its sum first; rows summing to 0 are only counted.
    """
    rows = np.moveaxis(attention, 1, 0)[:, queries].astype(np.float64)  # (h, rows, k)
    sums = rows.sum(-1, keepdims=True)
    keep = sums[..., 0] > 0
    if renormalise:
        rows = rows / np.where(sums > 0, sums, 1)
    entropy = -(rows * np.log(np.where(rows > 0, rows, 1))).sum(-1)
    return np.stack(
        [np.where(keep, entropy, 0).sum(1), np.where(keep, rows.max(-1), 0).sum(1), keep.sum(1), (~keep).sum(1)]
    )


def attention_statistics(
    run: TrainedRun, sentences: list[list[str]] | None = None, batch_size: int = 64
) -> pd.DataFrame:
    """Mean entropy and mean maximum weight of the attention rows of real tokens, per layer,
    head and stage ("softmax"; "after_conv", renormalised, for the conv variants).

    `sentences`: default the run's dev split. See the module docstring for which keys count.
    """
    split = encode(run, dev_sentences(run) if sentences is None else sentences)
    probe = attention_probe(run.model)
    totals: dict[tuple[int, str], np.ndarray] = {}
    uniform = 0.0
    for inputs, _, _ in iterate_batches(split, batch_size):
        queries = inputs["words"] != 0
        n_keys = queries.sum(1, keepdims=True) if run.run_config.mask_padding else queries.shape[1]
        uniform += float(np.broadcast_to(np.log(n_keys), queries.shape)[queries].sum())
        for layer, (softmax, convolved) in enumerate(attention_maps(run, inputs, probe), start=1):
            stages = [("softmax", softmax, False)]
            if attention_layers(run.model)[layer - 1].attention_conv:
                stages.append(("after_conv", convolved, True))
            for stage, attention, renormalise in stages:
                sums = row_statistics(attention, queries, renormalise)
                totals[layer, stage] = totals.get((layer, stage), 0) + sums
    n_queries = int(split.mask.sum())
    mean = lambda total, n: total / n if n else float("nan")
    rows = [
        {
            "layer": layer,
            "head": head + 1,
            "stage": stage,
            "mean_entropy": mean(e, n),
            "mean_max_weight": mean(m, n),
            "uniform_entropy": mean(uniform, n_queries),
            "n_rows": int(n),
            "zero_rows": int(z),
        }
        for (layer, stage), sums in totals.items()
        for head, (e, m, n, z) in enumerate(sums.T)
    ]
    return pd.DataFrame(rows, columns=STAT_COLUMNS)


def _numpy(value) -> np.ndarray:
    import keras

    return keras.ops.convert_to_numpy(value)


def position_interactions(model) -> dict[int, np.ndarray]:
    """A^p (heads, max_len, max_len) of each layer that has it, by layer number."""
    return {
        i: _numpy(layer.modifications["position_interaction"].interactions)
        for i, layer in enumerate(attention_layers(model), start=1)
        if "position_interaction" in layer.modifications
    }


def relative_biases(model) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per layer with +R: (distances i - j, biases (heads, distances)).

    Read through `RelativeBias.relative_matrix` (whatever its parameterisation): the
    bias at distance d is the mean of A^r over the diagonal i - j = d, which is
    the bias itself when A^r depends on i - j only.
    """
    found = {}
    for i, layer in enumerate(attention_layers(model), start=1):
        if "relative_bias" in layer.modifications:
            t = layer.max_len
            matrix = _numpy(layer.modifications["relative_bias"].relative_matrix(t, t))
            distances = np.arange(-(t - 1), t)
            found[i] = (
                distances,
                np.stack([[np.diagonal(head, offset=-d).mean() for d in distances] for head in matrix]),
            )
    return found


def temperatures(model) -> pd.DataFrame:
    """gamma_q, gamma_k, gamma_v per layer and head (empty without +Temp)."""
    rows = [
        {"layer": i, "head": h + 1, "gamma_q": q, "gamma_k": k, "gamma_v": v}
        for i, layer in enumerate(attention_layers(model), start=1)
        if layer.temperature
        for h, (q, k, v) in enumerate(_numpy(layer.temperature_weight).T)
    ]
    return pd.DataFrame(rows, columns=["layer", "head", "gamma_q", "gamma_k", "gamma_v"])


def conv_kernels(model) -> dict[int, tuple[str, np.ndarray, np.ndarray]]:
    """Per layer with +Conv/+Conv2d: (kind "1d"/"2d", kernel, bias), as the layer stores them
    (1d: (heads, taps, in, out); 2d: (heads, rows, cols))."""
    return {
        i: (
            layer.attention_conv,
            _numpy(layer.modifications["attention_conv"].kernel),
            _numpy(layer.modifications["attention_conv"].bias),
        )
        for i, layer in enumerate(attention_layers(model), start=1)
        if layer.attention_conv
    }


def position_embedding_similarity(model) -> np.ndarray | None:
    """Cosine similarity (max_len, max_len) of the learned position embeddings (PE[add]/PE[con])."""
    from convatt.layers import PositionEmbedding

    layers = [layer for layer in model.layers if isinstance(layer, PositionEmbedding)]
    if not layers:
        return None
    table = _numpy(layers[0].embeddings).astype(np.float64)
    unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def chosen_sentence(run: TrainedRun, sentence: str | None, dev_index: int, log: Callable[[str], None]) -> list[str]:
    """The tokens whose attention maps are drawn: `sentence`, or the dev split's `dev_index`-th."""
    if sentence is not None:
        tokens = sentence.split()
        if not tokens:
            raise ConvattError("--sentence has no words")
    else:
        dev = dev_sentences(run)
        if not 0 <= dev_index < len(dev):
            raise ConvattError(
                f"--dev-index {dev_index} is out of range: the run's dev split has "
                f"{len(dev):,} sentences (0 to {len(dev) - 1:,})",
                run.data or run.run_config.data_path(run.path),
            )
        tokens = dev[dev_index]
    max_len = run.tagger_config.max_len
    if len(tokens) > max_len:
        log(
            f"note: the sentence has {len(tokens)} tokens; the model reads {max_len} at a time "
            f"(as in training), so the maps show its first {max_len}"
        )
        tokens = tokens[:max_len]
    return tokens


def _weight_figures(run: TrainedRun, label: str) -> list[tuple[str, object | None, str]]:
    """(file stem, figure or None, why there is none) for the learned weights."""
    from convatt.inference import inspection_figures as figures

    model, variant = run.model, run.run_config.variant
    ap, rb, temp, conv = (
        position_interactions(model),
        relative_biases(model),
        temperatures(model),
        conv_kernels(model),
    )
    similarity = position_embedding_similarity(model)
    items = [
        (
            "position_interactions",
            figures.position_interactions(ap, label) if ap else None,
            f"{variant} has no position interactions A^p (+P)",
        ),
        (
            "relative_biases",
            figures.relative_biases(rb, label) if rb else None,
            f"{variant} has no relative biases (+R)",
        ),
        (
            "temperatures",
            None if temp.empty else figures.temperatures(temp, label),
            f"{variant} has no learnable temperature (+Temp)",
        ),
        (
            "position_embedding_similarity",
            None if similarity is None else figures.position_embedding_similarity(similarity, label),
            f"{variant} has no learned position embeddings",
        ),
    ]
    return items + _conv_kernel_figures(conv, variant, label)


def _conv_kernel_figures(conv: dict, variant: str, label: str) -> list[tuple[str, object | None, str]]:
    """`_weight_figures`' items of the attention convolutions: one 2d figure, or one per layer of 1d kernels."""
    from convatt.inference import inspection_figures as figures

    if any(kind == "2d" for kind, _, _ in conv.values()):
        return [("conv_kernels", figures.conv2d_kernels(conv, label), "")]
    if conv:
        return [
            (f"conv_kernels_layer{layer}", figures.conv1d_kernels(layer, kernel, label), "")
            for layer, (_, kernel, _) in conv.items()
        ]
    return [("conv_kernels", None, f"{variant} has no attention convolution (+Conv, +Conv2d)")]


def _map_figures(run: TrainedRun, tokens: list[str], label: str) -> list[tuple[str, object, str]]:
    from convatt.inference import inspection_figures as figures

    inputs = next(iterate_batches(encode(run, [tokens]), 1))[0]
    items = []
    for layer, (softmax, convolved) in enumerate(attention_maps(run, inputs), start=1):
        has_conv = bool(attention_layers(run.model)[layer - 1].attention_conv)
        figure = figures.attention_maps(layer, tokens, softmax[0], convolved[0] if has_conv else None, label)
        items.append((f"attention_layer{layer}", figure, ""))
    return items


def inspect_run(
    run: str | os.PathLike,
    out: str | os.PathLike,
    sentence: str | None = None,
    dev_index: int = 0,
    log: Callable[[str], None] = print,
    data: str | os.PathLike | None = None,
) -> list[Path]:
    """Write the figures (PNG and PDF) and attention_statistics.csv of a run to `out`; return the
    files. The dev split is read from `data` where given, else from the run's own corpus."""
    from convatt.inference import inspection_figures as figures
    from convatt.results.frames import label_of
    from convatt.results.output import save
    from convatt.rundir.storage import write_text

    trained = load_run(run, data)
    label = label_of(trained.run_config.variant)
    tokens = chosen_sentence(trained, sentence, dev_index, log)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stats = attention_statistics(trained)
    write_text(out / "attention_statistics.csv", stats.to_csv(index=False, float_format="%.6g"))
    written = [out / "attention_statistics.csv"]
    items = _weight_figures(trained, label) + _map_figures(trained, tokens, label)
    items.append(("attention_entropy", figures.entropy_by_layer(stats, label), ""))
    for stem, figure, why_not in items:
        if figure is None:
            log(f"skipped {stem}: {why_not}")
        else:
            written += save(figure, out / stem)
    return written
