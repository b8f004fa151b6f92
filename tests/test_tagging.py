"""convatt tag: a run's model tags CoNLL-U or text; the output scores as `convatt evaluate` does."""

import gzip
import itertools
import re
import subprocess
import sys

import conllu
import pytest
from cli_process import convatt
from helpers import LINES

import convatt as convatt_api
from convatt.data import read_conllu
from convatt.data.untagged import iter_blocks, read_untagged
from convatt.errors import ConvattError
from convatt.inference.evaluation import evaluate_run
from convatt.inference.loading import load_run
from convatt.inference.tagging import tag_blocks, tag_stream

TEST_FILE = LINES / "en_lines-ud-test.conllu.gz"


@pytest.fixture(scope="module")
def ud_run(tiny_ud_run):
    return tiny_ud_run


@pytest.fixture(scope="module")
def ud_model(ud_run):
    return load_run(ud_run)


def tag_text(trained, text: str, fmt: str, tmp_path, keep_columns: bool = True):
    source = tmp_path / f"input.{fmt}"
    source.write_text(text)
    blocks = read_untagged(source, fmt)
    return tag_blocks(trained.model, trained.vocab, trained.tagger_config, trained.tag_column, blocks, keep_columns)


def test_tagged_test_file_scores_what_evaluate_reports(ud_run, tmp_path):
    out = tmp_path / "tagged.conllu"
    r = convatt("tag", ud_run, "--input", TEST_FILE, "--output", out, "--keep-columns")
    assert r.returncode == 0, r.stderr[-2000:]
    gold, tagged = read_conllu(TEST_FILE), read_conllu(out)
    pairs = [(g, t) for gs, ts in zip(gold, tagged, strict=True) for (_, g), (_, t) in zip(gs, ts, strict=True)]
    accuracy = sum(g == t for g, t in pairs) / len(pairs)
    # two programs (`convatt tag`'s chunks against evaluate's batches: other shapes, other float
    # order): a near tie may flip a token or two; a misaligned or misread file costs hundreds
    assert accuracy == pytest.approx(evaluate_run(ud_run)["all"], abs=2 / len(pairs))
    # every other column and line as it was
    before = gzip.open(TEST_FILE, "rt").read().strip().split("\n")
    after = out.read_text().strip().split("\n")
    assert len(before) == len(after)
    for a, b in zip(before, after):
        fa, fb = a.split("\t"), b.split("\t")
        assert fa[:3] + fa[4:] == fb[:3] + fb[4:]
    stderr = r.stderr
    assert re.search(
        r"tagged 914 sentences \(15,623 tokens\) in [\d.]+ s: [\d,.]+ sentences/s, [\d,]+ tokens/s", stderr
    )
    assert "sentence(s) longer than 60 tokens were tagged in consecutive pieces" in stderr


def test_multiword_tokens_and_empty_nodes_pass_through(ud_model, tmp_path):
    lines = [
        "# sent_id = a",
        "# text = I'm here",
        "1-2\tI'm\t_\t_\t_\t_\t_\t_\t_\t_",
        "1\tI\tI\t_\tPRON\tCase=Nom\t3\tnsubj\t_\t_",
        "2\t'm\tbe\t_\t_\t_\t3\tcop\t_\t_",
        "3\there\there\t_\t_\t_\t0\troot\t_\tSpaceAfter=No",
        "3.1\tis\t_\t_\t_\t_\t_\t_\t3:cop\t_",
    ]
    text, stats = tag_text(ud_model, "\n".join(lines) + "\n\n# a comment-only block\n", "conllu", tmp_path)
    out = text.split("\n")
    assert out[:3] == lines[:3] and out[6] == lines[6] and out[8] == "# a comment-only block"
    real_tags = set(ud_model.vocab.tags.tokens[2:])
    for i in (3, 4, 5):
        fields, original = out[i].split("\t"), lines[i].split("\t")
        assert fields[3] in real_tags
        assert fields[:3] + fields[4:] == original[:3] + original[4:]
    assert (stats.sentences, stats.tokens) == (1, 3)


def test_long_sentences_are_tagged_in_pieces_and_long_words_by_their_start(ud_model, tmp_path):
    words = [form for s in read_conllu(TEST_FILE)[:30] for form, _ in s][:130]
    pieces = [words[:60], words[60:120], words[120:]]
    whole, stats = tag_text(ud_model, " ".join(words) + "\n", "text", tmp_path)
    apart, _ = tag_text(ud_model, "\n".join(" ".join(p) for p in pieces) + "\n", "text", tmp_path)
    tags = lambda text: [line.split("\t")[3] for line in text.split("\n") if line[:1].isdigit()]
    assert len(tags(whole)) == 130 and tags(whole) == tags(apart)
    assert stats.long_sentences == 1
    # two unknown words that share their first 20 characters look the same to the model
    a, b = "x" * 20 + "yyyyyyyy", "x" * 20 + "zzzzzzzzzzzz"
    text, stats = tag_text(ud_model, f"the {a} is here\nthe {b} is here\n", "text", tmp_path)
    assert tags(text)[:4] == tags(text)[4:] and stats.long_words == 2


@pytest.mark.jax_too
def test_a_ptb_run_fills_xpos_from_plain_text_on_stdin(small_run):
    run = small_run
    r = convatt("tag", run, "--format", "text", input="The dog barks .\n\nIt  rains\n")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [line.split("\t") for line in r.stdout.split("\n") if line[:1].isdigit()]
    assert [f[1] for f in rows] == ["The", "dog", "barks", ".", "It", "rains"]
    tags = set(load_run(run).vocab.tags.tokens[2:])
    assert all(f[3] == "_" and f[4] in tags for f in rows)
    assert "# text = It rains" in r.stdout
    assert re.search(r"tagged 2 sentences \(6 tokens\) .* tokens/s", r.stderr)


@pytest.mark.parametrize(
    "fmt, text, message",
    [
        ("conllu", "# x\n1\tA\t_\t_\t_\t_\t_\t_\t_\t_\n2\tB\t_\t_\t_\t_\t_\t_\t_\n", "input:3: expected 10"),
        ("conllu", "1\tA\t_\t_\t_\t_\t_\t_\t_\t_\n3\tB\t_\t_\t_\t_\t_\t_\t_\t_\n", "input:2: word IDs must count"),
        (
            "conllu",
            "The dog barks .\n",
            "input:1: expected 10 tab-separated fields (ID FORM LEMMA UPOS XPOS FEATS "
            "HEAD DEPREL DEPS MISC), found 1 (plain text? use --format text)",
        ),
        ("text", "A line\n1\tA\t_\t_\t_\t_\t_\t_\t_\t_\n", "input:2: this line looks like CoNLL-U"),
        ("conllu", "# only a comment\n", "input:1: no sentences to tag"),
        ("text", "\n  \n", "input:1: no sentences to tag"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path, fmt, text, message):
    (tmp_path / "input").write_text(text)
    with pytest.raises(ConvattError) as e:
        read_untagged(tmp_path / "input", fmt)
    assert message in str(e.value)


def test_cli_reports_bad_input_without_a_traceback(ud_run, tmp_path):
    r = convatt("tag", ud_run, "--format", "text", input=b"fine\nnot \xff utf-8\n", text=False)
    assert r.returncode == 2
    assert r.stderr.decode().strip().splitlines()[-1].startswith("convatt: error: <stdin>:2: not valid UTF-8")
    r = convatt("tag", tmp_path / "no-run", "--input", TEST_FILE)
    assert r.returncode == 2 and "run directory not found" in r.stderr


def test_columns_the_model_did_not_predict_are_emptied_and_conllu_parses_the_output(ud_model, tmp_path):
    lines = [
        "# sent_id = a",
        "# text = I'm here",
        "1-2\tI'm\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No",
        "1\tI\tI\tPRON\tPRP\tCase=Nom\t3\tnsubj\t3:nsubj\t_",
        "2\t'm\tbe\tAUX\tVBP\t_\t3\tcop\t_\t_",
        "3\there\there\tADV\tRB\t_\t0\troot\t_\tSpaceAfter=No",
    ]
    text, _ = tag_text(ud_model, "\n".join(lines) + "\n", "conllu", tmp_path, keep_columns=False)
    sentence = conllu.parse(text)[0]
    assert sentence.metadata == {"sent_id": "a", "text": "I'm here"}
    assert [t["id"] for t in sentence] == [(1, "-", 2), 1, 2, 3]
    assert sentence[0]["misc"] == {"SpaceAfter": "No"} and sentence[3]["misc"] == {"SpaceAfter": "No"}
    for token in sentence[1:]:
        assert token["upos"] in ud_model.vocab.tags.tokens[2:]
        assert [token[k] for k in ("lemma", "xpos", "feats", "head", "deprel", "deps")] == [
            "_",
            None,
            None,
            None,
            "_",
            None,
        ]


@pytest.mark.slow  # a tagging process; tokenising in-process: tests/test_tokenize.py, tagging: the tests above
def test_raw_text_is_tokenised_split_and_parses_back(ud_run):
    r = convatt("tag", ud_run, "--format", "text", input="Raw text. Don't you're sure?\n\nNew paragraph")
    assert r.returncode == 0, r.stderr[-2000:]
    sentences = conllu.parse(r.stdout)
    assert [[t["form"] for t in s] for s in sentences] == [
        ["Raw", "text", "."],
        ["Do", "n't", "you", "'re", "sure", "?"],
        ["New", "paragraph"],
    ]
    assert sentences[1].metadata["text"] == "Don't you're sure?" and "newpar" in sentences[2].metadata
    assert "warning" not in r.stderr


@pytest.mark.slow  # a tagging process; the readers in-process: tests/test_tokenize.py
def test_whitespace_tokens_that_carry_punctuation_are_warned_about(ud_run):
    r = convatt("tag", ud_run, "--format", "text", "--tokenizer", "none", input="The dog. barks\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [t["form"] for t in conllu.parse(r.stdout)[0]] == ["The", "dog.", "barks"]
    assert "warning: 1 token(s) still carry punctuation (e.g. 'dog.')" in r.stderr


@pytest.mark.slow  # a tagging process; the readers in-process: tests/test_tokenize.py
def test_vertical_input_with_an_ignored_second_column(ud_run, tmp_path):
    (tmp_path / "v.txt").write_text("The\tDET\ndog\nbarks\tX\n\n\nIt\nrains\n")
    r = convatt("tag", ud_run, "--format", "vertical", "--input", tmp_path / "v.txt")
    assert r.returncode == 0, r.stderr[-2000:]
    assert [[t["form"] for t in s] for s in conllu.parse(r.stdout)] == [
        ["The", "dog", "barks"],
        ["It", "rains"],
    ]
    (tmp_path / "v.txt").write_text("The\tDET\tx\n")
    with pytest.raises(ConvattError, match="v.txt:1: expected a token and at most one more column"):
        read_untagged(tmp_path / "v.txt", "vertical")


def test_a_loaded_run_s_old_settings_name_warns_and_gives_its_run_config(ud_model):
    with pytest.warns(DeprecationWarning, match="run_config"):
        assert ud_model.settings is ud_model.run_config
    assert ud_model.tag_column == "upos" and ud_model.tagger_config == ud_model.run_config.tagger_config()


def test_input_is_read_and_tagged_lazily(ud_model):
    """An endless input: the reader and the tagger take only what they need, so memory stays flat."""
    endless = (b"It rains. The dog barks.\n" for _ in itertools.count())
    blocks = iter_blocks(None, "text", endless, "syntok")
    chunks = tag_stream(ud_model.model, ud_model.vocab, ud_model.tagger_config, ud_model.tag_column, blocks, chunk=10)
    text, stats = next(chunks)
    assert stats.sentences == 10 and text.count("# sent_id") == 10


def test_the_python_api_tags_as_the_cli_does(ud_run):
    tagger = convatt_api.load_tagger(ud_run)
    doc = tagger.tag("Raw text. Two sentences.")
    assert [[w.form for w in s.words] for s in doc] == [["Raw", "text", "."], ["Two", "sentences", "."]]
    assert all(w.tag in tagger.trained.vocab.tags.tokens[2:] for s in doc for w in s.words)
    r = convatt("tag", ud_run, "--format", "text", input="Raw text. Two sentences.")
    assert doc.to_conllu() == r.stdout.replace("# newpar\n", "")
    listed = tagger.tag_tokens([["Raw", "text", "."], ["Two", "sentences", "."]])
    assert [s.pairs() for s in listed] == [s.pairs() for s in doc]


@pytest.mark.slow  # tagging processes on a terminal
def test_progress_is_shown_on_a_terminal_only(ud_run, tmp_path):
    import os
    import pty

    (tmp_path / "in.txt").write_text("It rains. The dog barks.\n" * 3)
    command = [sys.executable, "-m", "convatt", "tag", ud_run, "--format", "text", "--input", tmp_path / "in.txt"]
    leader, follower = pty.openpty()
    r = subprocess.run(command, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    shown = b""
    while True:
        try:
            piece = os.read(leader, 4096)
        except OSError:  # the terminal's other end is closed
            break
        if not piece:
            break
        shown += piece
    os.close(leader)
    assert r.returncode == 0
    assert b"\r\x1b[Ktagged 6 sentences, 21 tokens (" in shown and b"tokens/s)" in shown
    plain = subprocess.run(command, capture_output=True)
    assert b"\x1b[K" not in plain.stderr and b"tagged 6 sentences (21 tokens)" in plain.stderr
