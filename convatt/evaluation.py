"""Re-evaluate a finished run's model on a corpus split."""
from __future__ import annotations

from pathlib import Path

import keras

from convatt.data import Vocabularies, encode_split, load_corpus
from convatt.errors import ConvattError
from convatt.rundir import read_json
from convatt.training import evaluate
from convatt.variants import make_config


def evaluate_run(run: str | Path, data: str | Path | None = None, split: str = "test") -> dict:
    """Accuracies (all / OOV / ambiguous / per tag) of `run`'s best model on a split."""
    run = Path(run)
    for name in ("config.json", "vocab.json", "model.keras"):
        if not (run / name).exists():
            raise ConvattError(f"not a finished run directory: {name} is missing", run)
    opts = read_json(run / "config.json")
    config = make_config(opts["preset"], opts["variant"])
    vocab = Vocabularies.load(run / "vocab.json")
    corpus = load_corpus(opts["preset"], data or opts["data"])
    encoded = encode_split(getattr(corpus, split), vocab.words, vocab.chars, vocab.tags, vocab.ambiguous,
                           config.max_len, config.max_word_len)
    model = keras.saving.load_model(run / "model.keras")
    return evaluate(model, encoded, list(vocab.tags.tokens))
