"""No import cycles in ``plume_jax/`` or ``agents/`` (issue 41), counting the
imports inside functions: a cycle hidden in a function body is still a
cycle, it only fails later. Imports *of* a package's ``__init__`` (its
re-exports) and the ``__init__`` modules' own imports are set aside: a
package's ``__init__`` importing its submodules is how it re-exports them.
Read from the import statements (``ast``), nothing is imported."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("plume_jax", "agents")


def modules(root: pathlib.Path) -> dict[str, tuple[pathlib.Path, bool]]:
    """``dotted name -> (file, is a package __init__)`` of every module."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_init = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_init else parts)] = (path, is_init)
    return found


def _owner(name: str, known: dict[str, tuple[pathlib.Path, bool]]) -> str | None:
    """The module ``name`` lives in (``a.b.c`` -> ``a.b`` when c is a name in it)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """``module -> the project modules it imports`` (anywhere in its body)."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, (path, is_init) in known.items():
        if is_init:
            continue
        package = name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                owner = _owner(target, known)
                if owner is not None and owner != name and not known[owner][1]:
                    graph[name].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_in_the_package_or_the_agents():
    graph = import_graph(ROOT)
    assert len(graph) > 100
    assert cycles(graph) == [], "import cycles (function-level imports included)"


def test_the_check_finds_a_cycle_hidden_in_a_function(tmp_path):
    (tmp_path / "plume_jax" / "sub").mkdir(parents=True)
    (tmp_path / "agents").mkdir()
    (tmp_path / "plume_jax" / "__init__.py").write_text("from plume_jax import a\n")
    (tmp_path / "plume_jax" / "sub" / "__init__.py").write_text("")
    (tmp_path / "agents" / "__init__.py").write_text("")
    (tmp_path / "plume_jax" / "a.py").write_text("from plume_jax.sub.b import f\n")
    (tmp_path / "plume_jax" / "sub" / "b.py").write_text(
        "def f():\n    from ..a import g\n    return g\n")
    (tmp_path / "agents" / "x.py").write_text("import plume_jax\nfrom plume_jax.a import g\n")
    graph = import_graph(tmp_path)
    assert graph["agents.x"] == {"plume_jax.a"}  # the package __init__ is set aside
    assert cycles(graph) == [["plume_jax.a", "plume_jax.sub.b"]]
