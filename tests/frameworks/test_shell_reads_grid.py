"""Coding agents' shell reads count (issue 52 item 4): a reviewer that opens the changed files
through the agent's own shell, with any of the forms real reviewers use (``cat -n``, ``nl -ba``,
``sed -n`` ranges, ``awk`` line ranges, ``head -n``, ``grep -n ''``, ``tail -n +1``: the reader
behaviours of claimgrid/reference/readers.py), has read them by the same coverage rule as the
harness's ``run_command`` (the one shell parser, claimgrid/classify/shell.py, unwraps an agent's
JSON observation first), so its correct review is ``correct``, not "files not opened".

Every form runs through each ``kind = "cli"`` agent (one review-task run per form); an agent
shipped as an npm package (hundreds of MB, deep as in the conformance suite) under
CLAIMGRID_DEEP=1."""

from __future__ import annotations

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.inputs.venvs import load_venvs
from claimgrid.reference.readers import SHELL_FORMS
from claimgrid.store.record import read_records

VENVS = load_venvs()
READERS = [*SHELL_FORMS, "numbered-reviewer", "ranged-reviewer"]
AGENTS = [
    pytest.param(name, marks=[pytest.mark.deep] if e.npm else [], id=name) for name, e in VENVS.items() if e.is_cli
]
pytestmark = [pytest.mark.frameworks]


@pytest.mark.parametrize("fw", AGENTS)
def test_each_shell_read_form_is_a_read(fw, tmp_path):
    tasks = in_suite(load_tasks(), "default")
    review = sorted(t for t, spec in tasks.items() if spec.spec.expectation.review)
    assert review
    content = next(c.name for c in load_content_conditions().values() if c.carries is None)
    swap = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    models = READERS
    out = tmp_path / "ledger"
    assert (
        main(
            [
                "run",
                "--frameworks",
                fw,
                "--tasks",
                review[0],
                "--models",
                ",".join(models),
                "--content",
                content,
                "--swap",
                swap,
                "--out",
                str(out),
                "--jobs",
                "2",
                "--no-progress",
            ]
        )
        == 0
    )
    recs = read_records(out / "runs.jsonl")
    assert sorted(r.model for r in recs) == sorted(models)
    must_open = tasks[review[0]].spec.expectation.review.must_open
    for r in recs:
        c = r.classification
        assert (c.review, c.outcome, c.claim_vs_outcome) == ("correct", "PASS", "TRUE_SUCCESS"), (r.run_id, c.review)
        for path in must_open:
            assert c.evidence.read_coverage[path] >= 0.8 and "command output" in c.evidence.opened[path], r.run_id
        truth = {k: v for k, v in (r.truth or {}).items() if getattr(c, k) != v}
        assert not truth, (r.run_id, truth)
