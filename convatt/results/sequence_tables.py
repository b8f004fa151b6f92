"""The causal sequence tasks' tables (`convatt.sequence`): numbers first, then Markdown.

toy_frame(runs)      find-the-block: test error (%, 100 - exact match) per variant, mean ±
                     std over seeds and each seed's, beside Multi-Token Attention's numbers
charlm_frame(runs)   char LM: test bits per character and next-character accuracy (%)
sequence_tables(runs, histories, curves)   the `Table`s `convatt tables` writes for them,
                     with learning efficiency as the tagger's (`convatt.results.efficiency`)
"""

from __future__ import annotations

import pandas as pd

from convatt.data.formats import CHAR_LM, TOY
from convatt.results import efficiency
from convatt.results.frames import in_model_order
from convatt.results.markdown import Table, fmt, markdown_table, page
from convatt.results.stats import STD_DDOF, seed_stats

# Multi-Token Attention (Golovneva et al. 2025), find-the-block with N=5, L=2: test error (%) per
# seed (42, 43, 44) on an H100, from facebookresearch/RAM projects/mta/toy_task/README.md. Their
# scale: 4 layers, dim 256, 2 heads, sequence 321, 100k steps of batch 64, 1M training samples.
MTA_TOY_ERRORS = {"Transformer (MTA's baseline)": (77.7, 75.3, 1.9), "MTA": (0.0, 0.0, 0.2)}


def _seeds_cell(group: pd.DataFrame, column: str, digits: int = 2) -> str:
    return ", ".join(f"{int(s)}: {v:.{digits}f}" for s, v in zip(group["seed"], group[column]))


def _over_seeds(runs: pd.DataFrame, values: dict[str, pd.Series]) -> pd.DataFrame:
    """Per corpus, setting and variant: seeds, and mean / std / per-seed text of each value."""
    frame = runs.assign(**values).sort_values("seed")
    rows = []
    for (corpus, setting, variant), group in frame.groupby(["corpus", "setting", "variant"], sort=False):
        row = dict(corpus=corpus, setting=setting, variant=variant, model=group["model"].iloc[0], seeds=len(group))
        for name in values:
            row[name], row[f"{name}_std"], _ = seed_stats(group[name])
            row[f"{name}_per_seed"] = _seeds_cell(group, name, 3 if name == "bpc" else 2)
        rows.append(row)
    return in_model_order(pd.DataFrame(rows), ["corpus"]) if rows else pd.DataFrame(rows)


def _bits(mean: float, std: float) -> str:
    """Bits with three decimals, "± std" when there are two seeds or more."""
    return f"{mean:.3f}" + ("" if pd.isna(std) else f" ± {std:.3f}")


def toy_frame(runs: pd.DataFrame) -> pd.DataFrame:
    toy = runs[runs["preset"] == TOY.name]
    return _over_seeds(toy, {"error": 100 * (1 - toy["test_all"]), "dev_error": 100 * (1 - toy["dev_all"])})


def charlm_frame(runs: pd.DataFrame) -> pd.DataFrame:
    lm = runs[runs["preset"] == CHAR_LM.name]
    return _over_seeds(lm, {"bpc": lm["test_bits_per_symbol"], "accuracy": 100 * lm["test_all"]})


def toy_table(runs: pd.DataFrame) -> Table:
    frame = toy_frame(runs)
    rows = [
        [r["corpus"], r["model"], str(r["seeds"]), fmt(r["error"], r["error_std"]), r["error_per_seed"],
         fmt(r["dev_error"], r["dev_error_std"])]
        for _, r in frame.iterrows()
    ]  # fmt: skip
    for name, errors in MTA_TOY_ERRORS.items():
        per_seed = ", ".join(f"{seed}: {e}" for seed, e in zip((42, 43, 44), errors))
        rows.append(["MTA's (their scale)", name, "3", fmt(*seed_stats(errors)[:2]), per_seed, "–"])
    header = ["Task", "Model", "Seeds", "Test error (%)", "Per seed", "Dev error (%)"]
    title = "Find-the-block: test error (%), exact match of the answer block"
    intro = (
        "Error = 100 - exact match: a sample is right when the model's argmax is the answer's "
        "symbol at each of its positions (given the true symbols before it), which is exactly when "
        f"greedy decoding writes the block. Mean ± standard deviation over seeds (ddof={STD_DDOF}). "
        "MTA's rows are Multi-Token Attention's published numbers at their scale (4 layers, dim 256, "
        "2 heads, sequence 321, 100k steps of batch 64), not runs of ours."
    )
    return Table("toy_task", title, frame, page(title, intro, [], markdown_table(header, rows)))


def charlm_table(runs: pd.DataFrame) -> Table:
    frame = charlm_frame(runs)
    rows = [
        [r["corpus"], r["model"], str(r["seeds"]), _bits(r["bpc"], r["bpc_std"]), r["bpc_per_seed"],
         fmt(r["accuracy"], r["accuracy_std"])]
        for _, r in frame.iterrows()
    ]  # fmt: skip
    header = ["Text", "Model", "Seeds", "Test bits per character", "Per seed", "Next-char accuracy (%)"]
    title = "Character language model: test bits per character"
    intro = (
        "Bits per character of the test text (the treebank's test split), each character predicted "
        f"from up to 128 before it; lower is better. Mean ± standard deviation over seeds (ddof={STD_DDOF})."
    )
    return Table("char_lm", title, frame, page(title, intro, [], markdown_table(header, rows)))


def sequence_tables(runs: pd.DataFrame, histories: pd.DataFrame, curves: pd.DataFrame) -> list[Table]:
    """The tables of the sequence presets present in `runs`, each with its learning efficiency."""
    tables = []
    for fmt_, make in ((TOY, toy_table), (CHAR_LM, charlm_table)):
        if (runs["preset"] == fmt_.name).any():
            tables += [make(runs), efficiency.preset_efficiency_table(runs, histories, curves, fmt_)]
    return tables
