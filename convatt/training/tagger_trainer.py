"""The paper's tagger through the training loop (`convatt.training.loop.Trainer`): its data
(a corpus, its vocabularies and word vectors), its model (`build_tagger`) and its result
(accuracy over all, OOV and ambiguous tokens and per tag, test_sentences.csv beside it)."""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass

import keras
import numpy as np

from convatt.data import (
    EncodedSplit,
    Vocabularies,
    build_vocabularies,
    corpus_files,
    encode_split,
    load_corpus,
    load_word_vectors,
)
from convatt.data.batching import split_batch
from convatt.data.corpus import describe_unseen_tags, unseen_tags
from convatt.model.prediction import predict_tags
from convatt.model.tagger import build_tagger
from convatt.model.variants import TaggerConfig
from convatt.protocol.metrics import batch_mean_accuracy, token_accuracy
from convatt.rundir.fingerprint import DataFingerprint
from convatt.rundir.run_config import RunConfig
from convatt.rundir.run_result import RunResult
from convatt.rundir.schema import VOCAB_FILE
from convatt.rundir.storage import write_atomically
from convatt.training.feed import Batch
from convatt.training.loop import Trainer
from convatt.training.sentence_scores import PredictedSplit, SentenceRows, write_sentence_scores
from convatt.training.state import DevScore, TrainState


@dataclass
class PreparedData:
    """A run's corpus, encoded with its vocabularies, and its word vectors."""

    vocab: Vocabularies
    train: EncodedSplit
    dev: EncodedSplit
    test: EncodedSplit
    corpus_name: str
    note: str
    is_sample: bool
    word_vectors: np.ndarray | None
    vectors_note: str
    fingerprint: DataFingerprint
    unseen_tags: dict[str, int]  # tags of dev/test never seen in training -> their token count
    sentence_rows: SentenceRows  # the encoded rows of each dev and test sentence (the sentence scores')


def out_of_vocabulary(corpus, words) -> set[str]:
    """The words of every split that `words` does not hold (the original inserted them all as id 1)."""
    return {w for split in (corpus.train, corpus.dev, corpus.test) for s in split for w, _ in s} - set(words.tokens)


def prepare_data(run: RunConfig, config: TaggerConfig) -> PreparedData:
    """Read the corpus, build vocabularies, encode, and load word vectors."""
    corpus = load_corpus(run.preset, run.data).limited(run.limit)
    vocab = build_vocabularies(corpus, run.preset, run.protocol)
    vectors, vectors_note = _word_vectors(run, config, corpus, vocab) if config.pretrained_words else (None, "")
    note = " ".join(s for s in [corpus.note, f"(--limit {run.limit})" if run.limit else ""] if s)
    encode = lambda sentences: encode_split(sentences, vocab, config.max_len, config.max_word_len)
    splits = {name: encode(getattr(corpus, name)) for name in ("train", "dev", "test")}
    return PreparedData(
        vocab,
        splits["train"],
        splits["dev"],
        splits["test"],
        corpus.name,
        note,
        corpus.name == "PTB-sample",
        vectors,
        vectors_note,
        _data_fingerprint(run, vocab, splits, vectors),
        unseen_tags(corpus.train, corpus.dev + corpus.test),
        SentenceRows.of(corpus, config.max_len),
    )


def _word_vectors(run: RunConfig, config: TaggerConfig, corpus, vocab: Vocabularies) -> tuple[np.ndarray | None, str]:
    """The frozen word vectors of a tagger with pretrained words (None: random ones), and a note on them."""
    if not run.embeddings:
        note = (
            "no --embeddings given: frozen random uniform(-0.05, 0.05) word vectors are used, "
            "so the numbers are not comparable to the paper's fastText runs"
        )
        return None, note
    vectors, found = load_word_vectors(
        run.embeddings,
        vocab.words,
        config.word_dim,
        limit=run.embeddings_limit,
        seed=run.seed,
        random_pad_row=run.protocol.pad_inputs == "original",
        oov_words=out_of_vocabulary(corpus, vocab.words) if run.protocol.oov_vector == "oov-word" else (),
    )
    return vectors, f"pretrained vectors for {found:,} of {len(vocab.words):,} words from {run.embeddings}"


def _data_fingerprint(run: RunConfig, vocab: Vocabularies, splits: dict, vectors) -> DataFingerprint:
    """What the run trains on: its data files, vocabularies, encoded splits and word vectors."""
    return DataFingerprint.measure(
        run.data,
        corpus_files(run.preset, run.data),
        {
            "words vocabulary": vocab.words.tokens,
            "chars vocabulary": vocab.chars.tokens,
            "tags vocabulary": vocab.tags.tokens,
            "ambiguous words": sorted(vocab.ambiguous),
            **{f"{name} split": list(dataclasses.astuple(split)) for name, split in splits.items()},
            "word vectors": vectors,
        },
    )


@dataclass(frozen=True)
class TaggedRows:
    """An encoded split's sentences as the tagger's batches (`convatt.training.feed.TrainRows`):
    its inputs with the char rows packed, the tags, weight 1 on each real token."""

    split: EncodedSplit
    few_shapes: bool  # the char rows padded to few shapes: an XLA-compiled model compiles each shape

    def __len__(self) -> int:
        return len(self.split.words)

    def batch(self, rows: np.ndarray) -> Batch:
        return split_batch(self.split, rows, few_shapes=self.few_shapes)

    def tokens(self, rows: np.ndarray) -> float:
        return float((self.split.tags[rows] != 0).sum())

    def varying_axes(self, batch: Batch) -> tuple[dict, int, int]:
        inputs, _, _ = batch
        return {name: 2 if name == "char_rows" else 1 for name in inputs}, 1, 1  # char_rows: its rows too


class TaggerTrainer(Trainer):
    """One run of the paper's tagger (`build_tagger`) on a tagging preset."""

    @functools.cached_property
    def config(self) -> TaggerConfig:
        """The tagger's architecture (the variant under the preset, shaped by the protocol)."""
        return self.run_config.tagger_config()

    def prepare(self) -> PreparedData:
        return prepare_data(self.run_config, self.config)

    def vocabularies(self, data: PreparedData) -> dict:
        return json.loads(data.vocab.to_json())

    def describe(self, data: PreparedData) -> None:
        unseen = describe_unseen_tags(data.unseen_tags) if data.unseen_tags else ""
        for note in (data.note, data.vectors_note, unseen):
            if note:
                self.log(f"note: {note}")
        text = data.vocab.to_json()  # written atomically: a kill never leaves half a vocab.json
        write_atomically(self.out / VOCAB_FILE, lambda tmp: tmp.write_text(text, encoding="utf-8"))
        v = data.vocab
        self.log(
            f"{data.corpus_name}: {len(data.train):,} / {len(data.dev):,} / {len(data.test):,} "
            f"train/dev/test sequences; {len(v.words):,} words, {len(v.chars):,} chars, {len(v.tags):,} labels"
        )

    def build(self, data: PreparedData) -> keras.Model:
        v = data.vocab
        return build_tagger(
            self.config,
            len(v.words),
            len(v.chars),
            len(v.tags),
            data.word_vectors,
            jit_compile=self.run_config.jit_compile,
            protocol=self.run_config.protocol,
            dtype_policy=self.run_config.precision,
        )

    def model_note(self, data: PreparedData) -> str:
        return f"protocol {self.run_config.protocol.label()}, {self.run_config.precision}"

    def train_rows(self, data: PreparedData, model: keras.Model) -> TaggedRows:
        return TaggedRows(data.train, few_shapes=bool(model.jit_compile))

    def measure_dev(self, model: keras.Model, dev: EncodedSplit) -> DevScore:
        run = self.run_config
        predicted = predict_tags(model, dev, run.eval_batch_size)
        return DevScore(token_accuracy(predicted, dev.tags), batch_mean_accuracy(predicted, dev.tags, run.batch_size))

    def result(self, model: keras.Model, data: PreparedData, state: TrainState, n_params: int) -> RunResult:
        """Dev and test, each predicted once: their accuracies and their sentence scores."""
        run, tag_names = self.run_config, list(data.vocab.tags.tokens)
        dev, test = (
            PredictedSplit.predict(model, name, getattr(data, name), data.sentence_rows, run.eval_batch_size)
            for name in ("dev", "test")
        )
        result = RunResult(
            is_sample=data.is_sample,
            vectors_note=data.vectors_note,
            mask_padding=run.mask_padding,
            dev=dev.accuracies(tag_names),
            test=test.accuracies(tag_names),
            **self.result_fields(data, state, n_params),
        )
        write_sentence_scores(self.out, [test, dev])
        return result

    def test_summary(self, result: RunResult) -> str:
        fmt = lambda v: "n/a" if v is None else f"{100 * v:.2f}"
        t = result.test
        return f"test accuracy all {fmt(t['all'])}  OOV {fmt(t['oov'])}  ambiguous {fmt(t['ambiguous'])}"

    def vocabulary_changes(self, data: PreparedData) -> list[str]:
        """For a run without a fingerprint: which of its saved vocabularies differ from the data's."""
        path = self.out / VOCAB_FILE
        if not path.exists():
            return []
        saved = Vocabularies.load(path)
        return [
            f"{name} vocabulary changed"
            for name in ("words", "chars", "tags")
            if getattr(saved, name).tokens != getattr(data.vocab, name).tokens
        ]
