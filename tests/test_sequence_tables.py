"""The causal sequence tasks' tables (`convatt.results.sequence_tables`): parameters, intervals
over seeds against SciPy, differences over paired seeds, the n-gram rows."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from convatt.data.formats import CHAR_LM, TOY
from convatt.results.sequence_tables import (
    charlm_baselines,
    charlm_frame,
    charlm_table,
    seed_difference_frame,
    seed_difference_table,
    toy_table,
)

PARAMETERS = {"san-pe-add": 126_477, "san-pe-add-conv": 323_597, "san-pe-add-conv2d": 126_517}


def runs_frame(preset: str, seeds: dict[str, list[int]], rng: np.random.Generator) -> pd.DataFrame:
    labels = {
        "san-pe-add": "SAN+PE[add]",
        "san-pe-add-conv": "SAN+PE[add]+Conv",
        "san-pe-add-conv2d": "SAN+PE[add]+Conv2d",
    }
    rows = [
        dict(preset=preset, corpus="C", setting="", variant=v, model=labels[v], seed=s, run_dir=f"{v}/{s}",
             test_all=rng.uniform(0.2, 0.4), dev_all=rng.uniform(0.2, 0.4), test_bits_per_symbol=rng.uniform(3, 4),
             parameters=PARAMETERS[v])
        for v, vs in seeds.items() for s in vs
    ]  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def lm_runs():
    seeds = {"san-pe-add": [1, 2, 3], "san-pe-add-conv": [1, 2, 3], "san-pe-add-conv2d": [2, 3, 4]}
    return runs_frame(CHAR_LM.name, seeds, np.random.default_rng(0))


def t_reference(values) -> tuple[float, float]:
    values = np.asarray(values, float)
    return stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))


def test_the_results_frame_has_parameters_and_a_t_interval_over_seeds(lm_runs):
    frame = charlm_frame(lm_runs).set_index("variant")
    conv = lm_runs[lm_runs["variant"] == "san-pe-add-conv"]
    assert frame.at["san-pe-add-conv", "parameters"] == 323_597
    low, high = t_reference(conv["test_bits_per_symbol"])
    assert frame.at["san-pe-add-conv", "bpc_t_low"] == pytest.approx(low)
    assert frame.at["san-pe-add-conv", "bpc_t_high"] == pytest.approx(high)
    assert frame.at["san-pe-add-conv", "bpc"] == pytest.approx(conv["test_bits_per_symbol"].mean())


def test_differences_over_seeds_pair_the_seeds_both_ran(lm_runs):
    values = {"accuracy": 100 * lm_runs["test_all"], "bpc": lm_runs["test_bits_per_symbol"]}
    frame = seed_difference_frame(lm_runs, values).set_index(["variant", "reference"])
    by = lambda v: lm_runs[lm_runs["variant"] == v].set_index("seed")
    diffs = 100 * (by("san-pe-add-conv2d").loc[[2, 3], "test_all"] - by("san-pe-add").loc[[2, 3], "test_all"])
    row = frame.loc[("san-pe-add-conv2d", "san-pe-add")]
    assert row["seeds"] == 2 and row["accuracy"] == pytest.approx(diffs.mean())
    assert (row["accuracy_t_low"], row["accuracy_t_high"]) == pytest.approx(t_reference(diffs))
    assert ("san-pe-add-conv2d", "san-pe-add-conv") in frame.index  # the convolutions' pair too
    markdown = seed_difference_table(lm_runs, CHAR_LM).markdown
    assert "Δ bits per character" in markdown and "95% CI over seeds (t)" in markdown


def test_the_char_lm_table_shows_parameters_and_the_ngram_rows(lm_runs):
    baselines = pd.DataFrame(
        [dict(corpus="C", order=2, model="bigram (Kneser-Ney)", stored_counts=1879, dev_bpc=3.5, test_bpc=3.578)]
    )
    table = charlm_table(lm_runs, baselines)
    lines = table.markdown.splitlines()
    assert any("| SAN+PE[add]+Conv | 323,597 | 3 |" in line for line in lines)
    assert any("| bigram (Kneser-Ney) | 1,879 counts |" in line and "3.578" in line for line in lines)
    assert "seeds fixed" in table.markdown  # says which interval is which


def test_the_toy_table_has_parameters_and_the_mta_rows_none():
    runs = runs_frame(TOY.name, {"san-pe-add": [1, 2], "san-pe-add-conv2d": [1, 2]}, np.random.default_rng(1))
    lines = toy_table(runs).markdown.splitlines()
    assert any("| SAN+PE[add]+Conv2d | 126,517 | 2 |" in line for line in lines)
    assert any("| MTA | – | 3 |" in line for line in lines)


def test_the_committed_tables_render_again_from_their_per_seed_numbers():
    """experiments/beyond_pages.py reads the committed CSV's per-seed cells back into runs: the
    same seeds and numbers come out of the results frame again."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))
    import beyond_pages

    committed = pd.read_csv(beyond_pages.BEYOND / "char_lm.csv").dropna(subset=["seeds"])
    columns = {"bpc": "test_bits_per_symbol", "accuracy": "test_all"}
    runs = beyond_pages.per_run_frame(committed, CHAR_LM.name, columns)
    assert len(runs) == committed["seeds"].sum()
    frame = charlm_frame(runs.assign(test_all=runs["test_all"] / 100))
    assert list(frame["bpc_per_seed"]) == list(committed["bpc_per_seed"])
    assert list(frame["accuracy_per_seed"]) == list(committed["accuracy_per_seed"])


def test_a_run_whose_text_cannot_be_read_gets_a_note_not_a_traceback(lm_runs, tmp_path):
    runs = lm_runs.assign(run_dir=str(tmp_path / "gone"))
    baselines, notes = charlm_baselines(runs)
    assert baselines.empty and len(notes) == 1 and "No n-gram rows for C" in notes[0]
    table = charlm_table(runs, baselines, notes)
    assert table.notes == notes and notes[0] in table.markdown
