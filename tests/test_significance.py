"""The significance and equivalence tables on synthetic runs with known answers: a difference
of exactly zero, a clear difference, too few seeds, runs without per-sentence scores; the
Wilcoxon test on a textbook example; TOST against hand-computed t-tests; t-interval bands."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from synthetic_runs import write_run

from convatt.results import significance as sig
from convatt.results import significance_tables as sig_tables
from convatt.results import tables
from convatt.results.frames import load_runs
from convatt.results.stats import seed_bands, t_interval
from convatt.rundir.schema import SENTENCE_SCORE_COLUMNS, SENTENCE_SCORES_FILE

N_SENTENCES = 300
TOKENS = np.random.default_rng(7).integers(5, 31, N_SENTENCES)


def write_scores(run_dir: Path, correct: np.ndarray) -> None:
    """A test_sentences.csv of `correct` tags out of TOKENS (OOV / ambiguous: none)."""
    frame = pd.DataFrame({"sentence": range(N_SENTENCES), "tokens": TOKENS, "correct": correct})
    for c in SENTENCE_SCORE_COLUMNS[3:]:
        frame[c] = 0
    frame[SENTENCE_SCORE_COLUMNS].to_csv(run_dir / SENTENCE_SCORES_FILE, index=False)


def add_run(root: Path, corpus: str, variant: str, seed: int, correct: np.ndarray | None, acc=None) -> None:
    """A synthetic run whose result.json test accuracy is that of `correct` (or `acc`)."""
    acc = correct.sum() / TOKENS.sum() if correct is not None else acc
    out = write_run(root, variant, seed, [0.5, 0.6], [0.5, 0.6], corpus=corpus, test_all=float(acc))
    if correct is not None:
        write_scores(out, correct)


def shuffled_within_lengths(correct: np.ndarray, rng) -> np.ndarray:
    """`correct` moved among sentences of the same length: the same total, other sentences."""
    by_length = np.argsort(TOKENS, kind="stable")
    shuffled = np.lexsort((rng.random(N_SENTENCES), TOKENS))
    out = np.empty_like(correct)
    out[by_length] = correct[shuffled]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> pd.DataFrame:
    """PTB-preset runs in three corpora: "Zero" (SAN+P+R's seeds are SAN+PE[add]'s, moved among
    sentences: a difference of exactly 0), "Clear" (+Conv tags 95% right, SAN+PE[add] 85%), "Few"
    (two seeds each, no per-sentence scores)."""
    root, rng = tmp_path_factory.mktemp("significance"), np.random.default_rng(0)
    reference = [rng.binomial(TOKENS, 0.9) for _ in range(3)]
    for seed in range(3):
        add_run(root, "Zero", "san-pe-add", seed, reference[seed])
        add_run(root, "Zero", "san-p-r", seed, shuffled_within_lengths(reference[(seed + 1) % 3], rng))
        add_run(root, "Clear", "san-pe-add", seed, rng.binomial(TOKENS, 0.85))
        add_run(root, "Clear", "san-pe-add-conv", seed, rng.binomial(TOKENS, 0.95))
    for seed, (a, b) in enumerate([(0.90, 0.91), (0.92, 0.93)]):
        add_run(root, "Few", "san-pe-add", seed, None, acc=a)
        add_run(root, "Few", "san-pe-add-temp", seed, None, acc=b)
    return load_runs(root)


@pytest.fixture(scope="module")
def comparisons(runs) -> pd.DataFrame:
    return sig.comparison_frame(runs).set_index("corpus")


def test_a_difference_of_zero_is_not_shown(comparisons):
    row = comparisons.loc["Zero"]
    assert (row["model"], row["against"], row["n_paired"]) == ("SAN+P+R", "SAN+PE[add]", 3)
    assert row["diff"] == pytest.approx(0, abs=1e-12)
    assert row["ci_low"] < 0 < row["ci_high"] and row["ci_high"] - row["ci_low"] < 2
    assert row["p_permutation"] > 0.9  # the observed difference is 0: every resample is at least as large
    # The same three accuracies on both sides: a violation ratio of exactly 0.5, and no order shown.
    assert row["aso_ratio"] == 0.5 and row["aso_epsilon"] >= 0.5
    assert sig_tables.reading(row) == "no difference shown (CI covers 0)"


def test_a_clear_difference_is_shown(comparisons, runs):
    row = comparisons.loc["Clear"]
    clear = runs[runs["corpus"] == "Clear"].pivot(index="seed", columns="variant", values="test_all")
    expected = float((100 * (clear["san-pe-add-conv"] - clear["san-pe-add"])).mean())  # from result.json
    assert row["diff"] == pytest.approx(expected, abs=1e-9)
    assert 9 < row["diff"] < 11 and 0 < row["ci_low"] < row["diff"] < row["ci_high"]
    assert row["p_permutation"] < 0.001
    assert row["aso_epsilon"] < 0.05 and row["aso_ratio"] == 0
    assert sig_tables.reading(row) == "higher (CI above 0)"


def test_too_few_seeds_and_no_sentence_scores_say_so(comparisons, runs):
    row = comparisons.loc["Few"]
    assert row["diff"] == pytest.approx(1.0)  # from result.json: +1 point on both seeds
    assert math.isnan(row["ci_low"]) and row["bootstrap_note"] == sig.NO_SENTENCES
    assert math.isnan(row["aso_epsilon"]) and row["aso_note"].startswith(sig.TOO_FEW_SEEDS)
    md = sig_tables.comparison_markdown(comparisons.reset_index(), "t")
    assert "convatt evaluate RUN --sentences" in md and "too few seeds (ASO needs 3 of each)" in md
    one_seed = sig.equivalence_frame(runs[(runs["corpus"] == "Few") & (runs["seed"] == 0)])
    assert set(one_seed["verdict"]) == {"too few seeds (1)"}


def test_wilcoxon_on_a_textbook_example():
    # scipy.stats.wilcoxon's documented example (Fisher's height differences): W = 24, p = 0.0413.
    d = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]
    frame = pd.DataFrame(
        {"preset": "ud", "setting": "", "variant": "san-pe-add-conv", "reference": "san-pe-add", "diff": d}
    )
    row = sig.across_treebanks_frame(frame).iloc[0]
    assert (row["n_treebanks"], row["n_better"], row["wilcoxon_statistic"]) == (15, 13, 24)
    assert row["p_wilcoxon"] == pytest.approx(0.04126, abs=5e-5)
    few = sig.across_treebanks_frame(frame.iloc[:5]).iloc[0]
    assert math.isnan(few["p_wilcoxon"]) and few["note"] == "too few treebanks (5; the test needs 6)"
    assert "too few treebanks" in sig_tables.across_markdown(sig.across_treebanks_frame(frame.iloc[:5]), "t")


def test_tost_equivalent_and_not_shown(tmp_path):
    # SAN+PE[add] on PTB: the paper's 96.82.
    for seed, acc in enumerate([0.9680, 0.9685, 0.9678]):
        write_run(tmp_path / "close", "san-pe-add", seed, [0.5], [0.5], test_all=acc)
    for seed, acc in enumerate([0.9600, 0.9750, 0.9500]):
        write_run(tmp_path / "wide", "san-pe-add", seed, [0.5], [0.5], test_all=acc)
    for name, verdict in (("close", "equivalent within 1 at 95%"), ("wide", "not shown")):
        frame = sig.equivalence_frame(load_runs(tmp_path / name))
        row = frame[frame["metric"] == "all"].iloc[0]
        scores = np.array(sorted(load_runs(tmp_path / name)["test_all"])) * 100
        t_low = (scores.mean() - 95.82) / stats.sem(scores)  # by hand: the two t statistics
        t_high = (scores.mean() - 97.82) / stats.sem(scores)
        expected = max(stats.t.sf(t_low, 2), stats.t.cdf(t_high, 2))
        assert row["paper"] == 96.82 and row["p_tost"] == pytest.approx(expected, rel=1e-9)
        assert row["verdict"] == verdict
        inside = 95.82 < row["ci90_low"] and row["ci90_high"] < 97.82  # TOST = the 90% CI inside the margin
        assert inside == (verdict != "not shown")


def test_write_tables_writes_significance_and_equivalence(runs, tmp_path):
    few = runs[runs["corpus"] == "Few"]
    root = Path(few["run_dir"].iloc[0]).parents[2]  # the synthetic root: write_tables reads it again
    only_few = tmp_path / "runs"
    for run_dir in few["run_dir"]:
        (only_few / Path(run_dir).relative_to(root)).parent.mkdir(parents=True, exist_ok=True)
        Path(run_dir).rename(only_few / Path(run_dir).relative_to(root))
    written = tables.write_tables(only_few, tmp_path / "out")
    names = [p.name for p in written.paths]
    for name in ("significance_ptb", "equivalence_ptb"):
        assert f"{name}.md" in names and f"{name}.csv" in names
    assert "`convatt evaluate RUN --sentences` writes them" in " ".join(written.notes)
    md = (tmp_path / "out" / "significance_ptb.md").read_text()
    assert "SAN+PE[add]+Temp − SAN+PE[add]" in md and sig.NO_SENTENCES in md
    csv = pd.read_csv(tmp_path / "out" / "equivalence_ptb.csv")
    assert set(csv["verdict"]) <= {"not shown", "equivalent within 1 at 95%"} and len(csv) == 2 * 3


def test_t_interval_bands_over_seeds():
    values = [96.1, 96.5, 96.3]
    low, high = t_interval(values)
    expected = stats.t.interval(0.95, 2, loc=np.mean(values), scale=np.std(values, ddof=1) / np.sqrt(3))
    assert (low, high) == pytest.approx(expected)
    assert all(math.isnan(x) for x in t_interval([96.1]))
    curve = pd.DataFrame({"variant": ["a"] * 3 + ["b"], "step": 100, "dev_accuracy": values + [0.5]})
    bands = seed_bands(curve, ["variant", "step"], "dev_accuracy").set_index("variant")
    assert bands.loc["a", ["low", "high"]].tolist() == pytest.approx(expected)
    assert bands.loc["a", "n"] == 3 and bands.loc["b", "mean"] == 0.5 and math.isnan(bands.loc["b", "low"])


def test_sentence_scores_that_disagree_with_result_json_are_not_used(runs, tmp_path):
    clear = runs[runs["corpus"] == "Clear"].copy()
    clear.loc[clear["variant"] == "san-pe-add", "test_all"] += 0.001  # as if result.json were newer
    two = clear[clear["seed"] < 2]  # two seeds: no ASO, fast
    row = sig.comparison_frame(two).iloc[0]
    assert row["bootstrap_note"].startswith("per-sentence scores disagree with result.json")
    by_seed = two.pivot(index="seed", columns="variant", values="test_all")
    expected = float((100 * (by_seed["san-pe-add-conv"] - by_seed["san-pe-add"])).mean())
    assert math.isnan(row["ci_low"]) and row["diff"] == pytest.approx(expected, abs=1e-12)


def test_identical_predictions_give_a_point_interval():
    delta, tokens = np.zeros(50), TOKENS[:50].astype(float)
    assert sig.bootstrap_difference(delta, tokens) == (0.0, 0.0, 0.0)
    assert sig.permutation_p(delta, tokens) == 1.0
