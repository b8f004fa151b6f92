"""docs/layers.md's Python examples run (under TensorFlow; `make test` leaves them out under
JAX, where the layers' own tests check what a backend can change); those that need KerasHub
run where the `hub` extra is installed."""

import importlib.util
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "layers.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
# The long-context example trains at 8,192 tokens in blocks of 512 queries: 16 blocks, about
# 3 CPU-minutes on the 2-core CPU, where its code at 2,048 tokens (4 blocks, the same blocked
# path, causal, +Conv2d[pre] and ALiBi) takes seconds beyond the compilation. The test runs it
# at 2,048; that blocks compute what the whole matrix computes, and train to the same weights,
# is tests/test_layers_blocked_attention.py's (a 1,000-token gradient of blocked MTA included).
SHORTER = {"LENGTH, WIDTH, CHARS = 8192, ": "LENGTH, WIDTH, CHARS = 2048, "}


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4
    for long in SHORTER:  # each shortened line is on the page once: the test runs the page's example
        assert sum(block.count(long) for block in BLOCKS) == 1, long


@pytest.mark.parametrize("index", range(len(BLOCKS)))
@pytest.mark.tf_only
@pytest.mark.slow  # some train a model; what the layers compute: their own tests
def test_example_runs(index, capsys):
    block = BLOCKS[index]
    needs = re.match(r"# needs: (\w+)", block)
    if needs and importlib.util.find_spec(needs.group(1)) is None:
        pytest.skip(f"needs {needs.group(1)} (pip install 'convatt[hub]')")
    for long, short in SHORTER.items():
        block = block.replace(long, short)
    exec(compile(block, f"docs/layers.md example {index + 1}", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.strip(), "every example prints what it computed"
    if "before fine-tuning" in printed:  # the converted model computes the original's outputs
        assert float(re.findall(r"fine-tuning: ([\d.e+-]+)", printed)[0]) < 1e-5
        first, last = map(float, re.findall(r"mse ([\d.]+) -> ([\d.]+)", printed)[0])
        assert last < first
    if "nats per char" in printed:  # the language model learned: its loss fell by half
        first, last = map(float, re.findall(r"([\d.]+) -> ([\d.]+)", printed)[0])
        assert last < first / 2
