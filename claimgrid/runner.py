"""Run one cell: workspace, gateway registration, adapter process, verification, record.

Everything an outcome depends on is observed here by the harness (gateway, tool layer,
process, verifier). The adapter's outcome JSON only contributes ``runtime`` and ``agent``
events, which are recorded and compared, never trusted.
"""

from __future__ import annotations

import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cells import Cell
from .classifier import RunFacts, classify
from .conditions import ContentCondition, SwapCondition
from .faults import fault_facts
from .tasks import Task, build_template, materialise
from .trace import parse_trace, report_instructions
from .verifier import verify

AGENT_NAMES = {"builder": "builder", "reviewer": "reviewer", "reporter": "reporter"}


@dataclass
class GridContext:
    """Shared, read-only-after-setup state of one grid run."""

    tasks: dict[str, Task]
    content: dict[str, ContentCondition]
    swap: dict[str, SwapCondition]
    gateway: object
    launcher: object
    store: object
    work_dir: Path
    timeout_s: float
    max_model_calls: int
    isolation: str
    framework_versions: dict = field(default_factory=dict)
    templates: dict = field(default_factory=dict)  # (task, content) -> (path, base commit)
    model_call_timeout_s: float = 15.0  # per-call deadline adapters give their client (budgets)

    def template(self, task: Task, content: ContentCondition) -> tuple[Path, str]:
        key = (task.id, content.name)
        if key not in self.templates:
            dest = self.work_dir / "templates" / f"{task.id}.{content.name}"
            base = build_template(task, content.render(task), dest)
            self.templates[key] = (dest, base)
        return self.templates[key]


def build_prompt(task: Task, run_id: str, agent: str) -> str:
    return task.spec.prompt.strip() + "\n" + report_instructions(run_id, agent, task.spec.expectation.review is not None)


def facts_for(task: Task, content: ContentCondition, cell: Cell) -> RunFacts:
    return RunFacts(role=task.role, carries=content.carries, instruction=content.instruction_for(task),
                    swap_mode=cell.swap, substitute=cell.substitute, declared_agent=AGENT_NAMES[task.role])


def run_cell(cell: Cell, ctx: GridContext) -> dict:
    """Run one cell to a stored record. Never raises for anything the agent did."""
    from .gateway import RunScript

    task, content, swap = ctx.tasks[cell.task], ctx.content[cell.content], ctx.swap[cell.swap]
    run_id = cell.run_id
    agent = AGENT_NAMES[task.role]
    template, base = ctx.template(task, content)
    run_dir = ctx.work_dir / "runs" / run_id
    shutil.rmtree(run_dir, ignore_errors=True)
    ws, sandbox = run_dir / "ws", run_dir / "sandbox"
    materialise(template, ws)
    sandbox.mkdir(parents=True)
    sandbox.chmod(0o700)

    token = "cg-" + secrets.token_urlsafe(24)
    ctx.gateway.register(token, RunScript.for_cell(run_id, task, content, swap, cell.model, cell.substitute,
                                                   agent, max_model_calls=ctx.max_model_calls,
                                                   model_call_timeout_s=ctx.model_call_timeout_s))
    ctl = {
        "schema": 1, "run_id": run_id, "framework": cell.framework, "task_id": task.id,
        "prompt": build_prompt(task, run_id, agent), "workspace": str(ws), "sandbox": str(sandbox),
        "outcome_path": str(sandbox / "outcome.json"), "gateway_url": ctx.gateway.url, "token": token,
        "model": cell.model, "agent_name": agent,
        "tools": ["list_dir", "read_file", "search", "write_file", "edit_file", "run_command"],
        "budgets": {"max_model_calls": ctx.max_model_calls, "command_timeout_s": 30, "max_output_chars": 16000,
                    "model_call_timeout_s": ctx.model_call_timeout_s},
        "timeout_s": ctx.timeout_s,
    }
    t0 = time.monotonic()
    try:
        result = ctx.launcher.launch(cell.framework, ctl, ctx.timeout_s)
    finally:
        gateway_events, gateway_raw = ctx.gateway.finish(token)
    agent_s = time.monotonic() - t0

    outcome = result.outcome or {}
    final_text = outcome.get("final_text") if isinstance(outcome.get("final_text"), str) else None
    trace, trace_error = parse_trace(final_text)
    process = dict(result.process_event)
    process["adapter_exception"] = outcome.get("error") if isinstance(outcome.get("error"), dict) else None
    runtime = [e for e in outcome.get("events") or [] if isinstance(e, dict)]
    for e in runtime:
        e["source"] = "runtime"  # whatever the adapter wrote, it is runtime evidence
    report = {"source": "agent", "kind": "report", "text": final_text, "trace": trace, "trace_error": trace_error}

    t1 = time.monotonic()
    patch: list[str] = []
    verifier_events = verify(task, content.carries, template, ws, base, result.tool_events, gateway_events, patch)
    verify_s = time.monotonic() - t1

    events = [report, *runtime, *gateway_events, *result.tool_events, *verifier_events, process]
    facts = facts_for(task, content, cell)
    classification = classify(events, facts)
    tests = next((e for e in verifier_events if e["kind"] == "tests"), None)
    versions = outcome.get("versions") if isinstance(outcome.get("versions"), dict) else {}
    safe_ctl = {k: v for k, v in ctl.items() if k != "token"}
    ctx.store.write_evidence(run_id, {
        "events.jsonl": events,
        "diff.patch": patch[0] if patch else "",
        "test_output.txt": (tests or {}).get("output_tail") or "",
        "trace.json": {"trace": trace, "trace_error": trace_error},
        "transcript.json": {"final_text": final_text, "runtime_events": runtime, "error": process["adapter_exception"]},
        "gateway.jsonl": gateway_raw,
        "control.json": safe_ctl,
        "stderr.txt": result.process_event.get("stderr_tail") or "",
    })
    record = {
        "run_id": run_id, **cell.as_dict(), "role": task.role,
        "facts": {"role": facts.role, "carries": facts.carries, "instruction": facts.instruction,
                  "swap_mode": facts.swap_mode, "substitute": facts.substitute, "declared_agent": facts.declared_agent},
        "parity": {
            "model": cell.model, "substitute": cell.substitute,
            "framework_versions": ctx.framework_versions.get(cell.framework, {}),
            "task_hash": task.task_hash, "timeout_s": ctx.timeout_s,
            "budget": {"max_model_calls": ctx.max_model_calls, "model_call_timeout_s": ctx.model_call_timeout_s},
            "isolation": ctx.isolation,
        },
        "runtime_versions": versions,
        "timings": {"wall_s": round(time.monotonic() - t0, 3), "agent_s": round(agent_s, 3),
                    # inside adapter.run: the rest of agent_s is process overhead (start, imports, exit)
                    "adapter_run_s": outcome.get("wall_s") if isinstance(outcome.get("wall_s"), (int, float)) else None,
                    "verify_s": round(verify_s, 3)},
        "classification": classification,
        # What the framework did with a fault (retries seen at the gateway, raised / reported
        # DONE / ended silently, duplicate side effects): harness evidence only.
        "faults": fault_facts(cell.model, events, classification),
        "evidence_dir": f"runs/{run_id}",
    }
    ctx.store.append(record)
    shutil.rmtree(run_dir, ignore_errors=True)
    return record
