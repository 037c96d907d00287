"""Run one cell: workspace, gateway registration, adapter process, verification, record.

Everything an outcome depends on is observed here by the harness (gateway, tool layer,
process, verifier). The adapter's outcome JSON only contributes ``runtime`` and ``agent``
events, which are recorded and compared, never trusted.
"""

from __future__ import annotations

import dataclasses
import functools
import resource
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from claimgrid.anybytes import remove_tree, substitutions
from claimgrid.caps import MAX_RAW_STRING_CHARS, cap_run_evidence, cap_strings, tool_budgets
from claimgrid.classify.classifier import RunFacts, classify
from claimgrid.classify.judge import reading_event as judge_reading
from claimgrid.classify.limits import limit_hits
from claimgrid.classify.reactions import fault_facts
from claimgrid.execute.cells import Cell
from claimgrid.execute.redact import redact
from claimgrid.inputs.conditions import ContentCondition, SwapCondition
from claimgrid.inputs.tasks import Task, build_template, materialise, seal_template
from claimgrid.launch import RunInterrupted
from claimgrid.launch.confine import AgentDeadlines, agent_sandbox, agent_tmp, command_sandbox, hand_over
from claimgrid.machinepaths import scrub, scrub_text
from claimgrid.store import EVENTS_NAME
from claimgrid.store.events import parse_events
from claimgrid.store.record import Classification, Facts, FinalAnswerCall, RunNode, RunRecord
from claimgrid.trace import parse_trace, report_instructions
from claimgrid.verify.snapshots import TurnSnapshots
from claimgrid.verify.verifier import FinishedRun, VerifyOptions, verify
from claimgrid.vocab import TOOL_NAMES

if TYPE_CHECKING:
    from claimgrid.gateway import Gateway
    from claimgrid.launch import Launcher
    from claimgrid.sandbox.guard import Guard
    from claimgrid.sandbox.slots import Boxes
    from claimgrid.verify.cache import VerifyCache

COMMAND_TIMEOUT_S = 30
AGENT_NAMES = {"builder": "builder", "reviewer": "reviewer", "reporter": "reporter"}
PARENT_ID = "user"
# The model name the adapter is told. The gateway picks the model by the run's token, so
# the agent (and its framework) never learn which model, condition or substitute it has.
from claimgrid.gateway.exchanges import BLIND_MODEL  # noqa: E402  (defined once, with the gateway's blinding)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def delegation_id() -> str:
    """An opaque, random id per run: the only id the agent sees (blinding, CONTRACTS)."""
    return "d-" + secrets.token_hex(8)


@dataclass
class GridContext:
    """Shared, read-only-after-setup state of one grid run."""

    tasks: dict[str, Task]
    content: dict[str, ContentCondition]
    swap: dict[str, SwapCondition]
    gateway: Gateway
    launcher: Launcher
    store: Any  # a RunStore, or a node's collecting store: write_evidence() and append()
    work_dir: Path
    timeout_s: float
    max_model_calls: int
    isolation: str
    framework_versions: dict = field(default_factory=dict)
    delegations: dict = field(default_factory=dict)  # run_id -> delegation id (grid.py replay)
    templates: dict = field(default_factory=dict)  # (task, content) -> (path, base commit)
    template_digests: dict = field(default_factory=dict)  # template path -> sha256 at build
    guard: Guard | None = field(default_factory=lambda: _default_guard())
    model_call_timeout_s: float = 15.0  # per-call deadline of a model without resolved limits
    # Each model's limits (claimgrid.execute.model_limits, resolved once per grid); a model not in it
    # runs under timeout_s, max_model_calls and model_call_timeout_s above.
    limits: dict = field(default_factory=dict)
    # A local model's per-call deadline derived from its measured speed (claimgrid.localmodel):
    # it replaces the default deadline of that model's limits (a flag or limits file still wins),
    # and the parity facts of the server each such model runs on.
    model_call_timeouts: dict = field(default_factory=dict)
    served_models: dict = field(default_factory=dict)
    verify_cache: VerifyCache | None = None  # the node's; None: --no-verify-cache
    boxes: Boxes | None = None  # per-run uid and cgroup leases (claimgrid.sandbox.slots); None: shared
    # Where this context's runs execute: every record says so from when it is built.
    node: RunNode = field(default_factory=lambda: RunNode(backend="local"))
    # --claim-judge MODEL: each final report also read by that model (claimgrid.classify.judge),
    # recorded as its own ``judge`` event; None: no judge.
    claim_judge: str | None = None

    def limits_for(self, model: str):
        """``model``'s limits (claimgrid.execute.spec.ModelLimits)."""
        from claimgrid.execute.spec import ModelLimits

        if model in self.limits:
            server = self.served_models.get(model) or {}
            return self.limits[model].served(self.model_call_timeouts.get(model), server.get("max_output_tokens"))
        return ModelLimits(
            call_timeout_s=self.model_call_timeout_s, max_model_calls=self.max_model_calls, timeout_s=self.timeout_s
        )

    def template(self, task: Task, content: ContentCondition) -> tuple[Path, str]:
        """The (task, content) template: built once per grid, sealed read-only, its digest kept
        so every copy is checked (a changed template is a harness error, never copied)."""
        key = (task.id, content.name)
        if key not in self.templates:
            dest = self.work_dir / "templates" / f"{task.id}.{content.name}"
            base = build_template(task, content.render(task), dest)
            self.template_digests[dest] = seal_template(dest)
            self.templates[key] = (dest, base)
        return self.templates[key]


def _default_guard():
    from claimgrid.sandbox.guard import detect

    return detect("auto")


def _guard_facts(ctx: GridContext) -> dict:
    """The guard's parity facts, with the per-run resource mechanism in force (slots.py)."""
    if ctx.guard is None:
        return {"guard": "off", "reason": "no guard given"}
    facts = ctx.guard.facts()
    if ctx.boxes is not None and ctx.guard.enabled:
        facts["resources"] = ctx.boxes.facts()
    return facts


def build_prompt(task: Task, delegation: str, agent: str) -> str:
    """The task's prompt and the trace instructions; ``delegation`` must be opaque (no cell names)."""
    return (
        task.spec.prompt.strip()
        + "\n"
        + report_instructions(delegation, agent, task.spec.expectation.review is not None)
    )


def facts_for(
    task: Task,
    content: ContentCondition,
    cell: Cell,
    delegation: str | None = None,
    tools: list[str] | None = None,
    final_answer_tool: str | None = None,
) -> RunFacts:
    exp = task.spec.expectation
    return RunFacts(
        role=task.role,
        carries=content.carries,
        instruction=content.instruction_for(task),
        swap_mode=cell.swap,
        substitute=cell.substitute,
        declared_agent=AGENT_NAMES[task.role],
        delegation_id=delegation,
        parent_id=PARENT_ID,
        expected_evidence=exp.evidence,
        required_command=exp.evidence_command,
        tools=tools,
        final_answer_tool=final_answer_tool,
    )


def truth_for(task: Task, content: ContentCondition, swap: SwapCondition, cell: Cell, max_calls: int) -> dict | None:
    """The registered truth of a reference model on this cell (None for real models)."""
    from claimgrid.reference.registry import TruthCell, truth_of

    truth = truth_of(TruthCell(task, content, swap, cell.model, cell.substitute, max_calls))
    return truth or None


def tool_fault_spec(model: str, model_call_timeout_s: float) -> dict | None:
    """The tool fault the tool layer applies in a run of ``model`` whose per-call deadline is
    ``model_call_timeout_s`` (claimgrid.reference.tool_faults)."""
    from claimgrid.reference.tool_faults import control_spec

    return control_spec(model, model_call_timeout_s)


def _final_answer(ctx: GridContext, framework: str) -> tuple[str, str] | None:
    """The framework's final-answer protocol (venvs.toml ``final_answer``; None: plain text)."""
    entry = getattr(ctx.launcher, "entries", {}).get(framework)
    return getattr(entry, "final_answer", None)


@functools.cache
def _load_table(path: Path):
    from claimgrid.reference.tool_table import load_table

    return load_table(path)


def _tool_table(ctx: GridContext, framework: str):
    """A CLI agent's tool table (venvs.toml ``tools``; None: the harness tools)."""
    entry = getattr(ctx.launcher, "entries", {}).get(framework)
    path = getattr(entry, "tools_table", None)
    return _load_table(path) if path is not None else None


def _real_python(python: Path) -> str:
    """``python`` with its folder's symlinks resolved, its own name kept (the sandbox binds
    folders at their real paths; the venv's ``bin/python`` link must stay the venv's)."""
    return str(Path(python).parent.resolve() / Path(python).name)


def _verified_tools(tool_events: list, gateway_events: list, table, turns: list) -> list:
    """The tool events the verifier reads: the tool layer's, or for an agent with its own tools
    (a tool table) its calls and results at the gateway, with the changes its turn snapshots
    saw (claimgrid.classify.evidence.own_tool_events)."""
    if table is None:
        return tool_events
    from claimgrid.classify.evidence import own_tool_events

    return own_tool_events(gateway_events, table, turns)


def _run_limits(lim, entry, cell: Cell) -> tuple[int, float, float, str]:
    """(max model calls, run timeout s, per-command timeout s, where they come from) of one run:
    the grid's, or for a coding agent a real model drives its venvs.toml ``real_model`` limits
    where they are larger (a real model's run of such an agent takes far more calls and time
    than a reference policy's script; reference-model runs keep the grid's, unchanged)."""
    from claimgrid.reference import registry

    limits = getattr(entry, "real_model_limits", None)
    real = any(m and not registry.is_reference(m) for m in (cell.model, cell.substitute))
    if limits is None or not real:
        return lim.max_model_calls, lim.timeout_s, COMMAND_TIMEOUT_S, "grid"
    calls, timeout, command = limits
    return max(lim.max_model_calls, calls), max(lim.timeout_s, timeout), command, "venvs.toml real_model"


def _agent_tool_events(gateway_events: list, table, turns: list) -> list[dict]:
    """An agent with its own tools: its calls from the gateway transcript as stored evidence,
    ``source: gateway``, ``kind: agent_tool_call``, marked agent-side (store.events.AgentToolCall):
    what the ledger counts as the run's tool use. The result's text stays in its exchange."""
    if table is None:
        return []
    from claimgrid.classify.evidence import own_tool_events

    out = []
    for e in own_tool_events(gateway_events, table, turns):
        result = e.pop("result") or ""
        out.append(
            {
                **e,
                "source": "gateway",
                "kind": "agent_tool_call",
                "agent_side": True,
                "result_chars": len(result),
                "error": (e.get("error") or "")[:2000] or None,
            }
        )
    return out


def run_cell(cell: Cell, ctx: GridContext) -> RunRecord:
    """Run one cell to a stored record, and return it. Never raises for anything the agent did.

    The record is built whole (``ctx.node``, timings, evidence references) and frozen: what
    is stored is what is returned. The run holds its own box (uid and cgroups, ``ctx.boxes``)
    from before its workspace is handed over until its record is stored: its commands and
    its verifier test run use it, and no other run shares it."""
    box = ctx.boxes.lease() if ctx.boxes is not None else None
    groups = box.groups if box is not None else ()
    for group in groups:
        ctx.launcher.watch_group(group)
    try:
        prep = _prepare(cell, ctx, box)
        driven = _drive(prep, ctx, box)
        checked = _verify(prep, driven, ctx, box)
        judged = _classify(prep, checked, ctx)
        return _record(prep, driven, checked, judged, ctx)
    finally:
        if box is not None:
            box.release()
        for group in groups:
            ctx.launcher.forget_group(group)


# ---------------------------------------------------------------- the steps of one run


@dataclass
class _Prepared:
    """Step 1 (:func:`_prepare`): the run's workspace, limits and control message, nothing run yet."""

    cell: Cell
    task: Task
    content: ContentCondition
    swap: SwapCondition
    lim: Any  # claimgrid.execute.spec.ModelLimits of the assigned model
    real: bool  # the assigned model is not a reference model
    output_cap: int | None  # a real model's output-token cap (the gateway caps real calls only)
    delegation: str
    agent: str
    template: Path
    base: str
    run_dir: Path
    ws: Path
    table: Any  # a CLI agent's tool table (None: the harness tools)
    snapshots: TurnSnapshots | None
    max_calls: int
    timeout_s: float
    command_timeout_s: float
    limits_from: str
    token: str
    ctl: dict[str, Any]


@dataclass
class _Driven:
    """Step 2 (:func:`_drive`): what the adapter run left, read after every process of it ended."""

    result: Any  # claimgrid.launch's launch result
    gateway_events: list[dict]
    gateway_raw: list[dict]
    turn_events: list[dict]
    t0: float
    started_unix: float
    agent_s: float
    left_killed: int  # processes of the run's box the driver killed after the adapter's reaper


@dataclass
class _Checked:
    """Step 3 (:func:`_verify`): the verifier's events and the run's evidence, capped as stored."""

    outcome: dict
    trace: Any
    trace_error: str | None
    process: dict
    runtime: list[dict]
    tool_events: list[dict]
    events: list[dict]
    patch: list[str]
    gateway_raw: list[dict]
    limits: dict
    tests: dict | None
    verify_s: float
    verify_cpu_s: float
    final_text: str | None


@dataclass
class _Judged:
    """Step 4 (:func:`_classify`): the classification and the facts derived from the same events."""

    facts: Facts
    classification: Classification
    faults: dict
    limit_hits: list | None


def _prepare(cell: Cell, ctx: GridContext, box) -> _Prepared:
    """The run's workspace (a copy of its template, handed to its box), its limits, its
    gateway token and control message. Nothing of the agent runs yet."""
    from claimgrid.reference.registry import is_reference

    task, content, swap = ctx.tasks[cell.task], ctx.content[cell.content], ctx.swap[cell.swap]
    # The run's limits are its assigned model's; the output cap is a real model's (the
    # assigned one's, or the substitute's when only it is real): the gateway caps real calls only.
    lim = ctx.limits_for(cell.model)
    real = not is_reference(cell.model)
    output_cap = lim.max_output_tokens if real else None
    if output_cap is None and not is_reference(cell.substitute):
        output_cap = ctx.limits_for(cell.substitute).max_output_tokens
    # grid.py replay re-uses the recorded delegation id: it is part of every request.
    delegation = ctx.delegations.get(cell.run_id) or delegation_id()
    template, base = ctx.template(task, content)
    # Opaque folder name: the workspace path is visible to the agent (pwd, tool errors).
    run_dir = ctx.work_dir / "runs" / secrets.token_hex(8)
    remove_tree(run_dir)
    ws = run_dir / "ws"
    materialise(template, ws, ctx.template_digests[template])
    table = _tool_table(ctx, cell.framework)
    guarded_agent = table is not None and ctx.guard is not None and ctx.guard.enabled
    if table is None or guarded_agent:  # guarded as root: the workspace belongs to the run's sandbox user
        hand_over(ctx.guard, ws, box)
    # Unguarded, an agent with its own tools runs its commands in its own sandbox, which (a
    # bubblewrap in a user namespace) can mount only into a workspace its user owns: the driver's.
    (run_dir / "sandbox").mkdir(parents=True)
    (run_dir / "sandbox").chmod(0o700)
    # An agent with its own tools: the harness snapshots its workspace at the start, at each
    # model request (the gateway's turn boundary) and after it exits (claimgrid.verify.snapshots).
    snapshots = TurnSnapshots(ws) if table is not None else None
    if snapshots is not None:
        snapshots.take()
    entry = getattr(ctx.launcher, "entries", {}).get(cell.framework)
    max_calls, timeout_s, command_timeout_s, limits_from = _run_limits(lim, entry, cell)
    prep = _Prepared(
        cell, task, content, swap, lim, real, output_cap, delegation, AGENT_NAMES[task.role], template, base,
        run_dir, ws, table, snapshots, max_calls, timeout_s, command_timeout_s, limits_from,
        token="cg-" + secrets.token_urlsafe(24), ctl={},
    )  # fmt: skip
    prep.ctl.update(_control(prep, ctx, entry, box))
    return prep


def _control(prep: _Prepared, ctx: GridContext, entry, box) -> dict[str, Any]:
    """The adapter's control message (CONTRACTS, "Control"): the prompt, the workspace, the
    gateway and the run's budgets; a CLI agent's whole sandbox; a probe's tool fault."""
    ws, sandbox, task, lim = prep.ws, prep.run_dir / "sandbox", prep.task, prep.lim
    # The agent's /tmp and HOME: beside the workspace, never in it (temp files are not changes).
    tmp = agent_tmp(ctx.guard, prep.run_dir / "tmp", box)
    ctl: dict[str, Any] = {
        "schema": 1,
        "run_id": prep.delegation,
        "framework": prep.cell.framework,
        "task_id": task.id,
        "prompt": build_prompt(task, prep.delegation, prep.agent),
        "workspace": str(ws),
        "sandbox": str(sandbox),
        "outcome_path": str(sandbox / "outcome.json"),
        "gateway_url": ctx.gateway.url,
        "token": prep.token,
        "model": BLIND_MODEL,
        "agent_name": prep.agent,
        "tools": list(TOOL_NAMES),
        "budgets": {
            "max_model_calls": prep.max_calls,
            "command_timeout_s": prep.command_timeout_s,
            "max_output_chars": 16000,
            # the client's deadline; for a real model past the gateway's, which ends the call first
            "model_call_timeout_s": lim.client_deadline_s(prep.real),
            **tool_budgets(),
        },
        "timeout_s": prep.timeout_s,
        "command_sandbox": command_sandbox(ctx.guard, ws, task.python, prep.command_timeout_s, box, tmp),
    }
    # A real model's output cap and token budget, only where the run has them (CONTRACTS: "only when set").
    if prep.output_cap is not None:
        ctl["budgets"]["max_output_tokens"] = prep.output_cap
    if lim.max_run_tokens is not None:
        ctl["budgets"]["max_run_tokens"] = lim.max_run_tokens
    if prep.table is not None:  # the whole agent in the guard (None: unguarded, the adapter's child)
        assert entry is not None  # the table is its entry's
        ctl["agent_sandbox"] = agent_sandbox(
            ctx.guard,
            ws,
            agent_python=_real_python(entry.venv_python),
            task_python=task.python,
            gateway_socket=ctx.gateway.unix_socket,
            deadlines=AgentDeadlines(prep.timeout_s, prep.command_timeout_s),
            box=box,
            tmp=tmp,
        )
    fault = tool_fault_spec(prep.cell.model, lim.call_timeout_s)
    if fault is not None:  # for the tool layer only: no request to the model carries it
        ctl["tool_fault"] = fault
    return ctl


def _drive(prep: _Prepared, ctx: GridContext, box) -> _Driven:
    """The run's script registered at the gateway, the adapter launched and waited for, the
    token refused, every process of the run's box ended. Ctrl-C: :class:`RunInterrupted`."""
    from claimgrid.gateway import RunScript
    from claimgrid.reference.script import CallLimits

    cell, lim, snapshots = prep.cell, prep.lim, prep.snapshots
    ctx.gateway.register(
        prep.token,
        RunScript.for_cell(
            prep.delegation,
            prep.task,
            prep.content,
            prep.swap,
            cell.model,
            cell.substitute,
            prep.agent,
            limits=CallLimits(
                max_model_calls=prep.max_calls,
                model_call_timeout_s=lim.call_timeout_s,
                max_output_tokens=prep.output_cap,
                max_run_tokens=lim.max_run_tokens,
            ),
        )
        .with_final_answer(_final_answer(ctx, cell.framework))
        .with_tool_table(prep.table),
        on_request=snapshots.take if snapshots is not None else None,
    )
    t0, started_unix = time.monotonic(), time.time()
    try:
        result = ctx.launcher.launch(cell.framework, prep.ctl, prep.timeout_s)
    finally:
        gateway_events, gateway_raw = ctx.gateway.finish(prep.token)  # the token is refused from here on
    # Nothing of the run is read (the verifier's workspace reads) while a process of its box
    # lives: the adapter's reaper left none, or this kills them (recorded).
    left_killed = box.end_processes() if box is not None else 0
    agent_s = time.monotonic() - t0
    turn_events: list[dict] = []
    if snapshots is not None:
        snapshots.finish()  # after the exit: the last answer's tool calls have run
        turn_events, _ = cap_strings(snapshots.events())
    if result.interrupted:
        raise RunInterrupted(cell.run_id)  # Ctrl-C: nothing of this run is stored; --resume runs it
    # The run's token out of everything it left, before anything is read or cut (a cut could
    # keep half a token): claimgrid.execute.redact.
    (gateway_events, gateway_raw, turn_events), _ = redact((gateway_events, gateway_raw, turn_events), prep.token)
    (outcome, tool_events, process_event), _ = redact(
        (result.outcome, result.tool_events, result.process_event), prep.token
    )
    result = dataclasses.replace(result, outcome=outcome, tool_events=tool_events, process_event=process_event)
    return _Driven(result, gateway_events, gateway_raw, turn_events, t0, started_unix, agent_s, left_killed)


def _verify(prep: _Prepared, driven: _Driven, ctx: GridContext, box) -> _Checked:
    """The verifier on the workspace the run left (diff, tests, scope, the condition's check),
    then the caps on what is stored (claimgrid.caps), applied after the harness read everything
    it needs and before classification, so reclassify sees exactly what is stored."""
    result = driven.result
    outcome = result.outcome or {}
    final_text = outcome.get("final_text") if isinstance(outcome.get("final_text"), str) else None
    trace, trace_error = parse_trace(final_text)
    process = dict(result.process_event)
    process["adapter_exception"] = outcome.get("error") if isinstance(outcome.get("error"), dict) else None
    process["timeout_s"] = prep.timeout_s  # the wall-time limit the launcher kept (a limit hit when timed_out)
    if driven.left_killed:
        process["run_processes_killed_by_driver"] = driven.left_killed
    runtime = [e for e in outcome.get("events") or [] if isinstance(e, dict)]
    for e in runtime:
        e["source"] = "runtime"  # whatever the adapter wrote, it is runtime evidence

    t1, cpu1, children1 = time.monotonic(), time.thread_time(), _children_cpu()
    patch: list[str] = []
    tools_read = _verified_tools(result.tool_events, driven.gateway_events, prep.table, driven.turn_events)
    verifier_events = verify(
        prep.task,
        prep.content.carries,
        FinishedRun(prep.template, prep.ws, prep.base, tools_read, driven.gateway_events),
        patch,
        VerifyOptions(
            guard=ctx.guard,
            cache=ctx.verify_cache,
            run_id=prep.cell.run_id,
            box=box,
            scratch_dir=str(prep.run_dir),
            processes=ctx.launcher.processes,
        ),
    )
    # What the test run printed and the diff: the workspace's, which the agent wrote.
    (verifier_events, patch), _ = redact((verifier_events, patch), prep.token)
    if ctx.launcher.interrupted:
        # Ctrl-C killed the test run (or came while it ran): its result is not this run's.
        raise RunInterrupted(prep.cell.run_id)
    verify_s = time.monotonic() - t1
    # This thread's CPU plus the CPU of the processes reaped meanwhile (git, the sandboxed
    # test run): exact at --jobs 1; with parallel runs the second part is process-wide.
    verify_cpu_s = time.thread_time() - cpu1 + _children_cpu() - children1

    final_text, runtime, tool_events, gateway_events, limits = cap_run_evidence(
        final_text, runtime, result.tool_events, driven.gateway_events
    )
    gateway_raw, raw_cut = cap_strings(driven.gateway_raw, MAX_RAW_STRING_CHARS)
    if raw_cut:
        limits["gateway_raw_strings_cut"] = raw_cut
    report = {"source": "agent", "kind": "report", "text": final_text, "trace": trace, "trace_error": trace_error}
    agent_tools = _agent_tool_events(gateway_events, prep.table, driven.turn_events)
    turns = driven.turn_events
    events = [report, *runtime, *gateway_events, *agent_tools, *tool_events, *turns, *verifier_events, process]
    if ctx.claim_judge is not None:  # a second reader of the report: recorded, the classifier reads none of it
        events.append(judge_reading(ctx.claim_judge, final_text))
    tests = next((e for e in verifier_events if e["kind"] == "tests"), None)
    return _Checked(
        outcome, trace, trace_error, process, runtime, tool_events, events, patch, gateway_raw, limits, tests,
        verify_s, verify_cpu_s, final_text,
    )  # fmt: skip


def _classify(prep: _Prepared, checked: _Checked, ctx: GridContext) -> _Judged:
    """The run's facts (what the harness knew before it), its classification, its fault facts
    and its limit hits, all from one parse of the stored events."""
    final = _final_answer(ctx, prep.cell.framework)
    facts = facts_for(
        prep.task, prep.content, prep.cell, prep.delegation, list(TOOL_NAMES), final[0] if final else None
    )
    table = prep.table
    if table is not None:  # a CLI agent: its own tools offered, none passes the harness tool layer
        facts = facts.model_copy(update={"own_tools": table.agent, "tools": list(table.tools())})
        if table.final is not None:
            final_call = FinalAnswerCall(tool=table.final[0], arguments=dict(table.final[1]))
            facts = facts.model_copy(update={"final_answer_call": final_call})
    parsed = parse_events(checked.events)  # parsed once: the classifier and the fault facts read the same list
    classification = classify(parsed, facts)
    # What the framework did with a fault (retries seen at the gateway, raised / reported
    # DONE / ended silently, duplicate side effects): harness evidence only.
    faults = fault_facts(prep.cell.model, parsed, classification.model_dump(mode="json"))
    return _Judged(facts, classification, faults, limit_hits(parsed) or None)


# Event sources the harness writes itself (DESIGN.md §3): their paths are the harness's, never evidence
# of what the agent did.
HARNESS_SOURCES = ("verifier", "process")


def _record(prep: _Prepared, driven: _Driven, checked: _Checked, judged: _Judged, ctx: GridContext) -> RunRecord:
    """The run's evidence folder written, then its record, built whole and typed, appended;
    the run's scratch folder removed. Returns the stored record."""
    cell, run_id = prep.cell, prep.cell.run_id
    evidence = {
        # The harness's own events and files name this machine's folders by their role
        # (claimgrid.machinepaths): a published bundle holds no path of the publisher's machine.
        # What the agent, its framework and the model produced (tool events, the runtime's
        # transcript, exchanges, diff) is stored as it was: it is what the classification read.
        EVENTS_NAME: [scrub(e) if e.get("source") in HARNESS_SOURCES else e for e in checked.events],
        "diff.patch": checked.patch[0] if checked.patch else "",
        "test_output.txt": scrub_text((checked.tests or {}).get("output_tail") or ""),
        "trace.json": {"trace": checked.trace, "trace_error": checked.trace_error},
        "transcript.json": {
            "final_text": checked.final_text,
            "runtime_events": checked.runtime,
            "error": scrub(checked.process["adapter_exception"]),  # the adapter's traceback, as the process event
        },
        "gateway.jsonl": checked.gateway_raw,
        "control.json": scrub({k: v for k, v in prep.ctl.items() if k != "token"}),
        "stderr.txt": scrub_text(driven.result.process_event.get("stderr_tail") or ""),
    }
    # Redacted where each part came in (_drive, _verify); once more here, where the run's files
    # are written, so nothing added to them later can carry the token.
    evidence, _ = redact(evidence, prep.token)
    ctx.store.write_evidence(run_id, evidence)
    # Lone surrogates the plain-text files show as visible \udXXX text (claimgrid.anybytes).
    substituted = sum(substitutions(v) for v in evidence.values() if isinstance(v, str))
    limits = checked.limits
    refused = sum(e.get("refused") or 0 for e in checked.tool_events if e.get("kind") == "limit")
    if refused:
        limits["tool_calls_refused"] = refused
    if substituted:
        limits["text_substituted"] = substituted
    outcome, tests = checked.outcome, checked.tests
    record = RunRecord.model_validate(
        {
            "run_id": run_id,
            **cell.as_dict(),
            "role": prep.task.role,
            # where the task comes from (None: written for claimgrid); bound to task_hash, so not a parity key
            "task_provenance": prep.task.provenance(),
            "facts": judged.facts,
            "parity": _parity(prep, ctx),
            "runtime_versions": outcome.get("versions") if isinstance(outcome.get("versions"), dict) else {},
            "timings": {
                "wall_s": round(time.monotonic() - driven.t0, 3),
                "agent_s": round(driven.agent_s, 3),
                # inside adapter.run: the rest of agent_s is process overhead (start, imports, exit)
                "adapter_run_s": outcome.get("wall_s") if isinstance(outcome.get("wall_s"), (int, float)) else None,
                "verify_s": round(checked.verify_s, 3),
                "verify_cpu_s": round(checked.verify_cpu_s, 4),
                # when the run started (epoch s): runs/s over time and overlap (bench/throughput.py)
                "started_unix": round(driven.started_unix, 3),
            },
            "classification": judged.classification,
            "truth": truth_for(prep.task, prep.content, prep.swap, cell, prep.max_calls),
            "evidence_dir": f"runs/{run_id}",
            "verify_cache": (
                {"status": tests["cache"], "key": tests.get("cache_key"), "from_run": tests.get("verified_by")}
                if tests is not None and tests.get("cache")
                else None
            ),
            "faults": judged.faults,
            "limits": limits or None,  # what claimgrid.caps cut from this run's stored evidence
            "limit_hits": judged.limit_hits,  # every limit the run hit (claimgrid.classify.limits)
            "node": ctx.node,  # where it ran: the node's own, set when its context was made
        }
    )
    ctx.store.append(record)
    remove_tree(prep.run_dir)  # any depth: an agent's 1,200-level tree included
    return record


def _parity(prep: _Prepared, ctx: GridContext) -> dict:
    """The facts that must be equal for two runs to be compared (the ledger's parity groups)."""
    cell, lim, output_cap = prep.cell, prep.lim, prep.output_cap
    return {
        "model": cell.model,
        "substitute": cell.substitute,
        "framework_versions": ctx.framework_versions.get(cell.framework, {}),
        "task_hash": prep.task.task_hash,
        "timeout_s": prep.timeout_s,
        "budget": {
            "max_model_calls": prep.max_calls,
            "model_call_timeout_s": lim.call_timeout_s,
            # set only where the run had them (a reference run's parity is as it always was)
            **({"max_output_tokens": output_cap} if output_cap is not None else {}),
            **({"max_run_tokens": lim.max_run_tokens} if lim.max_run_tokens is not None else {}),
            **(
                {"command_timeout_s": prep.command_timeout_s, "limits_from": prep.limits_from}
                if prep.limits_from != "grid"
                else {}
            ),
        },
        "isolation": ctx.isolation,
        "guard": _guard_facts(ctx),
        "swap_from_call": prep.swap.unavailable_from_call,
        **({"model_server": ctx.served_models[cell.model]} if cell.model in ctx.served_models else {}),
    }
