"""The causal sequence tasks' tables (`convatt.sequence`): numbers first, then Markdown.

toy_frame(runs)      find-the-block: test error (%, 100 - exact match) per variant, mean ±
                     std over seeds and each seed's, beside Multi-Token Attention's numbers
charlm_frame(runs)   char LM: test bits per character and next-character accuracy (%)
                     (both frames: the parameters and a t-interval over seeds beside the std)
charlm_baselines(runs)   n-gram models of the char LM runs' text (`convatt.sequence.ngram`)
seed_difference_frame(runs, values)   each comparison's per-seed differences and their
                     t-interval over seeds (the significance tables resample samples, seeds fixed)
sequence_tables(runs, histories, curves)   the `Table`s `convatt tables` writes for them,
                     with learning efficiency as the tagger's (`convatt.results.efficiency`)
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pandas as pd

from convatt.data.formats import CHAR_LM, TOY, DataFormat
from convatt.errors import ConvattError
from convatt.results import efficiency
from convatt.results.frames import in_model_order, label_of
from convatt.results.markdown import Table, fmt, markdown_table, page
from convatt.results.significance import comparisons
from convatt.results.stats import STD_DDOF, seed_stats, t_interval

# Multi-Token Attention (Golovneva et al. 2025), find-the-block with N=5, L=2: test error (%) per
# seed (42, 43, 44) on an H100, from facebookresearch/RAM projects/mta/toy_task/README.md. Their
# scale: 4 layers, dim 256, 2 heads, sequence 321, 100k steps of batch 64, 1M training samples.
MTA_TOY_ERRORS = {"Transformer (MTA's baseline)": (77.7, 75.3, 1.9), "MTA": (0.0, 0.0, 0.2)}


CONFIDENCE = 0.95
SEED_INTERVAL = (
    f"{100 * CONFIDENCE:g}% CI over seeds: the Student-t interval of the mean over the seeds (n - 1 degrees "
    "of freedom), the spread of the seeds' results, which resampling the test samples with the seeds fixed "
    "(the significance tables' bootstrap) leaves out."
)


def _seeds_cell(group: pd.DataFrame, column: str, digits: int = 2) -> str:
    return ", ".join(f"{int(s)}: {v:.{digits}f}" for s, v in zip(group["seed"], group[column]))


def _count(values: pd.Series) -> float:
    """The runs' weights (result.json's `parameters`, the same for every seed), NaN if unknown."""
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.iloc[0]) if len(values) and values.nunique() == 1 else math.nan


def _over_seeds(runs: pd.DataFrame, values: dict[str, pd.Series]) -> pd.DataFrame:
    """Per corpus, setting and variant: seeds, weights, and mean / std / t-interval over seeds /
    per-seed text of each value."""
    frame = runs.assign(**values).sort_values("seed")
    rows = []
    for (corpus, setting, variant), group in frame.groupby(["corpus", "setting", "variant"], sort=False):
        row = dict(corpus=corpus, setting=setting, variant=variant, model=group["model"].iloc[0], seeds=len(group))
        row["parameters"] = _count(group["parameters"]) if "parameters" in group else math.nan
        for name in values:
            row[name], row[f"{name}_std"], _ = seed_stats(group[name])
            row[f"{name}_t_low"], row[f"{name}_t_high"] = t_interval(group[name], CONFIDENCE)
            row[f"{name}_per_seed"] = _seeds_cell(group, name, 3 if name == "bpc" else 2)
        rows.append(row)
    return in_model_order(pd.DataFrame(rows), ["corpus"]) if rows else pd.DataFrame(rows)


def _bits(mean: float, std: float) -> str:
    """Bits with three decimals, "± std" when there are two seeds or more."""
    return f"{mean:.3f}" + ("" if pd.isna(std) else f" ± {std:.3f}")


def _interval(low: float, high: float, digits: int = 2) -> str:
    return "–" if pd.isna(low) else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _count_cell(count: float) -> str:
    return "–" if pd.isna(count) else f"{int(count):,}"


def toy_frame(runs: pd.DataFrame) -> pd.DataFrame:
    toy = runs[runs["preset"] == TOY.name]
    return _over_seeds(toy, {"error": 100 * (1 - toy["test_all"]), "dev_error": 100 * (1 - toy["dev_all"])})


def charlm_frame(runs: pd.DataFrame) -> pd.DataFrame:
    lm = runs[runs["preset"] == CHAR_LM.name]
    return _over_seeds(lm, {"bpc": lm["test_bits_per_symbol"], "accuracy": 100 * lm["test_all"]})


def _mta_rows() -> list[list[str]]:
    rows = []
    for name, errors in MTA_TOY_ERRORS.items():
        per_seed = ", ".join(f"{seed}: {e}" for seed, e in zip((42, 43, 44), errors))
        mean, std, _ = seed_stats(errors)
        rows.append(
            ["MTA's (their scale)", name, "–", "3", fmt(mean, std), _interval(*t_interval(errors)), per_seed, "–"]
        )
    return rows


def toy_table(runs: pd.DataFrame) -> Table:
    frame = toy_frame(runs)
    rows = [
        [r["corpus"], r["model"], _count_cell(r["parameters"]), str(r["seeds"]), fmt(r["error"], r["error_std"]),
         _interval(r["error_t_low"], r["error_t_high"]), r["error_per_seed"], fmt(r["dev_error"], r["dev_error_std"])]
        for _, r in frame.iterrows()
    ]  # fmt: skip
    header = ["Task", "Model", "Parameters", "Seeds", "Test error (%)", "95% CI over seeds (t)", "Per seed"]
    header += ["Dev error (%)"]
    title = "Find-the-block: test error (%), exact match of the answer block"
    intro = (
        "Error = 100 - exact match: a sample is right when the model's argmax is the answer's "
        "symbol at each of its positions (given the true symbols before it), which is exactly when "
        f"greedy decoding writes the block. Mean ± standard deviation over seeds (ddof={STD_DDOF}). "
        f"{SEED_INTERVAL} Parameters: the model's weights (result.json's `parameters`). "
        "MTA's rows are Multi-Token Attention's published numbers at their scale (4 layers, dim 256, "
        "2 heads, sequence 321, 100k steps of batch 64), not runs of ours; their parameters are not given here."
    )
    markdown = page(title, intro, [], markdown_table(header, rows + _mta_rows()))
    return Table("toy_task", title, frame, markdown)


def _ngram_rows(baselines: pd.DataFrame) -> list[list[str]]:
    return [
        [r["corpus"], r["model"], f"{int(r['stored_counts']):,} counts", "–", f"{r['test_bpc']:.3f}", "–", "–", "–"]
        for _, r in baselines.iterrows()
    ]


def charlm_table(runs: pd.DataFrame, baselines: pd.DataFrame | None = None, notes: list[str] | None = None) -> Table:
    """The LM runs' rows, then `baselines` (`charlm_baselines`: n-gram models of the same text)."""
    frame = charlm_frame(runs)
    rows = [
        [r["corpus"], r["model"], _count_cell(r["parameters"]), str(r["seeds"]), _bits(r["bpc"], r["bpc_std"]),
         _interval(r["bpc_t_low"], r["bpc_t_high"], 3), r["bpc_per_seed"], fmt(r["accuracy"], r["accuracy_std"])]
        for _, r in frame.iterrows()
    ]  # fmt: skip
    if baselines is not None and not baselines.empty:
        rows += _ngram_rows(baselines)
        frame = pd.concat([frame, baselines.assign(bpc=baselines["test_bpc"])], ignore_index=True)
    header = ["Text", "Model", "Parameters", "Seeds", "Test bits per character", "95% CI over seeds (t)", "Per seed"]
    header += ["Next-char accuracy (%)"]
    title = "Character language model: test bits per character"
    intro = (
        "Bits per character of the test text (the treebank's test split), each character predicted "
        f"from up to 128 before it; lower is better. Mean ± standard deviation over seeds (ddof={STD_DDOF}). "
        f"{SEED_INTERVAL} Parameters: the model's weights (result.json's `parameters`). The n-gram rows "
        "(`convatt.sequence.ngram`): interpolated Kneser-Ney models fitted on the same training "
        "chunks, scored on the same test characters with the same vocabulary and OOV symbol, each "
        "character from the up to n - 1 before it in its chunk; their parameters are the counts they store."
    )
    notes = notes or []
    return Table("char_lm", title, frame, page(title, intro, notes, markdown_table(header, rows)), notes)


def charlm_baselines(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per corpus of the char LM runs, `ngram_baselines` of the text its first run read (the data
    and limit of its config.json, encoded as the trainer encodes it); notes: corpora without."""
    from convatt.rundir.run_config import RunConfig
    from convatt.sequence.ngram import NGRAM_COLUMNS, ngram_baselines
    from convatt.training.sequence_trainer import prepare_sequences

    frames, notes = [], []
    lm = runs[runs["preset"] == CHAR_LM.name].sort_values("run_dir")
    for corpus, group in lm.groupby("corpus", sort=False):
        run_dir = Path(group["run_dir"].iloc[0])
        try:
            config = RunConfig.load(run_dir)
            data = prepare_sequences(dataclasses.replace(config, data=config.data_path(run_dir)))
        except (ConvattError, OSError) as e:
            notes.append(f"No n-gram rows for {corpus}: its text could not be read ({e}).")
            continue
        frames.append(ngram_baselines(data.train, data.dev, data.test, len(data.symbols)).assign(corpus=corpus))
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*NGRAM_COLUMNS, "corpus"])), notes


# ---------------------------------------------------------------- differences over seeds


def seed_difference_frame(runs: pd.DataFrame, values: dict[str, pd.Series]) -> pd.DataFrame:
    """Per corpus and setting, each comparison of `significance.comparisons` over the seeds both
    ran: per value, the mean of the per-seed differences (variant − reference), their t-interval
    (paired seeds, n - 1 degrees of freedom) and each seed's difference."""
    frame = runs.assign(**values)
    rows = []
    for (corpus, setting), group in frame.groupby(["corpus", "setting"], sort=False):
        for variant, reference in comparisons(set(group["variant"])):
            v = group[group["variant"] == variant].set_index("seed")
            r = group[group["variant"] == reference].set_index("seed")
            seeds = sorted(set(v.index) & set(r.index))
            row = dict(corpus=corpus, setting=setting, variant=variant, reference=reference, seeds=len(seeds))
            row.update(model=label_of(variant), against=label_of(reference))
            for name in values:
                diffs = v.loc[seeds, name] - r.loc[seeds, name]
                row[name] = float(diffs.mean()) if seeds else math.nan
                row[f"{name}_t_low"], row[f"{name}_t_high"] = t_interval(diffs, CONFIDENCE)
                row[f"{name}_per_seed"] = ", ".join(
                    f"{s}: {d:+.{3 if name == 'bpc' else 2}f}" for s, d in diffs.items()
                )
            rows.append(row)
    return pd.DataFrame(rows)


def _signed_interval(low: float, high: float, digits: int) -> str:
    return "–" if pd.isna(low) else f"[{low:+.{digits}f}, {high:+.{digits}f}]"


def seed_difference_table(runs: pd.DataFrame, task: DataFormat) -> Table:
    """`seeds_<preset>`: the differences of `seed_difference_frame` in test accuracy (points; for
    the char LM also in bits per character), beside the significance tables' per-sample ones."""
    preset = runs[runs["preset"] == task.name]
    values = {"accuracy": 100 * preset["test_all"]}
    if task.task == "char-lm":
        values["bpc"] = preset["test_bits_per_symbol"]
    frame = seed_difference_frame(preset, values)
    header, rows = ["Corpus", "Comparison", "Seeds"], []
    for name in values:
        what = "bits per character" if name == "bpc" else "accuracy, points"
        header += [f"Δ {what}", "Per seed", f"{100 * CONFIDENCE:g}% CI over seeds (t)"]
    for _, r in frame.iterrows():
        row = [r["corpus"], f"{r['model']} − {r['against']}", str(r["seeds"])]
        for name in values:
            digits = 3 if name == "bpc" else 2
            row += [
                f"{r[name]:+.{digits}f}",
                r[f"{name}_per_seed"],
                _signed_interval(r[f"{name}_t_low"], r[f"{name}_t_high"], digits),
            ]
        rows.append(row)
    accuracy = "exact match" if task.task == "find-block" else "next-character accuracy"
    title = f"Differences over seeds: {task.label} ({accuracy}), variants against SAN+PE[add]"
    intro = (
        f"Per comparison, the difference of each seed's test {accuracy} (and, for the character LM, bits "
        "per character) between the variant and its reference, their mean and the "
        f"{100 * CONFIDENCE:g}% Student-t interval of that mean over the paired seeds (n - 1 degrees of "
        "freedom): it includes the variation over seeds, which the significance tables' bootstrap over "
        "test samples (seeds fixed) leaves out. With 3 seeds t = 4.30: a wide interval."
    )
    return Table(f"seeds_{task.name}", title, frame, page(title, intro, [], markdown_table(header, rows)))


def sequence_tables(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> list[Table]:
    """The tables of the sequence presets present in `runs`: the results (the char LM's with its
    n-gram baselines), the differences over seeds and the learning efficiency."""
    tables = []
    for task in (TOY, CHAR_LM):
        if not (runs["preset"] == task.name).any():
            continue
        results = toy_table(runs) if task is TOY else charlm_table(runs, *charlm_baselines(runs))
        tables += [results, seed_difference_table(runs, task)]
        tables.append(efficiency.preset_efficiency_table(runs, histories, curves, task))
    return tables
