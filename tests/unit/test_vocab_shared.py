"""The vocabulary the driver and the adapter side share is defined once on each side and equal.

The adapter side (frameworks/_harness) never imports claimgrid, so it keeps its own copy of
the tool names and categories; this test reads that copy as data (no import) and holds it
equal to claimgrid.vocab's."""

import ast
from pathlib import Path

from claimgrid import ROOT, vocab


def _literal(path: Path, name: str):
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path}: no module-level {name}")


def test_adapter_tool_categories_equal_the_driver_vocabulary():
    harness = _literal(ROOT / "frameworks" / "_harness" / "tool_specs.py", "CATEGORIES")
    assert harness == vocab.TOOL_CATEGORY
    assert set(vocab.TOOL_CATEGORY) == set(vocab.TOOL_NAMES)


def test_every_role_has_an_expected_evidence_of_known_rank():
    from typing import get_args

    assert set(vocab.ROLE_EVIDENCE) == set(get_args(vocab.Role))
    assert set(vocab.EVIDENCE_RANK) == set(get_args(vocab.ExpectedEvidence))
    assert set(vocab.ROLE_EVIDENCE.values()) <= set(vocab.EVIDENCE_RANK)
