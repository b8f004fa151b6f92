"""Re-evaluate a finished run's model on a corpus split."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from convatt.data import Vocabularies, encode_split, load_corpus
from convatt.errors import ConvattError
from convatt.model.prediction import evaluate
from convatt.model.variants import make_config
from convatt.run.modelfiles import MODEL_LOST_REMEDY, load_keras_model
from convatt.run.schema import RunConfig
from convatt.training.sentence_scores import FILES, write_sentence_scores
from convatt.training.trainer import describe_unseen_tags, unseen_tags


def _finished_run_dir(run: str | Path) -> Path:
    """`run` as a Path, or a `ConvattError` when it is no finished run directory."""
    run = Path(run)
    if not run.is_dir():
        raise ConvattError("run directory not found" if not run.exists() else "not a directory", run)
    for name in ("config.json", "vocab.json", "model.keras"):
        if not (run / name).exists():
            raise ConvattError(f"not a finished run directory: {name} is missing", run)
    return run


def evaluate_run(
    run: str | Path,
    data: str | Path | None = None,
    split: str = "test",
    warn: Callable[[str], None] = lambda line: None,
) -> dict:
    """Accuracies (all / OOV / ambiguous / per tag) of `run`'s best model on a split;
    what could surprise a reader of them goes to `warn`."""
    run = _finished_run_dir(run)
    config = RunConfig.load(run)
    tagger = make_config(config.preset, config.variant, config.protocol)
    vocab = Vocabularies.load(run / "vocab.json")
    trained_on = load_corpus(config.preset, config.data_path(run))
    corpus = trained_on if data is None else load_corpus(config.preset, data)
    sentences = getattr(corpus, split)
    if config.limit:
        warn(
            f"note: this run trained on at most {config.limit:,} sentences per split (--limit); this scores "
            f"the whole {split} split ({len(sentences):,} sentences)"
        )
    unseen = unseen_tags(trained_on.train[: config.limit], sentences)
    if unseen:
        warn("warning: " + describe_unseen_tags(unseen, split))
    encoded = encode_split(sentences, vocab, tagger.max_len, tagger.max_word_len)
    model = load_keras_model(run / "model.keras", MODEL_LOST_REMEDY)
    return evaluate(model, encoded, list(vocab.tags.tokens))


def write_run_sentence_scores(run: str | Path) -> list[Path]:
    """Recompute a finished run's per-sentence scores (test and dev, `convatt.training.sentence_scores`)
    from its saved model on its own corpus, as it trained (`--limit` included); returns the files."""
    run = _finished_run_dir(run)
    config = RunConfig.load(run)
    tagger = make_config(config.preset, config.variant, config.protocol, mask_padding=config.mask_padding)
    vocab = Vocabularies.load(run / "vocab.json")
    corpus = load_corpus(config.preset, config.data_path(run))
    encoded = {
        name: encode_split(getattr(corpus, name)[: config.limit], vocab, tagger.max_len, tagger.max_word_len)
        for name in FILES
    }
    model = load_keras_model(run / "model.keras", MODEL_LOST_REMEDY)
    return write_sentence_scores(run, model, config, tagger.max_len, encoded)
