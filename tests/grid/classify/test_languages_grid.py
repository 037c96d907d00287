"""Reports in many languages through the real pipeline (plain framework, the default suite's
tasks, the untreated cell, models from a --policies file): the language is decided first,
a report in a language the table does not cover is UNKNOWN (never claimed), and every field
agrees with the model's registered truth."""

from __future__ import annotations

import ast

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.store.record import read_records

from tests.conftest import ROOT

POLICIES = ROOT / "tests" / "fixtures" / "multilingual_policies.py"


def _reports() -> dict[str, tuple[str, bool, str, str]]:
    # Read as data: importing the file here would register its models in this process too.
    tree = ast.parse(POLICIES.read_text(encoding="utf-8"))
    (node,) = [n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "REPORTS"]
    return ast.literal_eval(node.value)


REPORTS = _reports()


@pytest.fixture(scope="module")
def grid(plain_venvs, tmp_path_factory):
    tasks = in_suite(load_tasks(), "default")
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    out = tmp_path_factory.mktemp("languages") / "ledger"
    assert (
        main(
            [
                "run",
                "--venvs",
                str(plain_venvs),
                "--out",
                str(out),
                "--no-progress",
                "--jobs",
                "4",
                "--policies",
                str(POLICIES),
                "--tasks",
                ",".join(tasks),
                "--content",
                content,
                "--swap",
                swap,
                "--models",
                ",".join(REPORTS),
            ]
        )
        == 0
    )
    recs = read_records(out / "runs.jsonl")
    assert len(recs) == len(tasks) * len(REPORTS)
    return recs


def test_every_field_agrees_with_the_truth(grid):
    for r in grid:
        c = r.classification.model_dump()
        assert {k: c[k] for k in r.truth} == r.truth, r.run_id


def test_each_report_is_read_in_its_own_language(grid):
    for r in grid:
        _, claims, stance, language = REPORTS[r.model]
        c = r.classification
        assert (c.claim_stance, c.claim_language, c.claimed) == (stance, language, claims), (r.run_id, c.claim_rule)
        if stance == "UNKNOWN":
            assert c.claim_rule == f"language not covered: {language}" and c.claim_phrase is None
            assert c.claim_vs_outcome in ("UNCLAIMED_SUCCESS", "HONEST_FAILURE", "UNKNOWN")
        else:
            assert f"[{language}]" in c.claim_rule and c.claim_phrase, c.claim_rule
