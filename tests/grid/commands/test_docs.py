"""The docs cannot drift: their generated blocks equal what the code renders, and CONTRACTS'
worked examples run.

Generated blocks (claimgrid.commands.docs): docs/flags.md's ``grid.py run`` flag table, docs/layout.md
(every module with its docstring's first sentence), docs/ledger-readers.md's runs.parquet columns.
"""

from __future__ import annotations

import ast
import json
import re
import shutil

import pytest

from claimgrid.commands import docs

from tests.conftest import ROOT

FIX = f"run `{docs.COMMAND}` and commit what it changes"


def test_every_generated_block_is_current():
    assert docs.stale() == [], f"{docs.stale()}: {FIX}"


def test_a_new_flag_makes_the_readme_stale(monkeypatch):
    from claimgrid.commands import cli

    build = cli.build_parser

    def with_a_fake_flag():
        parser = build()
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        sub.choices["run"].add_argument("--fake-flag", help="a flag the README does not know yet")
        return parser

    monkeypatch.setattr(cli, "build_parser", with_a_fake_flag)
    assert "`--fake-flag`" in docs.flags_table()
    assert docs.stale() == ["docs/flags.md: block 'flags:run' is out of date"]


def test_a_new_classification_value_makes_its_table_stale(monkeypatch):
    from typing import Literal

    from claimgrid import vocab

    monkeypatch.setitem(vocab.FIELDS, "process", Literal["ok", "a value the docs do not know yet"])
    assert "`a value the docs do not know yet`" in docs.classification_values()
    assert docs.stale() == ["docs/ledger-readers.md: block 'classification-values' is out of date"]


def _tree_copy(tmp_path):
    """The package and the adapter harness, as they are, in a folder of their own."""
    shutil.copytree(ROOT / "claimgrid", tmp_path / "claimgrid", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "frameworks" / "_harness",
        tmp_path / "frameworks" / "_harness",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return tmp_path


def test_a_new_module_makes_the_layout_stale(tmp_path):
    root = _tree_copy(tmp_path)
    doc = (ROOT / "docs" / "layout.md").read_text()
    assert docs.layout_table(root) in doc  # the copy renders what the file holds
    (root / "claimgrid" / "verify" / "fake_module.py").write_text('"""A module the layout does not list yet."""\n')
    table = docs.layout_table(root)
    assert "| `claimgrid/verify/fake_module.py` | A module the layout does not list yet. |" in table
    assert table not in doc


def test_every_module_has_a_docstring():
    """The layout's line for a module is its docstring's first sentence: a module needs one."""
    missing = [line for line in docs.layout_table().splitlines() if "(no docstring)" in line]
    assert missing == [], f"give these modules a docstring, then {FIX}: {missing}"


def test_the_public_extension_api_is_documented():
    import claimgrid.reference as public

    doc = (ROOT / "docs" / "adapter-authors.md").read_text()
    section = doc[doc.index("### Reference-model registry and the extension API") :]
    for name in public.__all__:
        assert f"`{name}`" in section, (
            f"claimgrid.reference exports {name}; docs/adapter-authors.md's extension API does not name it"
        )


def _keys(d: ast.Dict) -> list[str]:
    """The keys a dict literal builds, a ``**caps.f()`` spread read as the keys ``f`` returns
    (the runner sends the tool layer's bounds from claimgrid.caps, defined there once)."""
    from claimgrid import caps

    keys: list[str] = []
    for k, v in zip(d.keys, d.values, strict=True):
        if k is not None:
            keys.append(k.value)
            continue
        assert isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and hasattr(caps, v.func.id), (
            f"runner.py spreads {ast.unparse(v)} into a control dict: only claimgrid.caps functions are read here"
        )
        keys.extend(getattr(caps, v.func.id)())
    return keys


def test_the_control_example_has_the_fields_the_runner_sends():
    """CONTRACTS' control example is the dict claimgrid.execute.runner builds: same keys, same budgets."""
    tree = ast.parse((ROOT / "claimgrid" / "execute" / "runner.py").read_text())
    ctl = next(
        n.value
        for n in ast.walk(tree)
        if (
            isinstance(n, ast.Assign)
            and any(getattr(t, "id", None) == "ctl" for t in n.targets)
            or isinstance(n, ast.AnnAssign)
            and getattr(n.target, "id", None) == "ctl"
        )
        and isinstance(n.value, ast.Dict)
    )
    sent = _keys(ctl)
    budgets = next(v for k, v in zip(ctl.keys, ctl.values, strict=True) if k is not None and k.value == "budgets")
    doc = (ROOT / "docs" / "adapter-authors.md").read_text()
    block = doc[doc.index("<!-- control -->") :]
    example = json.loads(block[block.index("```json") + 7 : block.index("```", block.index("```json") + 7)])
    assert list(example) == sent, "update CONTRACTS' control example (Adapter contract) to the runner's fields"
    assert list(example["budgets"]) == _keys(budgets)
    assert example["model"] == "agent-model" and example["run_id"].startswith("d-")


# ---------------------------------------------------------------- CONTRACTS' worked examples


def examples() -> list[tuple[str, str, list[str]]]:
    """Each ```python block marked ``<!-- example -->``: (file name, code, the models its first
    line's ``uv run grid.py run --policies FILE --models A,B`` names)."""
    doc = (ROOT / "docs" / "adapter-authors.md").read_text()
    found = []
    for m in re.finditer(r"<!-- example -->\n```python\n(.*?)```", doc, re.S):
        code = m.group(1)
        head = re.match(r"# (\S+\.py)\s+--\s+uv run grid\.py run --policies \S+ --models (\S+)", code)
        assert head, (
            f"an example's first line must be '# FILE.py  --  uv run grid.py run --policies FILE.py --models NAME': {code[:80]!r}"
        )
        found.append((head.group(1), code, head.group(2).split(",")))
    return found


def test_contracts_has_runnable_examples():
    assert len(examples()) >= 2


def test_contracts_examples_run(tmp_path, plain_venvs):
    """Every example, written to its file, runs through ``grid.py run --policies`` on the
    ``plain`` framework (one clean, unswapped cell of one task per model), and each run's
    classification agrees with the truth the file states."""
    from claimgrid.commands.cli import main

    argv, models = (
        [
            "run",
            "--venvs",
            str(plain_venvs),
            "--tasks",
            "fix-float-add",
            "--content",
            "clean",
            "--swap",
            "none",
            "--out",
            str(tmp_path / "grid"),
            "--no-progress",
            "--jobs",
            "2",
        ],
        [],
    )
    for name, code, names in examples():
        (tmp_path / name).write_text(code)
        argv += ["--policies", str(tmp_path / name)]
        models += names
    assert main([*argv, "--models", ",".join(models)]) == 0
    records = [json.loads(line) for line in (tmp_path / "grid" / "runs.jsonl").read_text().splitlines()]
    assert sorted(r["model"] for r in records) == sorted(models)
    for r in records:
        assert r["truth"], r["model"]
        wrong = {k: (v, r["classification"].get(k)) for k, v in r["truth"].items() if r["classification"].get(k) != v}
        assert wrong == {}, f"{r['model']}: truth vs classification {wrong}"


@pytest.mark.parametrize(
    "text",
    [
        "README.md",
        "docs/CONTRACTS.md",
        "docs/DESIGN.md",
        "docs/task-authors.md",
        "docs/adapter-authors.md",
        "docs/ledger-readers.md",
    ],
)
def test_no_pointer_to_a_document_outside_the_repository(text):
    body = (ROOT / text).read_text()
    for pattern in (r"\bissue \d+", r"\bseed 00\d", r"DESIGN\ssection", r"shared/DESIGN"):
        assert not re.search(pattern, body, re.I), f"{text}: {pattern}: say what it stands for, or link docs/DESIGN.md"


def _prose(markdown: str) -> str:
    """The page without its fenced code blocks (a fence is a line starting with three backticks)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return "\n".join(out)


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(markdown), re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-"))
    return found


def test_every_relative_link_and_anchor_resolves():
    pages = [
        ROOT / "README.md",
        ROOT / "bench" / "README.md",
        ROOT / "ledger" / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
    ]
    broken = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(text)):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{page.relative_to(ROOT)}: {target}: no such heading")
    assert broken == []


def test_the_readme_stays_short():
    """The README is the newcomer's page (at most 150 lines); details live in docs/ and bench/."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= 150, f"README.md has {lines} lines: move detail to docs/ (linked from its 'More' table)"
