"""The package's layout is its architecture: sub-packages depend one way, no module imports itself back in a circle,
and no module grows past what one reader holds in mind. benchmarks/ and scripts/ are the floor above the package:
they may import any of it, it imports none of them, and they too import in no circle."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "odebook"
TOOLS = ("benchmarks", "scripts")  # above every layer of the package
# Lower layers first; a module may import from its own sub-package or from a lower layer, never from one above it.
# params and training share a layer and do not import each other.
LAYERS = {"nn": 0, "data": 1, "models": 2, "params": 3, "training": 3, "study": 4, "studies": 5, "book": 6}
MAX_LINES = 350


def _modules(tools: bool = False) -> dict[str, Path]:
    """The package's modules by dotted name; with ``tools``, benchmarks/ and scripts/ too."""
    files = sorted(PACKAGE.rglob("*.py")) + [p for t in TOOLS if tools for p in sorted((ROOT / t).glob("*.py"))]
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p for p in files}


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every odebook module ``name`` imports, at the top or inside a function (a lazy import is still a dependency)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name and t != "odebook"}
    return found


GRAPH = {name: _imports(path, name, set(_modules(tools=True))) for name, path in _modules(tools=True).items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] in TOOLS:
        return "tools"
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else None


def _level(layer: str) -> int:
    return len(LAYERS) if layer == "tools" else LAYERS[layer]


def test_every_subpackage_has_a_layer():
    assert {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} == set(LAYERS)


def test_dependencies_point_down_the_layers():
    upward = [f"{a} -> {b}" for a, targets in GRAPH.items() for b in targets
              if _layer(a) and _layer(b) and _layer(a) != _layer(b) and _level(_layer(b)) >= _level(_layer(a))]
    assert not upward, "imports from a layer to one at or above it:\n" + "\n".join(upward)


def test_no_module_imports_itself_back_in_a_circle():
    seen, stack, circles = set(), [], []

    def visit(node):
        if node in stack:
            circles.append(" -> ".join(stack[stack.index(node):] + [node]))
            return
        if node in seen:
            return
        seen.add(node)
        stack.append(node)
        for target in sorted(GRAPH[node]):
            visit(target)
        stack.pop()

    for node in sorted(GRAPH):
        visit(node)
    assert not circles, "import circles:\n" + "\n".join(circles)


@pytest.mark.parametrize("name", sorted(_modules()))
def test_modules_stay_readable_in_one_sitting(name):
    lines = len(_modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{name}: {lines} lines (at most {MAX_LINES}); split it by concept"


def test_no_module_on_the_shared_floors_names_a_study():
    """A study lives in its package (odebook/studies/<NN_name>/); the floors hold only what studies share, so none of
    their modules imports a study's package or names a study — by its name or its number ("study 03")."""
    import re

    from odebook import studies

    names = studies.names()
    named = re.compile("|".join([*map(re.escape, names), r"\b[Ss]tud(?:y|ies)[ -]\d\d\b"]))
    found = [f"{module}: {hit}" for module, path in _modules().items() if _layer(module) != "studies"
             for hit in [*named.findall(path.read_text()),
                         *(t for t in GRAPH[module] if t.startswith("odebook.studies."))]]
    assert len(names) == 5 and found == []
