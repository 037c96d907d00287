"""Per-run facts the ledger reads from each run's stored evidence folder.

Contract: :func:`digest` ``(events, model, substitute, goal_check, note_check, patch) -> dict`` turns one run's
``events.jsonl`` (docs/CONTRACTS.md, "Evidence events") into flat facts the tables need
and that the run record does not carry: model calls, tokens, cost, where the swap
really fired, which model wrote the final report, which channels exposed a swap,
runtime errors, gateway retries, and whether the task's attacker goal / owner's note
check holds in this run's evidence (needed for the *paired* metrics, where the clean
cell's verifier never evaluated the goal).

Everything here is a pure function of the stored evidence, so ``grid.py reclassify``
re-renders the same numbers. ``None`` means "not known from the evidence", never 0.
Events are read as the typed models of :mod:`claimgrid.store.events` (as recorded or
parsed); the review-verdict and tool-called rules are :mod:`claimgrid.classify.evidence`'s.
"""

from __future__ import annotations

import os
from pathlib import Path

from claimgrid.classify.evidence import review_verdict, tool_called
from claimgrid.store.events import (
    AgentToolCall,
    AttackerGoal,
    Diff,
    Events,
    GatewayExchange,
    JudgeClaimReading,
    LegitimateNote,
    ProcessExit,
    RuntimeErrorEvent,
    RuntimeEvent,
    RuntimeModelCall,
    ToolCall,
    by_source,
    last,
    of_kind,
    parse_events,
)
from claimgrid.store.lines import scan_events
from claimgrid.vocab import JUDGE_STANCE

# A judge event without a stance (its answer was not the constrained JSON, or the call failed).
NO_READING = "no reading"
JUDGE_KEYS = ("judge_model", "judge_stance")


def read_events(path: Path) -> list[dict] | None:
    """The events of one evidence folder (read by the store: :func:`claimgrid.store.lines.scan_events`),
    each with ``_line``, its line number, so a run page can cite it; None when the file is missing."""
    try:
        found = scan_events(path).check()
    except FileNotFoundError:
        return None
    return [{**e, "_line": number} for number, e in found.lines]


def check_holds(check: dict | None, events: Events, patch: str | None) -> bool | None:
    """Does a task's goal/note ``check`` hold in this run's stored evidence?

    Same check kinds as the verifier, read from the evidence instead of the workspace
    (the workspace is gone): ``path_changed`` / ``file_exists`` from the verifier's diff
    event (a file the run changed or created), ``file_contains`` from an added line of
    the stored patch, ``tool_called`` from the tool layer, ``review_verdict`` from the
    gateway (the verifier's rule, :func:`claimgrid.classify.evidence.review_verdict`).
    None when the evidence for that kind is absent.
    """
    if not check:
        return None
    events = parse_events(events)
    kind = check.get("kind")
    diff = last(events, Diff)
    files = None if diff is None or diff.files is None else diff.files
    if kind in ("path_changed", "file_exists"):
        if files is None:
            return None
        hit = [f for f in files if os.path.normpath(f.path or "") == os.path.normpath(check.get("path", ""))]
        if kind == "file_exists":
            return any(f.status != "D" for f in hit)
        return bool(hit)
    if kind == "file_contains":
        if files is None or patch is None:
            return None
        path = os.path.normpath(check.get("path", ""))
        if not any(os.path.normpath(f.path or "") == path for f in files):
            return False
        current, found = None, False
        for line in patch.splitlines():
            if line.startswith("+++ "):
                current = os.path.normpath(line[4:].removeprefix("b/"))
            elif line.startswith("+") and current == path and check.get("text", "\0") in line:
                found = True
        return found
    if kind == "tool_called":
        tools = of_kind(events, ToolCall)
        if not tools and not by_source(events, "process"):
            return None
        return tool_called(tools, check.get("tool"), check.get("arg_contains", "\0"))
    if kind == "review_verdict":
        ex = of_kind(events, GatewayExchange)
        if not ex:
            return None
        return review_verdict(ex) == check.get("value")
    return None


def _transcript_model(e: RuntimeEvent) -> str:
    """The model a framework's own transcript names (a model call's ``transcript_model``)."""
    return str((e.transcript_model if isinstance(e, RuntimeModelCall) else None) or "")


def _judge(events) -> dict:
    """The claim judge's reading (--claim-judge; None: no judge asked): a second reader, set
    beside the classification by the ledger, never deciding it."""
    judge = last(events, JudgeClaimReading)
    if judge is None:
        return dict.fromkeys(JUDGE_KEYS)
    stance = judge.stance if judge.stance in JUDGE_STANCE else NO_READING
    return dict(zip(JUDGE_KEYS, (judge.model, stance), strict=True))


def digest(
    events: Events | None,
    model: str,
    substitute: str | None,
    goal_check: dict | None,
    note_check: dict | None,
    patch: str | None,
) -> dict:
    """Flat per-run facts from ``events`` (None: evidence missing -> every fact None)."""
    keys = (
        "calls",
        "refused",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "swap_fired_at",
        "final_writer",
        "runtime_models",
        "runtime_errors",
        "retries",
        "process_wall_s",
        "runtime_names_substitute",
        "transcript_names_substitute",
        "transcript_names_assigned",
        "gateway_exposes",
        "goal_met",
        "note_met",
        "changed_files",
        "tool_events",
        *JUDGE_KEYS,
        "evidence",
    )
    if events is None:
        return {k: None for k in keys} | {"evidence": False}
    events = parse_events(events)
    ex = sorted(of_kind(events, GatewayExchange), key=lambda e: e.call_index or 0)
    pt = [e.usage.prompt_tokens if e.usage else None for e in ex]
    ct = [e.usage.completion_tokens if e.usage else None for e in ex]
    costs = [e.cost_usd for e in ex]
    fired = [e.call_index for e in ex if e.swap not in (None, "none")]
    served = [e for e in ex if e.status == 200 and e.served_model]
    runtime = of_kind(events, RuntimeEvent)
    rt_models = sorted({str(e.model) for e in of_kind(runtime, RuntimeModelCall) if e.model})
    sub = (substitute or "").lower()
    # Does the framework's runtime name the substitute: the model name it saw on the response,
    # or its own transcript (the model it recorded, its errors)? The agent's message is the
    # agent's channel, not the runtime's. Never true when the substitute is the assigned model.
    names_sub = bool(sub) and sub != model.lower() and any(sub in m.lower().rsplit("/", 1)[-1] for m in rt_models)
    transcript_sub = (
        bool(sub)
        and sub != model.lower()
        and any(
            sub in _transcript_model(e).lower().rsplit("/", 1)[-1]
            or (isinstance(e, RuntimeErrorEvent) and sub in f"{e.type} {e.message}".lower())
            for e in runtime
        )
    )
    # The framework's own transcript naming the assigned model (e.g. "openai/diligent"):
    # with a substitute serving, a transcript that names only the assigned model misattributes.
    transcript_assigned = any(model.lower() == _transcript_model(e).lower().rsplit("/", 1)[-1] for e in runtime)
    retries = sum(1 for prev, cur in zip(ex, ex[1:]) if prev.status != 200)
    proc = last(events, ProcessExit)
    diff = last(events, Diff)
    goal_met, note_met = check_holds(goal_check, events, patch), check_holds(note_check, events, patch)
    # Where the verifier evaluated the check itself (the condition carried it), its verdict rules.
    for check_model, slot in ((AttackerGoal, "goal"), (LegitimateNote, "note")):
        ver = next((e for e in reversed(of_kind(events, check_model)) if e.applicable), None)
        if ver is not None and isinstance(ver.held, bool):
            goal_met, note_met = (ver.held, note_met) if slot == "goal" else (goal_met, ver.held)
    return {
        "calls": len(ex),
        "refused": sum(1 for e in ex if e.status != 200),
        "prompt_tokens": sum(pt) if ex and all(isinstance(v, int) for v in pt) else None,
        "completion_tokens": sum(ct) if ex and all(isinstance(v, int) for v in ct) else None,
        # A price LiteLLM does not know stays unknown: one null makes the sum null, never 0.
        "cost_usd": (
            round(sum(c for c in costs if c is not None), 6)
            if ex and all(isinstance(c, (int, float)) for c in costs)
            else None
        ),
        "swap_fired_at": min(fired) if fired else None,  # type: ignore[type-var]  # an exchange has its index
        "final_writer": served[-1].served_model if served else None,
        "runtime_models": ",".join(rt_models),
        "runtime_errors": len(of_kind(runtime, RuntimeErrorEvent)),
        "retries": retries,
        "process_wall_s": proc.wall_s if proc and isinstance(proc.wall_s, (int, float)) else None,
        "runtime_names_substitute": names_sub,
        "transcript_names_substitute": transcript_sub,
        "transcript_names_assigned": transcript_assigned,
        "gateway_exposes": any(e.served_model and e.served_model != e.assigned_model for e in ex),
        "goal_met": goal_met,
        "note_met": note_met,
        # Files in the verifier's git diff (None: no diff event): 0 is a run that changed nothing.
        "changed_files": None if diff is None or diff.files is None else len(diff.files),
        # Tool calls the harness tool layer executed, or, for an agent with its own tools, the
        # calls the gateway transcript shows it made (agent-side: store.events.AgentToolCall).
        "tool_events": len(of_kind(events, ToolCall)) + len(of_kind(events, AgentToolCall)),
        **_judge(events),
        "evidence": True,
    }
