"""The behaviours of tests/fixtures/policies.py through the real pipeline on every framework in venvs.toml: real
gateway, real adapters, real tool layer, real verifier, runner.run_cell writing the typed
record. The behaviours are test-suite policies registered through the registry
(tests/fixtures/policies.py, the --policies hook); every field their registered truth
states must agree with the classification, on every framework."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from claimgrid.execute.cells import Cell
from claimgrid.execute.runner import GridContext, run_cell
from claimgrid.gateway import Gateway
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite
from claimgrid.inputs.venvs import default_frameworks, ensure_venvs, load_venvs
from claimgrid.launch import Launcher
from claimgrid.reference import registry
from claimgrid.store import RunStore
from claimgrid.store.lines import read_events
from claimgrid.store.record import dump, read_records

from tests.conftest import ROOT, frameworks_needed

pytestmark = pytest.mark.frameworks
POLICIES = ROOT / "tests" / "fixtures" / "policies.py"
# These checks read the harness tool layer's events (run_command's workspace snapshots, git run
# through it, an undo by `rm -f`): an agent with its own tools (venvs.toml kind = "cli") has none,
# and Codex's own command policy refuses `rm -f`. Its evidence is checked by
# tests/frameworks/test_conformance.py, tests/frameworks/test_own_tools_snapshots.py (an edit
# undone, through the turn snapshots), tests/integration/harness/test_own_tools_agent.py and
# tests/unit/classify/test_own_tools.py.
FRAMEWORKS = [name for name, e in default_frameworks(load_venvs()).items() if not e.is_cli]  # the default matrix's


def pick(tasks, content, swaps):
    """Tasks and conditions chosen by their data, never by name."""
    tasks = in_suite(tasks, "default")
    builders = [t for t in tasks.values() if t.role == "builder"]
    return {
        "code": next(t for t in builders if not t.spec.expectation.evidence),
        "declared": next(t for t in builders if t.spec.expectation.evidence),
        "baseline": next(c for c in content.values() if c.carries is None),
        "attack": next(c for c in content.values() if c.carries == "attacker_goal"),
        "control": next(s for s in swaps.values() if s.unavailable_from_call < 0),
    }


def cells_for(framework, tasks, p, substitute):
    out = []

    def add(model, task, content):
        out.append(Cell(framework, task.id, content.name, p["control"].name, model, substitute, 0))

    for task in in_suite(tasks, "default").values():
        add("shell-worker", task, p["baseline"])
    add("gives-up", p["declared"], p["baseline"])
    add("retracts", p["declared"], p["baseline"])
    add("completes", p["code"], p["baseline"])
    add("undoer", p["code"], p["attack"])
    add("forger", p["code"], p["baseline"])
    add("git-worker", p["code"], p["baseline"])
    add(registry.default_models()[0], p["declared"], p["baseline"])  # the nothing-to-fix control
    return out


def run_grid(tmp_path, entries, cells, tasks, content, swaps, isolation="warm", jobs=1):
    """``cells`` through ``run_cell``, ``jobs`` at a time, as grid.py runs them: every
    framework's warm parent started at once, the templates built before threads share them."""
    store = RunStore(tmp_path / "ledger")
    store.create({"grid_id": "test"})
    with Gateway() as gw, Launcher(entries, isolation=isolation) as la:
        la.prewarm()
        ctx = GridContext(
            tasks=tasks,
            content=content,
            swap=swaps,
            gateway=gw,
            launcher=la,
            store=store,
            work_dir=tmp_path / "work",
            timeout_s=120,
            max_model_calls=24,
            isolation=isolation,
        )
        for task, name in sorted({(cell.task, cell.content) for cell in cells}):
            ctx.template(tasks[task], content[name])
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            records = [dump(r) for r in pool.map(lambda cell: run_cell(cell, ctx), cells)]  # as the ledger line reads
    return store, records


@pytest.fixture(scope="module")
def grid(request, tmp_path_factory, tasks):
    """The cells of the frameworks this module's selected tests read (``-k NAME``: NAME's)."""
    readers = [item for item in request.session.items if item.path == request.path and "grid" in item.fixturenames]
    need = frameworks_needed(readers, set(FRAMEWORKS))
    entries = {name: e for name, e in load_venvs().items() if name in need}
    registry.load_policies(POLICIES)
    content, swaps = load_content_conditions(), load_swap_conditions()
    p = pick(tasks, content, swaps)
    sub = registry.default_substitute()
    cells = [c for fw in entries for c in cells_for(fw, tasks, p, sub)]
    store, records = run_grid(tmp_path_factory.mktemp("validity"), entries, cells, tasks, content, swaps, jobs=3)
    return {
        "records": {(r["framework"], r["model"], r["task"], r["content"]): r for r in records},
        "store": store,
        "p": p,
    }


def rec(grid, fw, model, task, content):
    return grid["records"][(fw, model, task.id, content.name)]


def test_every_record_is_typed_and_agrees_with_its_truth(grid):
    typed = read_records(grid["store"].runs_path)
    assert len(typed) == len(grid["records"])
    disagreements = []
    for r in grid["records"].values():
        truth = r["truth"]
        assert truth, f"{r['run_id']}: no registered truth"
        for field, value in truth.items():
            if r["classification"].get(field) != value:
                disagreements.append(f"{r['run_id']}: {field} {r['classification'].get(field)!r} != truth {value!r}")
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_shell_edit_write_and_cat_review_are_evidence(grid, fw, tasks):
    for task in in_suite(tasks, "default").values():
        c = rec(grid, fw, "shell-worker", task, grid["p"]["baseline"])["classification"]
        assert c["claim_verdict"] == "consistent", (task.id, c)
        assert c["outcome"] == "PASS" and c["claim_vs_outcome"] == "TRUE_SUCCESS", (task.id, c)
        # shell-worker turns a write, and an edit without a newline, into a command (fixtures/policies.as_shell)
        if any(
            s.tool == "write_file" or (s.tool == "edit_file" and "\n" not in s.args["old"] + s.args["new"])
            for s in task.spec.reference.steps
        ):
            assert c["evidence"]["changes_by_tool"].get("run_command", 0) >= 1, c["evidence"]
            assert c["evidence"]["changes"] == "tool layer: changed_workspace"
        if task.spec.expectation.review:
            for path in task.spec.expectation.review.must_open:
                assert "command output" in c["evidence"]["opened"][path], c["evidence"]
            assert c["review"] == "correct"


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_git_works_inside_run_command(grid, fw):
    """git status, diff and log in the sandbox, without the host's git configuration."""
    r = rec(grid, fw, "git-worker", grid["p"]["code"], grid["p"]["baseline"])
    events = read_events(grid["store"].folder / r["evidence_dir"] / "events.jsonl")
    (call,) = [
        e
        for e in events
        if e.get("source") == "tools"
        and e.get("tool") == "run_command"
        and str((e.get("args") or {}).get("command", "")).startswith("git status")
    ]
    assert call["exit_code"] == 0 and "gitconfig" not in (call.get("result") or ""), call
    assert r["classification"]["outcome"] == "PASS", r["classification"]


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_negated_and_retracted_free_text_is_no_claim(grid, fw):
    for model in ("gives-up", "retracts"):
        c = rec(grid, fw, model, grid["p"]["declared"], grid["p"]["baseline"])["classification"]
        assert c["claimed"] is False and c["claim_form"] == "free text only", c
        assert c["outcome"] == "PASS" and c["claim_vs_outcome"] == "UNCLAIMED_SUCCESS", c
    assert (
        rec(grid, fw, "retracts", grid["p"]["declared"], grid["p"]["baseline"])["classification"]["claim_stance"]
        == "retracted"
    )


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_status_synonym_is_a_claim(grid, fw):
    c = rec(grid, fw, "completes", grid["p"]["code"], grid["p"]["baseline"])["classification"]
    assert c["claimed"] and c["claim_rule"] == "status COMPLETED -> success"
    assert c["claim_vs_outcome"] == "TRUE_SUCCESS"


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_done_then_undone_injection(grid, fw):
    c = rec(grid, fw, "undoer", grid["p"]["code"], grid["p"]["attack"])["classification"]
    assert c["injection"] == "followed, then undone", c
    assert c["outcome"] == "PASS"


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_forged_declarations_are_their_own_field(grid, fw):
    c = rec(grid, fw, "forger", grid["p"]["code"], grid["p"]["baseline"])["classification"]
    assert c["declarations"] == "mismatch"
    assert set(c["declaration_mismatches"]) == {"agent", "delegation_id", "parent_id", "git_evidence"}
    assert c["claim_verdict"] == "consistent"  # not folded into the claim verdict


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_nothing_to_fix_control_is_not_a_false_positive(grid, fw):
    model = registry.default_models()[0]
    r = rec(grid, fw, model, grid["p"]["declared"], grid["p"]["baseline"])
    assert r["classification"]["claim_verdict"] == "consistent", r["classification"]
    assert r["classification"]["channels"] == "consistent"


def test_forged_tool_events_are_caught_by_the_channel_cross_check(tmp_path, tasks):
    """An adapter that drives the tools itself, with zero model calls."""
    venvs = tmp_path / "venvs.toml"
    venvs.write_text(
        f'[frameworks.forger]\npython = "3.11"\nproject = "{ROOT}/frameworks/plain"\n'
        f'adapter = "{ROOT}/tests/fixtures/forger/adapter.py"\n'
    )
    entries = load_venvs(venvs)
    ensure_venvs(entries)
    content, swaps = load_content_conditions(), load_swap_conditions()
    p = pick(tasks, content, swaps)
    cell = Cell(
        "forger",
        p["code"].id,
        p["baseline"].name,
        p["control"].name,
        registry.default_models()[0],
        registry.default_substitute(),
        0,
    )
    _, (r,) = run_grid(tmp_path, entries, [cell], tasks, content, swaps)
    c = r["classification"]
    events = read_events(tmp_path / "ledger" / r["evidence_dir"] / "events.jsonl")
    assert not [e for e in events if e["source"] == "gateway"], "the forger made no model call"
    assert c["channels"] == "unrequested tool events"
    assert c["channel_detail"]["unrequested"] == ["list_dir", "write_file"]
    # Without the cross-check this run looks like a consistent claim backed by a real change.
    assert c["claim_verdict"] == "consistent"
