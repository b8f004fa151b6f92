"""Every import of convatt points down: a module imports only its own floor and the floors below.

`FLOORS` is the one declared order of the package's parts, bottom first; docs/design.md
shows it top first. Imports inside functions (kept lazy so that the CLI starts without
Keras) count as much as those at module level.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "convatt"

# Bottom first. A part is a subpackage or a module directly under convatt/; "__init__" is the
# package's own __init__.py (its version; it loads its public API lazily, by name).
FLOORS = (
    ("__init__", "errors", "machine"),
    ("layers",),
    ("protocol",),
    ("data",),
    ("model",),
    ("sequence",),
    ("rundir",),
    ("training",),
    ("results",),
    ("inference",),
    ("speed",),
    ("cli", "__main__"),
)


def part_of(module: str) -> str:
    """The part of the package that the dotted `module` (`convatt...`) lies in."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(node: ast.Import | ast.ImportFrom, module: str, package: Path) -> list[str]:
    """The dotted names of the modules one import statement of `module` reads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: resolved against the importing module's package
        here = module.split(".") if (package.parent / module.replace(".", "/")).is_dir() else module.split(".")[:-1]
        base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base != package.name:
        return [base]
    # `from convatt import x`: x is a part of its own, or a name of the package's __init__
    return [f"{base}.{a.name}" if _is_part(package, a.name) else base for a in node.names]


def _is_part(package: Path, name: str) -> bool:
    return (package / name).is_dir() or (package / f"{name}.py").is_file()


def upward_imports(package: Path, floors=FLOORS) -> list[str]:
    """Each import from a lower floor to a higher one, as `file:line: part -> part` (a part on
    no floor counts as the highest)."""
    floor_of = {part: i for i, names in enumerate(floors) for part in names}
    problems = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent)
        dotted = relative.with_suffix("").parts
        module = ".".join(dotted[:-1] if relative.name == "__init__.py" else dotted)
        here = part_of(module) if len(dotted) > 2 else dotted[1]
        if here not in floor_of:
            raise ValueError(f"{relative}: {here} is on no floor")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in imported_modules(node, module, package):
                if target.split(".")[0] != package.name:
                    continue
                there = part_of(target)
                if floor_of.get(there, len(floors)) > floor_of[here]:
                    problems.append(f"{relative}:{node.lineno}: {here} -> {there}")
    return problems


def test_every_import_points_down():
    assert upward_imports(PACKAGE) == []


def test_every_part_of_the_package_is_on_a_floor_once():
    declared = [part for names in FLOORS for part in names]
    assert len(declared) == len(set(declared))
    parts = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert parts == set(declared)


def test_an_upward_import_is_found_at_module_level_in_a_function_and_relative(tmp_path):
    package = tmp_path / "convatt"
    for part in ("data", "model"):
        (package / part).mkdir(parents=True)
        (package / part / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "errors.py").write_text("")
    (package / "data" / "a.py").write_text("import convatt.model.b\n")
    (package / "data" / "b.py").write_text("def f():\n    from convatt.model import b\n")
    (package / "data" / "c.py").write_text("from ..model import b\nfrom . import a\nfrom convatt import errors\n")
    (package / "model" / "b.py").write_text("from convatt.data import a\nfrom convatt import __version__\n")
    floors = (("__init__", "errors"), ("data",), ("model",))
    assert upward_imports(package, floors) == [
        "convatt/data/a.py:1: data -> model",
        "convatt/data/b.py:2: data -> model",
        "convatt/data/c.py:1: data -> model",
    ]
    with pytest.raises(ValueError, match="model is on no floor"):
        upward_imports(package, (("__init__", "errors"), ("data",)))


def test_the_design_document_shows_the_floors_top_first():
    """docs/design.md's block after the line naming this test: one floor a line, its parts first."""
    lines = (ROOT / "docs" / "design.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if "tests/test_import_layers.py" in line) + 1
    while not lines[start].strip():
        start += 1
    shown = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        shown.append(tuple(sorted(_leading_parts(line))))
    assert shown == [tuple(sorted(names)) for names in reversed(FLOORS)]


def _leading_parts(line: str) -> list[str]:
    """`cli/, __main__.py   the commands` -> ["cli", "__main__"]."""
    names = []
    for word in line.split():
        word = word.rstrip(",")
        if not (word.endswith("/") or word.endswith(".py")):
            break
        names.append(word.removesuffix("/").removesuffix(".py"))
    return names
