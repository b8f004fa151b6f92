"""No function in convatt/ runs past `MAX_LINES` lines, signature and docstring included."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "convatt"
MAX_LINES = 40


def long_functions(package: Path, max_lines: int = MAX_LINES) -> list[str]:
    """`file:line name (n lines)` of each function (or method) longer than `max_lines`."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > max_lines:
                    found.append(f"{path.relative_to(package.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_the_limit():
    assert long_functions(PACKAGE) == []


def test_a_long_method_is_found(tmp_path):
    body = "\n".join(f"        x = {i}" for i in range(3))
    (tmp_path / "m.py").write_text(f"class A:\n    def f(self):\n{body}\n\n\ndef g():\n    pass\n")
    assert long_functions(tmp_path, max_lines=3) == [f"{tmp_path.name}/m.py:2 f (4 lines)"]
