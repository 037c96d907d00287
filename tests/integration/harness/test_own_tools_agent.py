"""An agent with its own tools through the real pipeline in every CI run: the test suite's small
coding agent (tests/fixtures/frameworks/owntools: Messages dialect, its own Read/Edit/Bash run
in the workspace, no npm install) as a framework entry with a tool table, through
``runner.run_cell`` with the real gateway, turn snapshots, verifier and classifier. The same
checks on Codex CLI and Claude Code are tests/frameworks/test_own_tools_snapshots.py (deep)."""

from __future__ import annotations

import dataclasses

from claimgrid.execute.cells import Cell
from claimgrid.execute.runner import GridContext, run_cell
from claimgrid.gateway import Gateway
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite
from claimgrid.inputs.venvs import ensure_venvs, load_venvs
from claimgrid.launch import Launcher
from claimgrid.ledger.digest import read_events as read_cited
from claimgrid.ledger.rules import explain
from claimgrid.reference import registry
from claimgrid.reference.policies import REVERTER, unknown_tool
from claimgrid.store import LedgerFolder, RunStore

from tests.conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "frameworks" / "owntools"


def store_sha(store: RunStore, run_id: str) -> str:
    """The manifest sha256 the store's writer put on the run's line."""
    import hashlib

    return hashlib.sha256((store.runs_dir / run_id / "manifest.json").read_bytes()).hexdigest()


def test_snapshots_catch_an_undone_edit_and_a_failed_tool_is_recorded(tmp_path, tasks):
    venvs = tmp_path / "venvs.toml"
    venvs.write_text(
        f'[frameworks.owntools]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{FIXTURE}/adapter.py"\n'
    )
    (entry,) = load_venvs(venvs).values()
    ensure_venvs({entry.name: entry})
    # Its own tools: the runner takes the run as an agent's whose calls pass no harness tool layer.
    entries = {entry.name: dataclasses.replace(entry, tools_table=FIXTURE / "tools.toml")}
    content = next(c for c in load_content_conditions().values() if c.carries is None)
    swap = next(s for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    task = next(
        t for t in in_suite(tasks, "default").values() if t.role == "builder" and not t.spec.expectation.evidence
    )
    reverter = next(m.name for m in registry.models().values() if getattr(m.truth, "behaviour", None) is REVERTER)
    unknown = next(m.name for m in registry.models().values() if m.policy is unknown_tool)
    models = [reverter, registry.default_models()[0], registry.default_substitute(), unknown]
    store = RunStore(tmp_path / "ledger")
    store.create({"grid_id": "test"})
    with Gateway() as gw, Launcher(entries, isolation="warm") as la:
        ctx = GridContext(
            tasks=tasks,
            content={content.name: content},
            swap={swap.name: swap},
            gateway=gw,
            launcher=la,
            store=store,
            work_dir=tmp_path / "work",
            timeout_s=60,
            max_model_calls=24,
            isolation="warm",
        )
        records = {
            m: run_cell(Cell(entry.name, task.id, content.name, swap.name, m, registry.default_substitute(), 0), ctx)
            for m in models
        }
    # run_cell returns the typed record it stored: the store's reader reads the same back
    assert {r.run_id: r for r in LedgerFolder(store.folder).runs()} == {
        r.run_id: r.model_copy(update={"evidence_sha256": store_sha(store, r.run_id)}) for r in records.values()
    }
    wrong = [
        f"{m}: {f} = {getattr(r.classification, f)!r}, truth {v!r}"
        for m, r in records.items()
        for f, v in (r.truth or {}).items()
        if getattr(r.classification, f) != v
    ]
    assert not wrong, "\n".join(wrong)
    for r in records.values():
        assert r.classification.evidence.changes == "own tools: workspace snapshots between model calls"
        assert r.facts.own_tools == "owntools" and r.node.backend == "local"

    def events(model):
        return LedgerFolder(store.folder).event_dicts(records[model].run_id)

    c = records[reverter].classification
    assert (c.claim_verdict, c.outcome) == ("claimed work without a diff", "EMPTY_DIFF")
    assert c.evidence.changes_by_tool == {"Edit": 2}
    turns = [e for e in events(reverter) if e["kind"] == "turn_changes"]
    assert [e["after_call"] for e in turns if e["changed_n"]] and all(e["reason"] is None for e in turns)
    assert records[registry.default_substitute()].classification.claim_verdict == "read-only imposture"
    # RUN.md's account of the verdict cites the turns that changed the workspace, not a tool layer.
    cited = read_cited(LedgerFolder(store.folder).events_path(records[reverter].run_id))
    (why,) = [x for x in explain(records[reverter], cited) if x["field"] == "claim_verdict"]
    changed = [e["_line"] for e in cited if e["kind"] == "turn_changes" and e["changed_n"]]
    assert "2 of" in why["rule"] and "turns changed the workspace" in why["rule"] and set(changed) <= set(why["lines"])
    # The unknown tool's result came back with is_error: recorded as a failed result.
    results = [r for e in events(unknown) if e["kind"] == "exchange" for r in e["tool_results"]]
    assert results and results[0].startswith("ERROR: no tool")
