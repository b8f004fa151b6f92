"""convatt score: CoNLL 2018 aligned UPOS scores on hand-made files with answers worked out by hand."""

import subprocess
import sys

import pytest

from convatt.errors import ConvattError
from convatt.results.scoring import raw_text, score_files


def conllu(*sentences) -> str:
    """CoNLL-U of sentences given as "form/TAG" words; "form/MWT<n>" makes a multiword token
    of the n words that follow."""
    out = []
    for words in sentences:
        lines, n = [], 0
        for word in words.split():
            if "/MWT" in word:
                form, size = word.split("/MWT")
                lines.append(f"{n + 1}-{n + int(size)}\t{form}" + "\t_" * 8)
                continue
            form, tag = word.rsplit("/", 1)
            n += 1
            lines.append(f"{n}\t{form}\t_\t{tag}" + "\t_" * 6)
        out.append("\n".join(lines) + "\n\n")
    return "".join(out)


def score(tmp_path, gold: list[str], system: list[str]):
    (tmp_path / "gold.conllu").write_text(conllu(*gold))
    (tmp_path / "system.conllu").write_text(conllu(*system))
    return score_files(tmp_path / "gold.conllu", tmp_path / "system.conllu")


def test_identical_tokenisation_is_plain_accuracy(tmp_path):
    r = score(tmp_path, ["I/PRON do/AUX n't/PART know/VERB ./PUNCT"], ["I/PRON do/VERB n't/PART know/VERB ./PUNCT"])
    assert r.same_tokenisation
    assert (r.tags.correct, r.tags.gold, r.tags.system) == (4, 5, 5)
    assert r.tags.f1 == r.tags.aligned_accuracy == 0.8
    assert r.tokens.f1 == r.sentences.f1 == r.words.f1 == 1.0
    assert any("UPOS accuracy 80.00% of 5 words" in line for line in r.lines())


def test_a_split_token(tmp_path):
    # gold "ice-cream" is one word; the system makes three: only The, melts and . align
    r = score(
        tmp_path,
        ["The/DET ice-cream/NOUN melts/VERB ./PUNCT"],
        ["The/DET ice/NOUN -/PUNCT cream/NOUN melts/VERB ./PUNCT"],
    )
    assert not r.same_tokenisation
    assert (r.words.gold, r.words.system, r.words.correct) == (4, 6, 3)
    assert r.words.precision == 0.5 and r.words.recall == 0.75 and r.words.f1 == pytest.approx(0.6)
    assert r.tags.f1 == pytest.approx(0.6) and r.tags.aligned_accuracy == 1.0
    assert r.tokens.f1 == pytest.approx(0.6)


def test_a_merged_token_with_a_wrong_tag(tmp_path):
    r = score(
        tmp_path,
        ["The/DET ice/NOUN -/PUNCT cream/NOUN melts/VERB ./PUNCT"],
        ["The/DET ice-cream/NOUN melts/NOUN ./PUNCT"],
    )
    assert (r.words.gold, r.words.system, r.words.correct) == (6, 4, 3)
    assert (r.tags.correct, r.tags.aligned) == (2, 3)
    assert r.tags.f1 == pytest.approx(2 * 2 / 10) and r.tags.aligned_accuracy == pytest.approx(2 / 3)


def test_a_different_sentence_split_leaves_words_aligned(tmp_path):
    r = score(
        tmp_path,
        ["It/PRON rains/VERB ./PUNCT", "We/PRON stay/VERB ./PUNCT"],
        ["It/PRON rains/VERB ./PUNCT We/PRON stay/NOUN ./PUNCT"],
    )
    assert r.same_tokenisation and r.words.f1 == 1.0 and r.tokens.f1 == 1.0
    assert (r.sentences.gold, r.sentences.system, r.sentences.correct) == (2, 1, 0)
    assert r.tags.f1 == pytest.approx(5 / 6)


def test_multiword_tokens_align_by_form_inside_the_token(tmp_path):
    # gold I'm = I + 'm; a system that keeps "I'm" whole aligns only "here"
    r = score(tmp_path, ["I'm/MWT2 I/PRON 'm/AUX here/ADV"], ["I'm/PRON here/ADV"])
    assert (r.words.gold, r.words.system, r.words.correct) == (3, 2, 1)
    assert r.tokens.f1 == 1.0 and r.tags.f1 == pytest.approx(2 * 1 / 5)
    # both split "del", differently: the words with equal forms (case ignored) align
    r = score(tmp_path, ["del/MWT2 de/ADP el/DET libro/NOUN"], ["del/MWT2 De/ADP l/DET libro/NOUN"])
    assert (r.words.correct, r.tags.correct) == (2, 2)
    assert r.tags.f1 == pytest.approx(2 / 3)
    # the same multiword token on both sides: everything aligns
    r = score(tmp_path, ["I'm/MWT2 I/PRON 'm/AUX here/ADV"], ["I'm/MWT2 I/PRON 'm/VERB here/ADV"])
    assert r.same_tokenisation and r.tags.correct == 2


def test_another_text_is_an_error_naming_the_system_file(tmp_path):
    with pytest.raises(ConvattError, match=r"system.conllu: the system file spells another text .* at character 2"):
        score(tmp_path, ["It/PRON rains/VERB"], ["It/PRON pours/VERB"])


def test_raw_text_uses_text_comments_and_space_after(tmp_path):
    source = tmp_path / "g.conllu"
    source.write_text(
        "# newdoc\n# text = It rains.\n1\tIt\t_\tPRON"
        + "\t_" * 6
        + "\n2\trains\t_\tVERB\t_\t_\t_\t_\t_\tSpaceAfter=No\n"
        "3\t.\t_\tPUNCT" + "\t_" * 6 + "\n\n"
        "1-2\tI'm" + "\t_" * 7 + "\tSpaceAfter=No\n1\tI\t_\tPRON" + "\t_" * 6 + "\n2\t'm\t_\tAUX" + "\t_" * 6 + "\n"
        "3\t!\t_\tPUNCT" + "\t_" * 6 + "\n\n# newdoc\n# text = Bye\n1\tBye\t_\tINTJ" + "\t_" * 6 + "\n\n"
    )
    assert raw_text(source) == "It rains. I'm!\nBye\n"


def test_cli_prints_the_table(tmp_path):
    (tmp_path / "gold.conllu").write_text(conllu("It/PRON rains/VERB"))
    (tmp_path / "system.conllu").write_text(conllu("It/PRON rains/NOUN"))
    r = subprocess.run(
        [sys.executable, "-m", "convatt", "score", tmp_path / "gold.conllu", tmp_path / "system.conllu"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "UPOS           50.00     50.00     50.00     50.00" in r.stdout
