"""The README's code examples run as written."""

import re

import pytest
from helpers import ROOT


@pytest.mark.slow  # the README's examples train a run; the layers': tests/test_layers_*.py
def test_readme_python_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "(2, 60, 10)" in out and "(2, 4, 60, 60) (2, 4, 60, 60)" in out and "(2, 60, 32)" in out


def test_every_file_the_readmes_link_to_is_in_the_repository():
    """Markdown links and images to files of ours (not URLs) in the README and the pages of
    docs/ point at files git tracks, so a clone shows them (a .gitignore pattern once kept
    docs/results/ out)."""
    import subprocess

    tracked = set(
        subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    )
    if not tracked:
        import pytest

        pytest.skip("not a git checkout: no tracked files to compare the links with")
    missing = []
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").rglob("README.md"))]
    for readme in pages:
        for target in re.findall(r"\]\(([^)#\s]+)\)", readme.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (readme.parent / target).resolve()
            relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else target
            if relative not in tracked and not any(t.startswith(relative.rstrip("/") + "/") for t in tracked):
                missing.append(f"{readme.relative_to(ROOT)}: {target}")
    assert not missing, f"linked but not in git: {missing}"


def _readme_tables():
    import sys

    sys.path.insert(0, str(ROOT / "experiments"))
    import readme_tables  # experiments/readme_tables.py

    return readme_tables


def test_the_readme_tables_are_the_committed_results_tables():
    """Every table between `<!-- table: ... -->` markers, in the README and docs/results.md, is
    its docs/results file's (`make readme-tables`)."""
    rt = _readme_tables()
    blocks, stale = 0, []
    for name in rt.MARKED_PAGES:
        page = ROOT / name
        text = page.read_text()
        blocks += len(rt.find_blocks(text))
        stale += [f"{name}:{b.line} {b.source}" for b in rt.stale_blocks(text, page.parent)]
    assert len(rt.find_blocks((ROOT / "README.md").read_text())) >= 1 and blocks >= 7
    assert not stale, f"run `make readme-tables`: {stale}"


def test_no_page_of_ours_names_an_issue_number():
    """Users cannot look up the project's issue numbers: the README, docs/ and `--help` never name one."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{p.relative_to(ROOT)}: {m}" for p in pages for m in re.findall(r"[^\n]{0,30}\bissues? \d+", p.read_text())
    ]
    assert not found, found


def test_readme_tables_copies_the_table_after_a_heading_and_names_what_is_missing(tmp_path):
    import pytest

    rt = _readme_tables()
    (tmp_path / "t.md").write_text(
        "# T\n\nintro\n\n| a |\n|---|\n| 1 |\n\n### B\n\n| b |\n|---|\n| 2 |\n| 3 |\n\ntail\n"
    )
    readme = "x\n<!-- table: t.md -->\nold\n<!-- end table -->\ny\n<!-- table: t.md#B -->\n<!-- end table -->\n"
    out = rt.refreshed(readme, tmp_path)
    assert out == (
        "x\n<!-- table: t.md -->\n| a |\n|---|\n| 1 |\n<!-- end table -->\ny\n"
        "<!-- table: t.md#B -->\n| b |\n|---|\n| 2 |\n| 3 |\n<!-- end table -->\n"
    )
    assert [b.line for b in rt.stale_blocks(readme, tmp_path)] == [2, 6] and not rt.stale_blocks(out, tmp_path)
    with pytest.raises(rt.TableSourceError, match="no heading 'C'"):
        rt.refreshed("<!-- table: t.md#C -->\n<!-- end table -->", tmp_path)
    with pytest.raises(rt.TableSourceError, match="no such file"):
        rt.refreshed("<!-- table: u.md -->\n<!-- end table -->", tmp_path)
    (tmp_path / "README.md").write_text(readme)
    assert rt.main(["--check", str(tmp_path / "README.md")]) == 1
    assert rt.main([str(tmp_path / "README.md")]) == 0 and (tmp_path / "README.md").read_text() == out
