"""Re-evaluate a finished run's model on a corpus split."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from convatt.data import encode_split, load_corpus
from convatt.data.corpus import describe_unseen_tags, unseen_tags
from convatt.inference.loading import load_model, load_run_config, load_run_corpus, load_vocabularies
from convatt.model.prediction import evaluate
from convatt.training.sentence_scores import FILES, PredictedSplit, SentenceRows, write_sentence_scores


def evaluate_run(
    run: str | Path,
    data: str | Path | None = None,
    split: str = "test",
    warn: Callable[[str], None] = lambda line: None,
) -> dict:
    """Accuracies (all / OOV / ambiguous / per tag) of `run`'s best model on a split;
    what could surprise a reader of them goes to `warn`."""
    run = Path(run)
    config = load_run_config(run)
    tagger = config.tagger_config()
    vocab = load_vocabularies(run)
    corpus = load_run_corpus(run, config, data)
    own = config.data_path(run)  # what it trained on; moved: --data is taken for it
    trained_on = corpus if data is None or not Path(own).exists() else load_corpus(config.preset, own)
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
    return evaluate(load_model(run), encoded, list(vocab.tags.tokens))


def write_run_sentence_scores(run: str | Path) -> list[Path]:
    """Recompute a finished run's per-sentence scores (test and dev, `convatt.training.sentence_scores`)
    from its saved model on its own corpus, as it trained (`--limit` included); returns the files.
    The corpus is read once: the splits and their sentences' rows come from the same reading."""
    run = Path(run)
    config = load_run_config(run)
    tagger = config.tagger_config()
    vocab = load_vocabularies(run)
    corpus = load_run_corpus(run, config, movable=False).limited(config.limit)
    rows, model = SentenceRows.of(corpus, tagger.max_len), load_model(run)
    encode = lambda name: encode_split(getattr(corpus, name), vocab, tagger.max_len, tagger.max_word_len)
    splits = [PredictedSplit.predict(model, name, encode(name), rows, config.eval_batch_size) for name in FILES]
    return write_sentence_scores(run, splits)
