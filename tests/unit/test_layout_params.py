"""No function in the claimgrid package takes more than 8 parameters (self/cls not counted;
*args and **kwargs count one each): a function that needs more takes a typed object instead
(claimgrid.execute.spec has the grid's)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

MAX_PARAMS = 8


def _count(fn: ast.FunctionDef | ast.AsyncFunctionDef, in_class: bool) -> int:
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    is_static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
    if in_class and not is_static and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def _functions(tree: ast.AST):
    """Every function with whether it is defined directly in a class body."""

    def walk(node, in_class):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield child, in_class
                yield from walk(child, False)
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, True)
            else:
                yield from walk(child, in_class)

    yield from walk(tree, False)


def test_the_counter_counts_what_the_rule_says():
    src = (
        "def f(a, b, /, c, *args, d, **kw): pass\n"
        "class C:\n"
        "    def m(self, a): pass\n"
        "    @classmethod\n"
        "    def k(cls, a, b): pass\n"
        "    @staticmethod\n"
        "    def s(self, a): pass\n"
    )
    counts = {fn.name: _count(fn, in_class) for fn, in_class in _functions(ast.parse(src))}
    assert counts == {"f": 6, "m": 1, "k": 2, "s": 2}


def test_no_function_in_claimgrid_takes_more_than_eight_parameters():
    over = []
    files = sorted((ROOT / "claimgrid").rglob("*.py"))
    assert files, "no claimgrid sources found"
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for fn, in_class in _functions(tree):
            n = _count(fn, in_class)
            if n > MAX_PARAMS:
                over.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}: {n} parameters")
    assert not over, f"functions over {MAX_PARAMS} parameters:\n" + "\n".join(over)
