"""The README's code examples run as written."""
import re

from conftest import ROOT


def test_readme_python_examples_run(capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert blocks, "the README has no python example"
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "(2, 60, 10)" in out and "(2, 4, 60, 60) (2, 4, 60, 60)" in out and "(2, 60, 32)" in out


def test_every_file_the_readmes_link_to_is_in_the_repository():
    """Markdown links and images to files of ours (not URLs) point at files git tracks, so a
    clone shows them (a .gitignore pattern once kept docs/results/ out)."""
    import subprocess

    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    if not tracked:
        import pytest

        pytest.skip("not a git checkout: no tracked files to compare the links with")
    missing = []
    for readme in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("README.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)\)", readme.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (readme.parent / target).resolve()
            relative = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else target
            if relative not in tracked and not any(t.startswith(relative.rstrip("/") + "/") for t in tracked):
                missing.append(f"{readme.relative_to(ROOT)}: {target}")
    assert not missing, f"linked but not in git: {missing}"
