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
