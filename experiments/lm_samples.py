"""Greedy samples of the character language models of `make lm-all` (`make lm-samples`).

python experiments/lm_samples.py collect --runs RUNS [--seed 1] [--prompts 3] [--out docs/results/beyond]
    for each finished run RUNS/charlm/<variant>/seed<S>: the greedy text after a few prompts
    taken from the test text, once with each attention layer's cache and once by re-running
    the whole prefix (`convatt generate` and `--no-cache`), both timed, as lm_samples.csv;
    then lm_samples.md from it
python experiments/lm_samples.py render [--out docs/results/beyond]
    lm_samples.md again from lm_samples.csv (`make readme-tables` copies its table into
    docs/results/char_lm.md)

A prompt is the first --prompt-words words (and a space) of a test sentence: of the sentences
at k * n / --prompts (k = 0, 1, ...) of the run's test split, or the first one after it whose
prompt has only characters the run saw in training. The text runs to the model's last position
unless --length says otherwise.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from convatt.errors import ConvattError
from convatt.results.markdown import markdown_table, page
from convatt.rundir.storage import write_text

ROOT = Path(__file__).resolve().parents[1]
BEYOND = ROOT / "docs" / "results" / "beyond"
NAME = "lm_samples"


@dataclass(frozen=True)
class Sample:
    """One prompt's greedy continuation by one run, with and without the cache."""

    variant: str
    seed: int
    source_commit: str
    test_bits_per_symbol: float
    prompt: str
    cached: str
    whole_prefix: str
    cached_symbols_per_second: float
    whole_prefix_symbols_per_second: float
    largest_logit_difference: float  # |cached - whole prefix| over every step of the cached text

    @property
    def identical(self) -> bool:
        return self.cached == self.whole_prefix


def finished_runs(runs: Path, seed: int) -> list[Path]:
    """RUNS/charlm/<variant>/seed<seed> with a result.json, in the order of the char LM's settings."""
    from convatt.model.variants import CHARLM_VARIANTS

    found = {p.parent.parent.name: p.parent for p in (runs / "charlm").glob(f"*/seed{seed}/result.json")}
    if not found:
        raise ConvattError(f"no finished run RUNS/charlm/<variant>/seed{seed} (result.json) under {runs}")
    order = [v for v in CHARLM_VARIANTS if v in found] + sorted(set(found) - set(CHARLM_VARIANTS))
    return [found[v] for v in order]


def prompts_from_test_text(run: Path, count: int, words: int) -> list[str]:
    """`count` prompts from the run's test sentences (see the module's docstring)."""
    import json

    from convatt.data.ud import read_ud
    from convatt.rundir.run_config import RunConfig
    from convatt.rundir.schema import VOCAB_FILE

    config = RunConfig.load(run)
    seen = set(json.loads((run / VOCAB_FILE).read_text(encoding="utf-8"))["symbols"])
    sentences = read_ud(config.data_path(run)).test[: config.limit]
    candidates = [" ".join(form for form, _ in s[:words]) + " " for s in sentences]
    prompts = []
    for k in range(count):
        start = k * len(candidates) // count
        prompts += [next((c for c in candidates[start:] if set(c) <= seen and c not in prompts), None)]
    if None in prompts:
        raise ConvattError(f"fewer than {count} test sentences of {run} begin with characters it saw in training")
    return prompts


def run_samples(run: Path, prompts: list[str], length: int) -> list[Sample]:
    """Each prompt's greedy continuation by the run's model, cached and by the whole prefix."""
    from convatt.inference.generation import CausalSteps, Sampling, check_request, generate
    from convatt.inference.loading import load_model
    from convatt.rundir.run_result import RunResult

    result, steps, greedy = RunResult.load(run), CausalSteps(load_model(run)), Sampling(greedy=True)
    run_fields = (result.variant, result.seed, result.source_commit, result.test["bits_per_symbol"])
    samples = []
    for prompt in prompts:
        n = length or steps.max_len + 1 - len(prompt)  # 0: to the model's last position
        request = check_request(run, prompt, n)
        for use_cache in (True, False):  # traced once: the timed texts below start warm
            generate(steps, request.prompt_ids, 2, greedy, use_cache)
        cached, whole = (generate(steps, request.prompt_ids, n, greedy, use_cache) for use_cache in (True, False))
        text = ["".join(request.symbols[i] for i in made.ids) for made in (cached, whole)]
        rates = (cached.symbols_per_second, whole.symbols_per_second)
        gap = largest_logit_difference(steps, request.prompt_ids + cached.ids[:-1], len(request.prompt_ids))
        samples.append(Sample(*run_fields, prompt, *text, *rates, gap))
    return samples


def largest_logit_difference(steps, ids: list[int], start: int) -> float:
    """The largest |cached - whole-prefix| logit at positions start - 1 ... of `ids` (the prompt: `ids[:start]`)."""
    import numpy as np

    gap = np.abs(steps.cached_logits(ids[:start], 0) - steps.whole_prefix_logits(ids[:start])).max()
    for i in range(start, len(ids)):
        step = steps.cached_logits(ids[i : i + 1], i) - steps.whole_prefix_logits(ids[: i + 1])
        gap = max(gap, np.abs(step).max())
    return float(gap)


def collect(runs: Path, seed: int, count: int, words: int, length: int) -> pd.DataFrame:
    """The samples of every finished run of `seed` as a frame (one row per run and prompt)."""
    rows = []
    for run in finished_runs(runs, seed):
        samples = run_samples(run, prompts_from_test_text(run, count, words), length)
        rows += [{**asdict(s), "identical": s.identical} for s in samples]
        print(f"{run}: {sum(s.identical for s in samples)} of {len(samples)} identical with and without the cache")
    return pd.DataFrame(rows)


def code_cell(text: str) -> str:
    """`text` as a Markdown table cell, verbatim: a code span, newlines shown as ⏎."""
    text = text.replace("\n", "⏎").replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _same_cell(sample) -> str:
    largest = f"largest logit difference {sample.largest_logit_difference:.1e}"
    return f"yes ({largest})" if sample.identical else f"no: {code_cell(sample.whole_prefix)} ({largest})"


def render(samples: pd.DataFrame) -> str:
    """lm_samples.md: the samples' table, what they are and where they come from."""
    from convatt.results.frames import label_of

    header = ["Setting", "Test bits per character", "Prompt", "Greedy continuation", "The same by the whole prefix"]
    rows = [
        [label_of(r.variant), f"{r.test_bits_per_symbol:.3f}", code_cell(r.prompt), code_cell(r.cached), same]
        for r, same in zip(samples.itertuples(), map(_same_cell, samples.itertuples()))
    ]
    seeds, commits = sorted(set(samples["seed"])), sorted(set(samples["source_commit"]))
    intro = (
        f"Greedy text of the character language models below (seed {', '.join(map(str, seeds))}; the code "
        f"that trained them: commit {', '.join(commits)}), after prompts from the test text, a character at a time "
        f"with each attention layer's cache; the last column compares it with re-running the whole prefix. "
        f"⏎ is a newline (a sentence's end). Written by `experiments/lm_samples.py` from {NAME}.csv."
    )
    same = int(samples["identical"].sum())
    note = f"{same} of {len(samples)} texts are the same with and without the cache."
    return page("Character language model: greedy samples", intro, [], markdown_table(header, rows), note)


def write_page(out: Path) -> None:
    # the text columns as text: a commit such as "70065e4" or a prompt of digits would be read as a number
    text = {name: str for name in ("variant", "source_commit", "prompt", "cached", "whole_prefix")}
    frame = pd.read_csv(out / f"{NAME}.csv", keep_default_na=False, dtype=text)
    write_text(out / f"{NAME}.md", render(frame))
    print(out / f"{NAME}.md")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("collect")
    p.add_argument("--runs", type=Path, required=True, help="the runs of make lm-all (RUNS)")
    p.add_argument("--seed", type=int, default=1, help="the seed whose runs write (default 1)")
    p.add_argument("--prompts", type=int, default=3, help="prompts per run (default 3)")
    p.add_argument("--prompt-words", type=int, default=3, help="words of a test sentence per prompt (default 3)")
    p.add_argument("--length", type=int, default=0, help="symbols to generate (default 0: to the last position)")
    for command in (p, sub.add_parser("render")):
        command.add_argument("--out", type=Path, default=BEYOND, help="where lm_samples.csv/.md go")
    args = parser.parse_args(argv)
    try:
        if args.command == "collect":
            frame = collect(args.runs, args.seed, args.prompts, args.prompt_words, args.length)
            write_text(args.out / f"{NAME}.csv", frame.to_csv(index=False, float_format="%.4g"))
        write_page(args.out)
    except (ConvattError, OSError) as error:
        print(f"lm_samples: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
