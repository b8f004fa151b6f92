"""Which differences between variants are real, and which of our numbers reproduce the paper's.

Numbers first (data frames, here), rendering second (`Table`s: `convatt.results.significance_tables`),
as the paper's tables (`convatt.results.table_frames`, then `convatt.results.tables`):

    comparison_frame(runs)    per corpus (treebank) and setting, each variant against SAN+PE[add]
                              (and the pairs of EXTRA_PAIRS): the mean paired difference of test
                              accuracy over seeds, its 95% CI by a sentence-level bootstrap with
                              the seeds paired, a sentence-permutation p-value, and almost
                              stochastic order (ASO) over seeds where both have >= 3
    across_treebanks_frame(comparisons)
                              per comparison, a Wilcoxon signed-rank test of the per-treebank
                              mean differences (UD), with the number of treebanks
    equivalence_frame(runs)   per cell, two one-sided t-tests (TOST) of the seeds' mean against
                              the paper's number with a margin of `MARGIN` points

Accuracies are in percent (points). The tests and their assumptions: docs/statistics.md.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from convatt.errors import ConvattError
from convatt.results.frames import label_of, model_order
from convatt.results.paper import paper_table, paper_table2d
from convatt.results.stats import t_interval
from convatt.rundir.schema import SENTENCE_SCORE_COLUMNS, SENTENCE_SCORES_FILE

REFERENCE = "san-pe-add"
# (variant, reference) beyond "against REFERENCE", where both ran: 2d against 1d; then the
# convolution's kernel shape (both after the softmax) and its place (the same 2 x 9 kernel).
EXTRA_PAIRS = (
    ("san-pe-add-conv2d", "san-pe-add-conv"),
    ("san-pe-add-conv2d-2x9", "san-pe-add-conv2d"),
    ("san-pe-add-conv2d-pre", "san-pe-add-conv2d-2x9"),
)
CONFIDENCE = 0.95
MARGIN = 1.0  # points: "equivalent within MARGIN of the paper"
MIN_ASO_SEEDS = 3
MIN_WILCOXON_TREEBANKS = 6  # below, no two-sided p-value can reach 0.05 (n=5: the smallest is 0.0625)
N_RESAMPLES = 4999
RANDOM_SEED = 0  # the bootstrap's and ASO's: the tables come out the same each time
NO_SENTENCES = "no per-sentence scores (run `convatt evaluate RUN --sentences`)"
TOO_FEW_SEEDS = "too few seeds"
TOO_FEW_TREEBANKS = "too few treebanks"
GROUP = ["preset", "corpus", "treebank", "setting"]


# ---------------------------------------------------------------- per-sentence scores


def read_sentence_scores(run_dir: str | Path) -> pd.DataFrame | None:
    """A run's test sentence scores (`SENTENCE_SCORES_FILE`), None when the run has none; a
    damaged file is a `ConvattError` naming it."""
    path = Path(run_dir) / SENTENCE_SCORES_FILE
    if not path.exists():
        return None
    try:
        frame = pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as e:
        raise ConvattError(f"damaged sentence scores: {str(e).splitlines()[0]}", path) from None
    if list(frame.columns) != SENTENCE_SCORE_COLUMNS:
        raise ConvattError(f"damaged sentence scores: columns {list(frame.columns)}, expected the trainer's", path)
    if not all(pd.api.types.is_integer_dtype(frame[c]) for c in frame.columns) or (frame < 0).any().any():
        raise ConvattError("damaged sentence scores: a count is not a whole number >= 0", path)
    return frame


def paired_sentences(variant_dirs: list[str], reference_dirs: list[str]) -> tuple[np.ndarray, np.ndarray] | str:
    """Per test sentence, the mean over the paired seeds of (variant − reference) correct tags, and
    the sentence's tokens; or why not (a reason for the table)."""
    try:
        frames = [read_sentence_scores(d) for d in [*variant_dirs, *reference_dirs]]
    except ConvattError as e:  # one damaged file: this comparison goes without, the table goes on
        return str(e)
    if any(f is None for f in frames):
        return NO_SENTENCES
    tokens = frames[0]["tokens"].to_numpy()
    if any(len(f) != len(tokens) or not np.array_equal(f["tokens"], tokens) for f in frames):
        return "per-sentence scores of different test sentences"
    correct = np.array([f["correct"].to_numpy() for f in frames], dtype=float)
    n = len(variant_dirs)
    return (correct[:n] - correct[n:]).mean(axis=0), tokens.astype(float)


# ---------------------------------------------------------------- the tests


def bootstrap_difference(delta: np.ndarray, tokens: np.ndarray) -> tuple[float, float, float]:
    """(difference, CI low, CI high) in points: resampling sentences (BCa), the statistic is the
    mean over seeds of (variant − reference) accuracy = sum(delta) / sum(tokens)."""
    statistic = lambda d, n, axis=-1: 100 * d.sum(axis=axis) / n.sum(axis=axis)
    if (tokens > 0).all() and np.ptp(delta / tokens) == 0:  # every resample gives the same: no BCa
        return (float(statistic(delta, tokens)),) * 3
    ci = stats.bootstrap(
        (delta, tokens),
        statistic,
        paired=True,
        vectorized=True,
        confidence_level=CONFIDENCE,
        n_resamples=N_RESAMPLES,
        batch=200,
        random_state=np.random.default_rng(RANDOM_SEED),
    ).confidence_interval
    return float(statistic(delta, tokens)), float(ci.low), float(ci.high)


def permutation_p(delta: np.ndarray, tokens: np.ndarray) -> float:
    """Two-sided p-value of "no difference" by flipping the sign of each sentence's difference
    (swapping the two variants' tags on it), the paired permutation test."""
    total = tokens.sum()
    if not delta.any():
        return 1.0
    result = stats.permutation_test(
        (delta,),
        lambda d, axis=-1: d.sum(axis=axis) / total,
        permutation_type="samples",
        vectorized=True,
        n_resamples=N_RESAMPLES,
        batch=200,
        random_state=np.random.default_rng(RANDOM_SEED),
    )
    return float(result.pvalue)


def aso(variant: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """Almost stochastic order (Dror et al. 2019, via deepsig) of the variant's scores over seeds
    against the reference's: (ε_min, ε̂). ε̂ is the violation ratio, the share of the squared
    Wasserstein distance between the two score distributions where the variant is the lower one
    (0.5 when they are the same); ε_min is its upper confidence bound. ε_min < 0.5: the variant is
    almost stochastically larger; 0: it dominates; with few seeds the bound is wide, often 1."""
    from deepsig import aso as deepsig_aso  # imports slowly (it looks for TensorFlow and PyTorch)
    from deepsig.aso import compute_violation_ratio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "division by zero in violation ratio": equal scores
        epsilon = deepsig_aso(
            list(variant), list(reference), confidence_level=CONFIDENCE, seed=RANDOM_SEED, show_progress=False
        )
        ratio = compute_violation_ratio(np.asarray(variant, float), np.asarray(reference, float), dt=0.005)
    return float(epsilon), float(ratio)


def tost(scores: np.ndarray, target: float, margin: float = MARGIN) -> float:
    """p-value of two one-sided t-tests of H0 "|mean − target| >= margin" (equivalence if < 0.05);
    NaN below two scores. Seeds that agree exactly: 0 inside the margin, 1 outside."""
    scores = np.asarray(scores, dtype=float)
    if len(scores) < 2:
        return math.nan
    if np.ptp(scores) == 0:
        return 0.0 if abs(scores[0] - target) < margin else 1.0
    above = stats.ttest_1samp(scores, target - margin, alternative="greater").pvalue
    below = stats.ttest_1samp(scores, target + margin, alternative="less").pvalue
    return float(max(above, below))


# ---------------------------------------------------------------- numbers

COMPARISON_COLUMNS = [
    *GROUP,
    "variant",
    "reference",
    "model",
    "against",
    "n_variant",
    "n_reference",
    "n_paired",
    "diff",
    "ci_low",
    "ci_high",
    "p_permutation",
    "bootstrap_note",
    "aso_epsilon",
    "aso_ratio",
    "aso_note",
]


def comparisons(variants: set[str]) -> list[tuple[str, str]]:
    """The (variant, reference) pairs among `variants`: each against REFERENCE, then EXTRA_PAIRS."""
    order = lambda v: model_order(("", v))
    pairs = [(v, REFERENCE) for v in sorted(variants - {REFERENCE}, key=order)] if REFERENCE in variants else []
    return pairs + [p for p in EXTRA_PAIRS if set(p) <= variants]


def _bootstrap_columns(variant: pd.DataFrame, reference: pd.DataFrame, diff: float) -> dict:
    """ci_low, ci_high and p_permutation from the paired runs' sentence scores, or bootstrap_note:
    why not. `diff` (from result.json) must be what the sentence scores sum to."""
    if variant.empty:
        return {"bootstrap_note": "no seed in common"}
    sentences = paired_sentences(list(variant["run_dir"]), list(reference["run_dir"]))
    if isinstance(sentences, str):
        return {"bootstrap_note": sentences}
    observed, low, high = bootstrap_difference(*sentences)
    if abs(observed - diff) > 1e-6:
        return {"bootstrap_note": f"per-sentence scores disagree with result.json ({observed:+.4f} vs {diff:+.4f})"}
    return {"ci_low": low, "ci_high": high, "p_permutation": permutation_p(*sentences), "bootstrap_note": ""}


def compare(variant: pd.DataFrame, reference: pd.DataFrame) -> dict:
    """One comparison's numbers (COMPARISON_COLUMNS from n_variant on), from the runs of each."""
    v, r = variant.set_index("seed"), reference.set_index("seed")
    paired = sorted(set(v.index) & set(r.index))
    row = {"n_variant": len(v), "n_reference": len(r), "n_paired": len(paired), "aso_note": ""}
    row["diff"] = float((100 * (v.loc[paired, "test_all"] - r.loc[paired, "test_all"])).mean()) if paired else math.nan
    row.update(_bootstrap_columns(v.loc[paired], r.loc[paired], row["diff"]))
    if min(len(v), len(r)) < MIN_ASO_SEEDS:
        row["aso_note"] = f"{TOO_FEW_SEEDS} (ASO needs {MIN_ASO_SEEDS} of each)"
        return row
    try:
        row["aso_epsilon"], row["aso_ratio"] = aso(100 * v["test_all"].to_numpy(), 100 * r["test_all"].to_numpy())
    except ImportError:  # an environment installed before convatt needed it
        row["aso_note"] = "deepsig is not installed (pip install deepsig)"
    return row


def comparison_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Per corpus (treebank) and setting, each comparison of `comparisons` (COMPARISON_COLUMNS)."""
    rows = []
    for key, group in runs.groupby(GROUP, sort=True, dropna=False):
        for variant, reference in comparisons(set(group["variant"])):
            numbers = compare(group[group["variant"] == variant], group[group["variant"] == reference])
            names = {"model": label_of(variant), "against": label_of(reference)}
            rows.append({**dict(zip(GROUP, key)), "variant": variant, "reference": reference, **names, **numbers})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)


ACROSS_COLUMNS = ["setting", "variant", "reference", "model", "against", "n_treebanks", "n_better", "mean_diff"]
ACROSS_COLUMNS += ["wilcoxon_statistic", "p_wilcoxon", "note"]


def across_treebanks_frame(comparisons: pd.DataFrame) -> pd.DataFrame:
    """Per setting and comparison of the UD rows of `comparison_frame`: a Wilcoxon signed-rank test
    of the per-treebank mean differences (H0: symmetric about 0), or "too few treebanks"."""
    ud = comparisons[(comparisons["preset"] == "ud") & comparisons["diff"].notna()]
    rows = []
    for (setting, variant, reference), group in ud.groupby(["setting", "variant", "reference"], sort=False):
        diffs = group["diff"].to_numpy()
        row = {"setting": setting, "variant": variant, "reference": reference, "model": label_of(variant)}
        row.update(against=label_of(reference), n_treebanks=len(diffs), n_better=int((diffs > 0).sum()))
        row.update(mean_diff=float(diffs.mean()), note="")
        if len(diffs) < MIN_WILCOXON_TREEBANKS:
            row["note"] = f"{TOO_FEW_TREEBANKS} ({len(diffs)}; the test needs {MIN_WILCOXON_TREEBANKS})"
        else:
            test = stats.wilcoxon(diffs)
            row.update(wilcoxon_statistic=float(test.statistic), p_wilcoxon=float(test.pvalue))
        rows.append(row)
    return pd.DataFrame(rows, columns=ACROSS_COLUMNS)


EQUIVALENCE_COLUMNS = [*GROUP, "variant", "model", "metric", "n_seeds", "mean", "std", "paper", "diff"]
EQUIVALENCE_COLUMNS += ["ci90_low", "ci90_high", "margin", "p_tost", "verdict"]


def paper_numbers(preset: str, treebank: str | None, label: str) -> dict[str, float]:
    """The paper's test accuracies of a model: PTB Table 2b (all / OOV / ambiguous), UD Table 2d (all)."""
    if preset == "ptb":
        table = paper_table("table2b_ptb").set_index("model")
        return {m: float(table.at[label, m]) for m in ("all", "oov", "ambiguous")} if label in table.index else {}
    table = paper_table2d()
    inside = treebank in table.index and label in table.columns
    return {"all": float(table.at[treebank, label])} if inside else {}


def verdict(p: float, n: int) -> str:
    if n < 2:
        return f"{TOO_FEW_SEEDS} ({n})"
    return f"equivalent within {MARGIN:g} at {100 * CONFIDENCE:g}%" if p < 1 - CONFIDENCE else "not shown"


def equivalence_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Per cell (corpus / treebank, setting, variant) and metric the paper reports: TOST of the
    seeds' mean against the paper's number with margin MARGIN (EQUIVALENCE_COLUMNS)."""
    rows = []
    for key, group in runs.groupby([*GROUP, "variant"], sort=True, dropna=False):
        cell = dict(zip([*GROUP, "variant"], key))
        for metric, paper in paper_numbers(cell["preset"], cell["treebank"], label_of(cell["variant"])).items():
            scores = (100 * group[f"test_{metric}"]).dropna().to_numpy()
            mean = float(scores.mean()) if len(scores) else math.nan
            low, high = t_interval(scores, 1 - 2 * (1 - CONFIDENCE))  # TOST at 5% = this 90% interval in the margin
            p = tost(scores, paper)
            rows.append(
                {
                    **cell,
                    "model": label_of(cell["variant"]),
                    "metric": metric,
                    "n_seeds": len(scores),
                    "mean": mean,
                    "std": float(np.std(scores, ddof=1)) if len(scores) >= 2 else math.nan,
                    "paper": paper,
                    "diff": mean - paper,
                    "ci90_low": low,
                    "ci90_high": high,
                    "margin": MARGIN,
                    "p_tost": p,
                    "verdict": verdict(p, len(scores)),
                }
            )
    return pd.DataFrame(rows, columns=EQUIVALENCE_COLUMNS)
