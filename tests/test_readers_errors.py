"""Every reader error is a ConvattError naming the file and line, on corrupted real data."""

from __future__ import annotations

import gzip
import shutil

import pytest
from helpers import PTB_SAMPLE_FILES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convatt.data import (
    EMBEDDED_DATA_DIR,
    Vocab,
    load_corpus,
    load_word_vectors,
    read_conllu,
    read_mrg,
    read_ptb,
    read_ud,
)
from convatt.errors import ConvattError

UD = EMBEDDED_DATA_DIR / "ud-2.2"
LINES = UD / "UD_English-LinES"
PTB = PTB_SAMPLE_FILES  # the embedded archive, unpacked
VOCAB = Vocab.from_items(["the", "dog"])


def assert_error(excinfo, path, line, *fragments):
    """The error names `path` and `line` ("path:line: message") and says `fragments`."""
    err = excinfo.value
    assert err.line == line
    assert str(err).startswith(f"{path}:{line}: "), str(err)
    assert path.name in str(err)
    for fragment in fragments:
        assert fragment in str(err), str(err)


def conllu_lines(name="en_lines-ud-dev.conllu.gz", treebank=LINES):
    return gzip.decompress((treebank / name).read_bytes()).decode("utf-8").split("\n")


def word_line(lines, n):
    """0-based index of the n-th word line (ID an integer)."""
    seen = 0
    for i, line in enumerate(lines):
        if line.split("\t")[0].isdigit():
            seen += 1
            if seen == n:
                return i
    raise AssertionError("not enough word lines")


def corrupt_conllu(tmp_path, edit, n=40, **kwargs):
    """A real CoNLL-U file whose n-th word line is replaced by edit(line); (path, its line no)."""
    lines = conllu_lines(**kwargs)
    i = word_line(lines, n)
    lines[i] = edit(lines[i])
    path = tmp_path / "en_lines-ud-dev.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path, i + 1


# ---- CoNLL-U -------------------------------------------------------------------------


def test_conllu_wrong_column_count(tmp_path):
    path, line = corrupt_conllu(tmp_path, lambda s: s.rsplit("\t", 1)[0])
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, line, "expected 10 tab-separated fields", "found 9")


def test_conllu_non_integer_id(tmp_path):
    path, line = corrupt_conllu(tmp_path, lambda s: "x" + s)
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, line, "ID 'x")


@pytest.mark.parametrize("spaces", [" ", "  "])  # conllu itself splits on two spaces
def test_conllu_tabs_replaced_by_spaces(tmp_path, spaces):
    path, line = corrupt_conllu(tmp_path, lambda s: s.replace("\t", spaces))
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, line, "separated by spaces, not tabs")


def test_conllu_missing_word_line(tmp_path):
    lines = conllu_lines()
    i = word_line(lines, 40)
    assert lines[i + 1].split("\t")[0].isdigit()
    del lines[i]
    path = tmp_path / "en_lines-ud-dev.conllu"
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, i + 1, "word IDs must count 1, 2, 3")


def test_conllu_error_raised_by_conllu_itself(tmp_path):
    def bad_head(s):
        fields = s.split("\t")
        fields[6] = "root"
        return "\t".join(fields)

    path, line = corrupt_conllu(tmp_path, bad_head)
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, line, "conllu:", "root")


def test_conllu_missing_upos(tmp_path):
    def no_upos(s):
        fields = s.split("\t")
        fields[3] = "_"
        return "\t".join(fields)

    path, line = corrupt_conllu(tmp_path, no_upos)
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, line, "missing UPOS")


def test_conllu_invalid_utf8(tmp_path):
    lines = conllu_lines()
    i = word_line(lines, 40)
    data = "\n".join(lines).encode("utf-8").split(b"\n")
    data[i] = data[i].replace(b"\t", b"\xff\t", 1)
    path = tmp_path / "en_lines-ud-dev.conllu"
    path.write_bytes(b"\n".join(data))
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, i + 1, "not valid UTF-8")


def test_conllu_truncated_gzip(tmp_path):
    data = (LINES / "en_lines-ud-dev.conllu.gz").read_bytes()
    path = tmp_path / "en_lines-ud-dev.conllu.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConvattError, match="cannot read file") as e:
        read_conllu(path)
    assert path.name in str(e.value)


@pytest.mark.parametrize("text", ["", "\n  \n"])
def test_conllu_empty_file(tmp_path, text):
    path = tmp_path / "en_lines-ud-test.conllu"
    path.write_text(text)
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, 1, "empty file")


def test_conllu_without_sentences(tmp_path):
    path = tmp_path / "en_lines-ud-test.conllu"
    path.write_text("\n".join(line for line in conllu_lines() if line.startswith("#")))
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, 1, "no sentences")


def test_conllu_without_word_forms(tmp_path):
    def hide(line):
        fields = line.split("\t")
        if len(fields) == 10:
            fields[1] = fields[2] = "_"
        return "\t".join(fields)

    path = tmp_path / "en_esl-ud-dev.conllu"
    path.write_text("\n".join(hide(line) for line in conllu_lines()))
    with pytest.raises(ConvattError) as e:
        read_conllu(path)
    assert_error(e, path, 1, "every FORM is '_'")


# ---- treebank directories ---------------------------------------------------------------


def test_treebank_without_train_file(tmp_path):
    treebank = tmp_path / "UD_English-LinES"
    treebank.mkdir()
    for name in ("en_lines-ud-dev.conllu.gz", "en_lines-ud-test.conllu.gz", "LICENSE.txt"):
        shutil.copy(LINES / name, treebank / name)
    with pytest.raises(ConvattError) as e:
        read_ud(treebank)
    message = str(e.value)
    assert message.startswith(f"{treebank}: no *-ud-train.conllu[.gz] file")
    assert "en_lines-ud-dev.conllu.gz" in message and "LICENSE.txt" in message


def test_folder_of_treebanks_given_as_a_treebank():
    with pytest.raises(ConvattError, match="give one UD_\\* directory"):
        load_corpus("ud", UD)


# ---- .mrg --------------------------------------------------------------------------------


def mrg_copy(tmp_path, edit, name="wsj_0003.mrg"):
    lines = (PTB / name).read_text().split("\n")
    edit(lines)
    path = tmp_path / name
    path.write_text("\n".join(lines))
    return path, lines


def tree_starts(lines):
    return [i for i, line in enumerate(lines) if line.startswith("(")]


def test_mrg_missing_closing_bracket(tmp_path):
    lines = (PTB / "wsj_0003.mrg").read_text().split("\n")
    first, second = tree_starts(lines)[:2]

    def drop(ls):
        ls[second - 1] = ls[second - 1][:-1] if ls[second - 1].endswith(")") else ls[second - 1]
        assert ls[second - 1] != lines[second - 1]

    path, _ = mrg_copy(tmp_path, drop)
    with pytest.raises(ConvattError) as e:
        read_mrg(path)
    assert_error(e, path, first + 1, "never closed", f"new tree starts at line {second + 1}")


def test_mrg_extra_closing_bracket(tmp_path):
    lines = (PTB / "wsj_0003.mrg").read_text().split("\n")
    first, second = tree_starts(lines)[:2]

    def add(ls):
        ls[second - 1] += ")"

    path, _ = mrg_copy(tmp_path, add)
    with pytest.raises(ConvattError) as e:
        read_mrg(path)
    assert_error(e, path, second, "')' without a matching '('")


def test_mrg_leaf_without_word(tmp_path):
    lines = (PTB / "wsj_0003.mrg").read_text().split("\n")
    i = next(i for i, line in enumerate(lines) if "(DT the)" in line)

    def edit(ls):
        ls[i] = ls[i].replace("(DT the)", "(DT )", 1)

    path, _ = mrg_copy(tmp_path, edit)
    with pytest.raises(ConvattError) as e:
        read_mrg(path)
    assert_error(e, path, i + 1, "leaf (DT) has no word")


def test_mrg_word_outside_a_leaf(tmp_path):
    lines = (PTB / "wsj_0003.mrg").read_text().split("\n")
    i = next(i for i, line in enumerate(lines) if "(DT the)" in line)

    def edit(ls):
        ls[i] = ls[i].replace("(DT the)", "(DT the dog)", 1)

    path, _ = mrg_copy(tmp_path, edit)
    with pytest.raises(ConvattError) as e:
        read_mrg(path)
    assert_error(e, path, i + 1, "word 'the' in '(DT ...' is not a (TAG word) leaf")


def test_mrg_text_outside_trees(tmp_path):
    path, lines = mrg_copy(tmp_path, lambda ls: ls.append("stray words"))
    with pytest.raises(ConvattError) as e:
        read_mrg(path)
    assert_error(e, path, len(lines), "outside any tree")


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_mrg_empty_file(tmp_path, text):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(text)
    with pytest.raises(ConvattError) as e:
        read_mrg(path)
    assert_error(e, path, 1, "empty file")


def test_ptb_directory_without_dev_and_test_files(tmp_path):
    for n in range(1, 100):  # the older NLTK sample had only wsj_0001-0099
        shutil.copy(PTB / f"wsj_{n:04d}.mrg", tmp_path)
    with pytest.raises(ConvattError, match="no dev data: expected files wsj_0140-0169") as e:
        read_ptb(tmp_path)
    assert str(tmp_path) in str(e.value)


def test_ptb_directory_without_wsj_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConvattError, match="no wsj_SSNN.mrg files"):
        load_corpus("ptb", tmp_path)


# ---- vectors -----------------------------------------------------------------------------


def write_vectors(tmp_path, lines, name="vectors.vec"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD_ROWS = ["the 0.1 0.2 0.3", "dog 1 2 3", ", 0 0 0", "cat -1 -2 -3"]


@pytest.mark.parametrize("header", ["the 0.1 0.2 0.3", "4", "four 3", ""])
def test_vectors_bad_header(tmp_path, header):
    path = write_vectors(tmp_path, [header] + GOOD_ROWS)
    with pytest.raises(ConvattError) as e:
        load_word_vectors(path, VOCAB, dim=3)
    assert_error(e, path, 1, "expected a header 'COUNT DIM'")


@pytest.mark.parametrize("row", ["dog 1 2", "dog 7", "dog", "dog 1 2 3 4", "dog 1  2 3"])
def test_vectors_row_of_wrong_width(tmp_path, row):
    rows = GOOD_ROWS.copy()
    rows[2] = row  # line 4
    path = write_vectors(tmp_path, ["4 3"] + rows)
    with pytest.raises(ConvattError) as e:
        load_word_vectors(path, VOCAB, dim=3)
    assert_error(e, path, 4, "expected a word and 3 numbers")


def test_vectors_value_not_a_number(tmp_path):
    rows = GOOD_ROWS.copy()
    rows[1] = "dog 1 two 3"  # line 3
    path = write_vectors(tmp_path, ["4 3"] + rows)
    with pytest.raises(ConvattError) as e:
        load_word_vectors(path, VOCAB, dim=3)
    assert_error(e, path, 3, "gensim cannot read")


def test_vectors_file_shorter_than_its_header(tmp_path):
    path = write_vectors(tmp_path, ["10 3"] + GOOD_ROWS)
    with pytest.raises(ConvattError) as e:
        load_word_vectors(path, VOCAB, dim=3)
    assert_error(e, path, 6, "announces 10 vectors")
    assert load_word_vectors(path, VOCAB, dim=3, limit=4)[1] == 2  # within the limit: fine


def test_vectors_dimension_differs_from_the_model(tmp_path):
    path = write_vectors(tmp_path, ["4 3"] + GOOD_ROWS)
    with pytest.raises(ConvattError) as e:
        load_word_vectors(path, VOCAB, dim=300)
    assert_error(e, path, 1, "dimension 3, the model expects 300")


def test_bin_dimension_differs_from_the_model(tmp_path):
    from gensim.models import FastText
    from gensim.models.fasttext import save_facebook_model

    model = FastText(vector_size=4, min_count=1, bucket=100, workers=1)
    sentences = [["the", "dog"]] * 5
    model.build_vocab(corpus_iterable=sentences)
    model.train(corpus_iterable=sentences, total_examples=5, epochs=1)
    path = tmp_path / "tiny.bin"
    save_facebook_model(model, str(path))
    with pytest.raises(ConvattError, match="dimension 4, the model expects 300") as e:
        load_word_vectors(path, VOCAB, dim=300)
    assert e.value.path == str(path)


def test_bin_that_is_not_a_fasttext_model(tmp_path):
    path = tmp_path / "vectors.bin"
    path.write_bytes(b"\x00\x01not a model" * 50)
    with pytest.raises(ConvattError, match="not a fastText .bin model") as e:
        load_word_vectors(path, VOCAB, dim=300)
    assert e.value.path == str(path)


# ---- paths that do not exist -------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        read_conllu,
        read_mrg,
        read_ptb,
        read_ud,
        lambda p: load_corpus("ptb", p),
        lambda p: load_corpus("ud", p),
        lambda p: load_word_vectors(p, VOCAB, dim=3),
    ],
    ids=["read_conllu", "read_mrg", "read_ptb", "read_ud", "load_corpus_ptb", "load_corpus_ud", "load_word_vectors"],
)
def test_path_that_does_not_exist(tmp_path, call):
    missing = tmp_path / "nowhere" / "missing.conllu"
    with pytest.raises(ConvattError, match="not found") as e:
        call(missing)
    assert str(e.value).startswith(str(missing))


def test_unknown_preset(tmp_path):
    with pytest.raises(ConvattError, match="unknown preset 'conll'"):
        load_corpus("conll", tmp_path)


# ---- arbitrary input: parse or ConvattError, nothing else ---------------------------------

FIELD = st.one_of(
    st.sampled_from(["1", "2", "3", "1-2", "2.1", "0", "_", "NOUN", "x y", "a=b", "4-3", "1:nsubj", ""]),
    st.text(alphabet="0123456789-._:=| x#\t", max_size=4),
)
CONLLU_LINE = st.one_of(
    st.lists(FIELD, max_size=12).map("\t".join),
    st.sampled_from(["", "# text = a b", "#", "   ", "# global.columns = ID FORM"]),
    st.text(max_size=12),
)


@st.composite
def conllu_document(draw):
    """Sentences of mostly well-formed 10-field lines, each line possibly damaged."""
    blocks = []
    for _ in range(draw(st.integers(1, 3))):
        lines = draw(st.lists(st.sampled_from(["# sent_id = 1", "# text = a b", "#"]), max_size=2))
        for i in range(1, draw(st.integers(1, 4)) + 1):
            if draw(st.integers(0, 5)) == 0:
                lines.append(f"{i}-{i + 1}\t" + "\t".join(["_"] * 9))
            defaults = ("w", "w", "NOUN", "NN", "_", "0", "root", "_", "_")
            fields = [str(i)] + [draw(FIELD) if draw(st.integers(0, 3)) == 0 else default for default in defaults]
            line = "\t".join(fields)
            if draw(st.integers(0, 9)) == 0:
                line = draw(CONLLU_LINE)
            lines.append(line)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + draw(st.sampled_from(["", "\n", "\n\n"]))


CONLLU_TEXT = st.one_of(st.text(), st.lists(CONLLU_LINE, max_size=15).map("\n".join), conllu_document())
MRG_TEXT = st.one_of(
    st.text(),
    st.lists(
        st.one_of(
            st.sampled_from(["(", ")", " ", "\n", "(NN dog)", "(-NONE- *T*)", "( (S", "))", "S", "()"]),
            st.text(alphabet="() \nNPSx-", max_size=5),
        ),
        max_size=30,
    ).map("".join),
)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def parses_or_convatt_error(reader, path):
    try:
        sentences = reader(path)
    except ConvattError as e:
        assert str(e).startswith(str(path))
        return
    assert sentences and all(s and all(w and t for w, t in s) for s in sentences)


@FUZZ
@given(text=CONLLU_TEXT)
def test_conllu_reader_on_arbitrary_text(tmp_path, text):
    path = tmp_path / "fuzz.conllu"
    path.write_text(text, encoding="utf-8")
    parses_or_convatt_error(read_conllu, path)


@FUZZ
@given(text=MRG_TEXT)
def test_mrg_reader_on_arbitrary_text(tmp_path, text):
    path = tmp_path / "fuzz.mrg"
    path.write_text(text, encoding="utf-8")
    parses_or_convatt_error(read_mrg, path)


@FUZZ
@given(data=st.binary(max_size=200))
def test_readers_on_arbitrary_bytes(tmp_path, data):
    for name, reader in (("fuzz.conllu", read_conllu), ("fuzz.mrg", read_mrg)):
        path = tmp_path / name
        path.write_bytes(data)
        parses_or_convatt_error(reader, path)


def test_gzipped_mrg_files_in_an_archive_are_read_as_in_a_folder(tmp_path):
    """A .mrg.gz member of a tar archive was skipped without a word: its sentences lost."""
    import tarfile

    folder = tmp_path / "wsj" / "00"
    folder.mkdir(parents=True)
    shutil.copy(PTB / "wsj_0001.mrg", folder)
    (folder / "wsj_0002.mrg.gz").write_bytes(gzip.compress((PTB / "wsj_0002.mrg").read_bytes()))
    with tarfile.open(tmp_path / "wsj.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "wsj", arcname="wsj")
    from convatt.data.ptb import _archive_files, _directory_files

    in_archive = {n: read() for n, (_, read) in _archive_files(tmp_path / "wsj.tar.gz").items()}
    in_folder = {n: read() for n, (_, read) in _directory_files(tmp_path / "wsj").items()}
    assert sorted(in_archive) == [1, 2] and in_archive == in_folder
    assert in_archive[2] == read_mrg(PTB / "wsj_0002.mrg")


def test_a_directory_named_like_an_mrg_file_is_an_error(tmp_path):
    shutil.copytree(PTB, tmp_path / "ptb")
    (tmp_path / "ptb" / "wsj_0300.mrg").mkdir()
    with pytest.raises(ConvattError, match="named like a PTB file .* but a directory") as e:
        read_ptb(tmp_path / "ptb")
    assert e.value.path == str(tmp_path / "ptb" / "wsj_0300.mrg")
