"""The package's layout holds: no import cycle among claimgrid's modules (imports inside
functions included: a lazy import that breaks a cycle at run time is still a cycle in the
design), at most 10 top-level modules (the rest live in a package per pipeline stage), and
no module name used twice.

The layers themselves (which package may import which) are import-linter's contract in
pyproject.toml, run by .ci/run as ``uv run --group dev lint-imports``."""

import ast
import collections
from pathlib import Path

from claimgrid import ROOT

PKG = ROOT / "claimgrid"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                targets = [f"{n.module}.{a.name}" for a in n.names] + [n.module]
            elif isinstance(n, ast.Import):
                targets = [a.name for a in n.names]
            else:
                continue
            for t in targets:
                r = resolve(t) if t.startswith("claimgrid") else None
                # A module naming its own package for a submodule (``from claimgrid.gateway
                # import x`` inside claimgrid/gateway/, x a module) imports that submodule; the
                # bare package name it names beside it is no edge. A name the package's
                # ``__init__`` itself defines is one: a submodule that reads its package's
                # namespace, while that ``__init__`` imports the submodule, is a cycle.
                if r and r != m and (not m.startswith(r + ".") or (t != r and _defined_in_init(mods[r], t))):
                    graph[m].add(r)
    return graph


def _defined_in_init(init: Path, target: str) -> bool:
    """``target`` (``package.name``) names something the package's ``__init__`` defines or
    imports, not one of its submodules."""
    if init.name != "__init__.py":
        return False
    name = target.rpartition(".")[2]
    return not (init.parent / f"{name}.py").is_file() and not (init.parent / name / "__init__.py").is_file()


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    assert _cycles(_graph(_modules())) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_at_most_ten_top_level_modules():
    top = sorted(p.name for p in PKG.glob("*.py"))
    assert len(top) <= 10, top


def test_no_module_name_used_twice():
    names = collections.Counter(p.stem for p in PKG.rglob("*.py") if p.stem != "__init__")
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    twice = {n: k for n, k in names.items() if k > 1}
    assert twice == {}
    assert not (packages & set(names)), packages & set(names)
