"""UD reader on the four embedded UD 2.2 treebanks."""

from __future__ import annotations

import gzip

import pytest

from convatt.data import (
    EMBEDDED_DATA_DIR,
    load_corpus,
    read_conllu,
    read_ud,
    treebank_key,
    treebank_name,
)

UD = EMBEDDED_DATA_DIR / "ud-2.2"
# (sentences, tokens) of train / dev / test; sentences from the data README, tokens
# counted with grep over the released files (word lines only).
EXPECTED = {
    "English-LinES": ((2738, 50096), (912, 17102), (914, 15623)),
    "English-GUM": ((2914, 53686), (707, 13164), (769, 13191)),
    "Afrikaans-AfriBooms": ((1315, 33894), (194, 5317), (425, 10065)),
    "Vietnamese-VTB": ((1400, 20285), (800, 11514), (800, 11955)),
}


@pytest.fixture(scope="module")
def corpora():
    return {c.name: c for c in (read_ud(d) for d in sorted(UD.glob("UD_*")))}


def test_treebank_names():
    assert sorted(p.name for p in UD.glob("UD_*")) == sorted("UD_" + n for n in EXPECTED)
    assert treebank_name(UD / "UD_English-LinES") == "English-LinES"
    assert treebank_name("x/UD_Ancient_Greek-PROIEL/") == "Ancient_Greek-PROIEL"
    assert treebank_key("UD_Old French-SRCMF") == treebank_key("Old_French-SRCMF") == "Old_French-SRCMF"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_match_the_data_readme(corpora, name):
    corpus = corpora[name]
    got = tuple((len(split), sum(map(len, split))) for split in (corpus.train, corpus.dev, corpus.test))
    assert got == EXPECTED[name]
    assert corpus.note == ""


def test_forms_and_upos(corpora):
    first = corpora["English-GUM"].train[0]
    assert first == [
        ("Aesthetic", "ADJ"),
        ("Appreciation", "NOUN"),
        ("and", "CCONJ"),
        ("Spanish", "ADJ"),
        ("Art", "NOUN"),
        (":", "PUNCT"),
    ]
    vi = {form for s in corpora["Vietnamese-VTB"].train for form, _ in s}
    assert "chiến tranh" in vi  # VTB forms contain spaces: the columns are tabs only


def test_plain_and_gzipped_files_read_the_same(tmp_path):
    gz = UD / "UD_Vietnamese-VTB" / "vi_vtb-ud-dev.conllu.gz"
    plain = tmp_path / "vi_vtb-ud-dev.conllu"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    assert read_conllu(plain) == read_conllu(gz)


def test_multiword_tokens_and_empty_nodes_are_skipped(tmp_path):
    path = tmp_path / "mwt.conllu"
    path.write_text(
        "# text = Vámonos al mar\n"
        "1-2\tVámonos\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tVamos\tir\tVERB\t_\t_\t0\troot\t_\t_\n"
        "2\tnos\tnosotros\tPRON\t_\t_\t1\tobj\t_\t_\n"
        "3-4\tal\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "3\ta\ta\tADP\t_\t_\t5\tcase\t_\t_\n"
        "4\tel\tel\tDET\t_\t_\t5\tdet\t_\t_\n"
        "4.1\tvamos\tir\tVERB\t_\t_\t_\t_\t0:root\t_\n"
        "5\tmar\tmar\tNOUN\t_\t_\t1\tobl\t_\t_\n\n"
    )
    assert read_conllu(path) == [[("Vamos", "VERB"), ("nos", "PRON"), ("a", "ADP"), ("el", "DET"), ("mar", "NOUN")]]


def test_load_corpus_dispatches_to_ud():
    corpus = load_corpus("ud", UD / "UD_Afrikaans-AfriBooms")
    assert corpus.name == "Afrikaans-AfriBooms" and len(corpus.dev) == 194
