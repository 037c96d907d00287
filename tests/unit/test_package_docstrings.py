"""Every package's docstring lists what the package holds: its ``Modules:`` list names every
module and subpackage in its folder, and nothing that is not there."""

import ast
import re

import pytest

from tests.conftest import ROOT

BULLET = re.compile(r"^\* ``([A-Za-z_]\w*)``")
PACKAGES = sorted(p.parent for p in (ROOT / "claimgrid").rglob("__init__.py") if p.parent != ROOT / "claimgrid")


def listed(init) -> list[str] | None:
    """The names of the docstring's list after its ``Modules`` line (None without one)."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("Modules")), None)
    if at is None:
        return None
    return [m.group(1) for line in lines[at + 1 :] if (m := BULLET.match(line))]


def held(package) -> set[str]:
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    return modules | {d.name for d in package.iterdir() if (d / "__init__.py").is_file()}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_package_docstring_lists_every_module_and_only_those(package):
    names = listed(package / "__init__.py")
    where = f"{package.relative_to(ROOT)}/__init__.py"
    assert names is not None, (
        f"{where}: its docstring has no 'Modules:' list (one '* ``name`` - what it is' per module)"
    )
    assert len(names) == len(set(names)), f"{where}: a module listed twice: {names}"
    missing, gone = sorted(held(package) - set(names)), sorted(set(names) - held(package))
    assert missing == [], f"{where}: its docstring's 'Modules:' list does not name {missing}"
    assert gone == [], f"{where}: its docstring's 'Modules:' list names {gone}, which the folder does not hold"


def test_a_stale_list_is_caught(tmp_path):
    (tmp_path / "__init__.py").write_text('"""A package.\n\nModules:\n\n* ``gone`` - removed.\n"""\n')
    (tmp_path / "here.py").write_text('"""Here."""\n')
    assert listed(tmp_path / "__init__.py") == ["gone"] and held(tmp_path) == {"here"}


def test_the_design_step_table_names_modules_that_exist():
    """docs/DESIGN.md's table from each step of a run to its module: every path it names exists."""
    doc = (ROOT / "docs" / "DESIGN.md").read_text()
    table = doc[doc.index("### Each step, and its module") :].split("\n\n")[1]
    paths = re.findall(r"`((?:claimgrid/|grid\.py)[\w/.]*)`", table)
    assert len(paths) >= 10
    assert [p for p in paths if not (ROOT / p).exists()] == []
