"""experiments/ud_compact.py (`make ud-compact`): FORM/UPOS copies of UD treebanks that
convatt reads as it reads the originals."""

from __future__ import annotations

import gzip
import importlib.util
import shutil
from pathlib import Path

import pytest

from convatt.data.load import corpus_files, load_corpus
from convatt.data.ud import read_ud

ROOT = Path(__file__).resolve().parent.parent
EMBEDDED = ROOT / "convatt" / "embedded" / "ud-2.2"
SCRIPT = ROOT / "experiments" / "ud_compact.py"


def _script():
    spec = importlib.util.spec_from_file_location("ud_compact", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compact(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compact")
    assert _script().main([str(EMBEDDED), str(out), "--treebanks", "English-LinES,UD_Vietnamese-VTB"]) == 0
    return out


@pytest.mark.parametrize("name", ["UD_English-LinES", "UD_Vietnamese-VTB"])
def test_the_compact_copy_reads_as_the_original(compact, name):
    original, copy = read_ud(EMBEDDED / name), read_ud(compact / name)
    assert copy.name == original.name
    for split in ("train", "dev", "test"):
        assert getattr(copy, split) == getattr(original, split)
    # Vietnamese words hold spaces: they survive as one FORM
    if name == "UD_Vietnamese-VTB":
        assert any(" " in form for sentence in copy.train for form, _ in sentence)


def test_only_forms_and_tags_are_kept_and_the_licence_travels(compact):
    tree = compact / "UD_English-LinES"
    assert sorted(p.name for p in tree.iterdir()) == [
        "LICENSE.txt",
        "README.txt",
        "en_lines-ud-dev.conllu.gz",
        "en_lines-ud-test.conllu.gz",
        "en_lines-ud-train.conllu.gz",
    ]
    lines = gzip.decompress((tree / "en_lines-ud-train.conllu.gz").read_bytes()).decode().splitlines()
    words = [line.split("\t") for line in lines if line]
    assert all(len(w) == 10 and w[2] == "_" and w[4:] == ["_"] * 6 for w in words)
    assert not any(line.startswith("#") for line in lines)
    assert (tree / "LICENSE.txt").read_bytes() == (EMBEDDED / "UD_English-LinES" / "LICENSE.txt").read_bytes()


def test_a_run_reads_it_through_the_ud_format(compact):
    corpus = load_corpus("ud", str(compact / "UD_English-LinES"))
    assert corpus.name == "English-LinES" and len(corpus.train) == len(read_ud(EMBEDDED / "UD_English-LinES").train)
    assert [p.name for p in corpus_files("ud", str(compact / "UD_English-LinES"))] == [
        "en_lines-ud-train.conllu.gz",
        "en_lines-ud-dev.conllu.gz",
        "en_lines-ud-test.conllu.gz",
    ]


def test_done_treebanks_are_skipped_and_nothing_half_written_is_left(compact, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(compact, out)
    assert _script().main([str(EMBEDDED), str(out), "--treebanks", "English-LinES,Afrikaans-AfriBooms"]) == 0
    said = capsys.readouterr().out
    assert "UD_English-LinES: already there, skipped" in said and "UD_Afrikaans-AfriBooms: " in said
    assert sorted(p.name for p in out.iterdir()) == ["UD_Afrikaans-AfriBooms", "UD_English-LinES", "UD_Vietnamese-VTB"]


def test_a_bad_treebank_is_named_in_one_line_and_not_kept(tmp_path, capsys):
    bad = tmp_path / "ud" / "UD_Broken-Test"
    shutil.copytree(EMBEDDED / "UD_English-LinES", bad)
    train = next(bad.glob("*-ud-train.conllu*"))
    text = gzip.decompress(train.read_bytes()).decode() if train.suffix == ".gz" else train.read_text()
    lines = text.splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line and not line.startswith("#"))
    lines[number - 1] = "1\tword\tonly three fields"
    train.unlink()
    (bad / "xx_broken-ud-train.conllu").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    assert _script().main([str(tmp_path / "ud"), str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "xx_broken-ud-train.conllu" in err and f":{number}" in err
    assert list(out.iterdir()) == []  # no temporary directory left behind


def test_a_missing_folder_or_treebank_is_named(tmp_path, capsys):
    assert _script().main([str(tmp_path / "absent"), str(tmp_path / "out")]) == 1
    assert "absent" in capsys.readouterr().err
    assert _script().main([str(EMBEDDED), str(tmp_path / "out"), "--treebanks", "Klingon-Example"]) == 1
    assert "no such treebank folder: UD_Klingon-Example" in capsys.readouterr().err
