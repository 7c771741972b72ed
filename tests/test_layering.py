"""The import rule of docs/architecture.md: no module of a lower layer imports a higher one.

Checked on the source (every ``import``/``from`` statement, module-level or inside a
function), so a lazy import that climbs a layer fails too. Packages of one layer may import
each other, but no chain of imports between packages may come back to where it started.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "mirage_lab"

# low -> high; a module may import its own layer's packages and any lower layer's
LAYERS = {
    "errors": 0, "gpu": 0, "ops": 0, "lazy": 0, "bounded": 0, "cpus": 0,
    "ir": 1, "examples": 1,
    "interp": 2, "expr": 2, "verify": 2,
    "search": 3,
    "codegen": 4,
    "runtime": 5,
    "pipeline": 6,
    "viz": 7, "widgets": 7, "lab": 7, "cli": 7, "report": 7,
    "__init__": 8,
}


def _package(path: Path) -> str:
    rel = path.relative_to(ROOT).parts
    return rel[0][:-3] if len(rel) == 1 else rel[0]


def _targets(path: Path, node: ast.AST) -> list[str]:
    """The top-level mirage_lab packages an import statement reaches."""
    depth = len(path.relative_to(ROOT).parts) - 1          # 0: a top-level module such as cli.py
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1] for a in node.names if a.name.startswith("mirage_lab.")]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level == 0:
        mod = node.module or ""
        if mod == "mirage_lab":
            return [a.name for a in node.names]
        return [mod.split(".")[1]] if mod.startswith("mirage_lab.") else []
    if node.level - 1 != depth:                             # inside its own package
        return []
    return [node.module.split(".")[0]] if node.module else [a.name for a in node.names]


def violations() -> list[str]:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        me = _package(path)
        assert me in LAYERS, f"{path}: package {me!r} has no layer in docs/architecture.md / LAYERS"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for t in _targets(path, node):
                if t in LAYERS and LAYERS[t] > LAYERS[me]:
                    bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {me} (layer {LAYERS[me]}) "
                               f"imports {t} (layer {LAYERS[t]})")
    return bad


def package_imports(root: Path | None = None) -> dict[str, set[str]]:
    """package -> the other mirage_lab packages its modules import (eagerly or lazily)."""
    root = root or ROOT
    out: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        me = _package(path)
        deps = out.setdefault(me, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            deps.update(t for t in _targets(path, node) if t in LAYERS and t != me)
    return out


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every package that can reach itself through the import graph, with one such path."""
    circles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph.get(node, ())):
                if nxt == start:
                    circles.append(path + [start])
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return circles


def test_no_module_imports_a_higher_layer():
    assert violations() == []


def test_no_import_circle_between_packages():
    assert import_circles(package_imports()) == []
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"],
                                                                                ["b", "c", "a", "b"],
                                                                                ["c", "a", "b", "c"]]


def test_the_checker_sees_a_climbing_import(tmp_path, monkeypatch):
    # the rule is only as good as its parser: a lazy import inside a function must be caught
    fake = tmp_path / "mirage_lab"
    (fake / "ir").mkdir(parents=True)
    (fake / "ir" / "x.py").write_text("def f():\n    from ..runtime import compile\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", fake)
    assert violations() == ["mirage_lab/ir/x.py:2: ir (layer 1) imports runtime (layer 5)"]
