"""PTB reader on the embedded NLTK sample, and the LDC layout's split by section."""

from __future__ import annotations

import shutil

import pytest
from helpers import PTB_SAMPLE, PTB_SAMPLE_FILES

from convatt.data import build_tag_vocab, load_corpus, read_mrg, read_ptb
from convatt.data.ptb import SAMPLE_SPLIT

SAMPLE = PTB_SAMPLE_FILES  # the embedded archive, unpacked


@pytest.fixture(scope="module")
def corpus():
    return read_ptb(SAMPLE)


def test_sample_counts_match_the_data_readme(corpus):
    sentences = corpus.all_sentences()
    assert len(sentences) == 3914
    assert sum(map(len, sentences)) == 94084
    assert len({tag for s in sentences for _, tag in s}) == 45
    assert "-NONE-" not in {tag for s in sentences for _, tag in s}


def test_sample_split_sizes_and_note(corpus):
    assert (len(corpus.train), len(corpus.dev), len(corpus.test)) == (3068, 433, 413)
    assert corpus.name == "PTB-sample"
    assert "not comparable" in corpus.note


def test_sample_tags_give_47_labels(corpus):
    tags = build_tag_vocab(corpus.train)
    assert len(tags) == 47
    assert tags.tokens[:2] == ("<PAD>", "<OOV>")


def test_sample_split_is_disjoint_and_covers_all_files(corpus):
    numbers = {int(p.name[4:8]) for p in SAMPLE.glob("wsj_*.mrg")}
    assert numbers == set(range(1, 200))
    parts = [set(r) & numbers for r in SAMPLE_SPLIT.values()]
    assert sum(map(len, parts)) == len(numbers) and set().union(*parts) == numbers
    for part, split in zip(parts, (corpus.train, corpus.dev, corpus.test)):
        assert split == [s for n in sorted(part) for s in read_mrg(SAMPLE / f"wsj_{n:04d}.mrg")]


def test_read_mrg_first_tree():
    first = read_mrg(SAMPLE / "wsj_0001.mrg")[0]
    assert first[:4] == [("Pierre", "NNP"), ("Vinken", "NNP"), (",", ","), ("61", "CD")]
    assert first[-1] == (".", ".")
    assert len(first) == 18


def test_read_mrg_drops_traces_and_accepts_compact_trees(tmp_path):
    path = tmp_path / "t.mrg"
    path.write_text(
        "((S (NP-SBJ (-NONE- *-1)) (VP (VBZ is) (ADJP (JJ fine))) (. .)))\n"
        "( (NP (-LRB- -LRB-) (NN x) (-RRB- -RRB-)) )\n"
        "( (S (-NONE- *T*)) )\n"
    )
    assert read_mrg(path) == [
        [("is", "VBZ"), ("fine", "JJ"), (".", ".")],
        [("-LRB-", "-LRB-"), ("x", "NN"), ("-RRB-", "-RRB-")],
    ]


def _ldc_tree(root, sections):
    """An LDC-style tree wsj/SS/wsj_SS01.mrg, each file a copy of a real sample file."""
    for s in sections:
        folder = root / "wsj" / f"{s:02d}"
        folder.mkdir(parents=True)
        shutil.copy(SAMPLE / "wsj_0001.mrg", folder / f"wsj_{s:02d}01.mrg")
        shutil.copy(SAMPLE / "wsj_0002.mrg", folder / f"wsj_{s:02d}02.mrg")
    (root / "brown").mkdir()
    shutil.copy(SAMPLE / "wsj_0003.mrg", root / "brown" / "cf01.mrg")  # not WSJ: ignored


def test_ldc_layout_is_split_by_section(tmp_path):
    _ldc_tree(tmp_path, range(25))
    corpus = load_corpus("ptb", tmp_path)
    per_file = len(read_mrg(SAMPLE / "wsj_0001.mrg")) + len(read_mrg(SAMPLE / "wsj_0002.mrg"))
    assert corpus.name == "PTB" and corpus.note == ""
    assert (len(corpus.train), len(corpus.dev), len(corpus.test)) == (19 * per_file, 3 * per_file, 3 * per_file)


def test_ldc_layout_with_missing_sections_says_so(tmp_path):
    _ldc_tree(tmp_path, [0, 5, 19, 23])
    corpus = read_ptb(tmp_path)
    assert corpus.name == "PTB"
    assert "missing" in corpus.note and "24" in corpus.note


def test_the_embedded_archive_reads_as_its_files(corpus):
    assert read_ptb(PTB_SAMPLE) == corpus


def test_errors_inside_an_archive_name_the_member_and_line(tmp_path):
    import io
    import tarfile

    from convatt.errors import ConvattError

    archive = tmp_path / "wsj.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("wsj_0001.mrg", "wsj_0002.mrg"):
            data = (SAMPLE / name).read_bytes()
            if name == "wsj_0002.mrg":
                data = data.replace(b"(NNP Vinken)", b"(NNP Vinken", 1) if b"(NNP Vinken)" in data else data + b"\n(("
            info = tarfile.TarInfo(f"wsj/00/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(ConvattError, match=r"wsj\.tar\.gz/wsj/00/wsj_0002\.mrg:\d+: unbalanced brackets"):
        read_ptb(archive)
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"not a tar file")
    with pytest.raises(ConvattError, match=r"junk\.tgz: not a readable tar archive"):
        read_ptb(junk)
