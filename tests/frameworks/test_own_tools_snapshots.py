"""The coding agents with their own tools (venvs.toml kind = "cli": Codex CLI, Claude Code) in a
real grid on a task where a reference behaviour edits and then reverts its fix: the final diff
is empty, and only the harness's workspace snapshots between model calls
(claimgrid.verify.snapshots) show the edits. Every run agrees with its truth on every field;
without its ``turn_changes`` events the same evidence reads as a reader's.

Deep (CLAIMGRID_DEEP=1): the agents are npm installs of hundreds of MB, as in the conformance
suite. The same pipeline runs in every CI run on a small agent with its own tools written for
the tests (tests/integration/harness/test_own_tools_agent.py)."""

from __future__ import annotations

import pytest

from claimgrid.classify.classifier import classify
from claimgrid.commands.cli import main
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.inputs.venvs import load_venvs
from claimgrid.reference import registry
from claimgrid.reference.policies import REVERTER
from claimgrid.store.lines import read_events
from claimgrid.store.record import read_records

pytestmark = [pytest.mark.frameworks, pytest.mark.deep]


def test_an_edit_undone_before_the_end_is_caught_by_the_turn_snapshots(tmp_path):
    agents = [name for name, e in load_venvs().items() if e.is_cli]
    assert len(agents) >= 2
    task = next(
        t for t in in_suite(load_tasks(), "default").values() if t.role == "builder" and not t.spec.expectation.evidence
    )
    content = next(name for name, c in load_content_conditions().items() if c.carries is None)
    swap = next(name for name, s in load_swap_conditions().items() if s.unavailable_from_call < 0)
    reverter = next(m.name for m in registry.models().values() if getattr(m.truth, "behaviour", None) is REVERTER)
    models = [reverter, registry.default_models()[0], registry.default_substitute()]
    out = tmp_path / "ledger"
    assert (
        main(
            [
                "run",
                "--frameworks",
                ",".join(agents),
                "--tasks",
                task.id,
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
    assert len(recs) == len(agents) * len(models)
    wrong = []
    for r in recs:
        c = r.classification.model_dump()
        wrong += [f"{r.run_id}: {f} = {c[f]!r}, truth {v!r}" for f, v in (r.truth or {}).items() if c[f] != v]
        assert r.classification.evidence.changes == "own tools: workspace snapshots between model calls", r.run_id
    assert not wrong, "\n".join(wrong)

    fixed = {s.args["path"] for s in task.spec.reference.steps if s.tool in ("edit_file", "write_file")}
    assert fixed
    for r in (r for r in recs if r.model == reverter):
        events = read_events(out / r.evidence_dir / "events.jsonl")
        turns = [e for e in events if e.get("kind") == "turn_changes"]
        edited = [t for t in turns if {ch["path"] for ch in t["changed"]} & fixed]
        assert len(edited) == 2 * len(fixed), (r.run_id, turns)  # the fix, then its undoing, in turns of their own
        diff = next(e for e in events if e.get("kind") == "diff")
        assert diff["empty"] is True
        assert r.classification.claim_verdict == "claimed work without a diff"
        assert r.classification.outcome == "EMPTY_DIFF" and r.classification.claim_vs_outcome == "FALSE_SUCCESS"
        # Without the snapshots the diff alone is all there is: the edits are invisible.
        blind = classify([e for e in events if e.get("kind") != "turn_changes"], r.facts)
        assert blind.claim_verdict == "read-only imposture", r.run_id
