"""Re-evaluate a finished run's model on a corpus split."""
from __future__ import annotations

from pathlib import Path

import keras

from convatt.data import Vocabularies, encode_split, load_corpus
from convatt.errors import ConvattError
from convatt.runs import RunConfig
from convatt.prediction import evaluate
from convatt.variants import make_config


def evaluate_run(run: str | Path, data: str | Path | None = None, split: str = "test") -> dict:
    """Accuracies (all / OOV / ambiguous / per tag) of `run`'s best model on a split."""
    run = Path(run)
    for name in ("config.json", "vocab.json", "model.keras"):
        if not (run / name).exists():
            raise ConvattError(f"not a finished run directory: {name} is missing", run)
    config = RunConfig.load(run)
    tagger = make_config(config.preset, config.variant, config.protocol)
    vocab = Vocabularies.load(run / "vocab.json")
    corpus = load_corpus(config.preset, data or config.data)
    encoded = encode_split(getattr(corpus, split), vocab, tagger.max_len, tagger.max_word_len)
    model = keras.saving.load_model(run / "model.keras")
    return evaluate(model, encoded, list(vocab.tags.tokens))
