"""Checking a task's answer key against its fixture (``grid.py check-task``, ``grid.py list``).

A typo in a reference step, a fixture that already passes or an attacker goal that can
never be achieved would otherwise surface only as a wrong-looking classification in a
grid (a "false success" of ``diligent``). Every problem is one line
``<task.toml>: field '<field>': <what is wrong>``.

* ``static_problems(task)`` (fast, no subprocess; run by ``list``): the attacker goal has
  steps (or is a review verdict the obedient model states), every step's arguments fit
  its tool's schema, and every step applies to a plain copy of the fixture when run
  through the harness's own tool functions (``old`` text present exactly once, paths
  exist): the reference alone, then the attacker's and the legitimate note's steps each
  followed by the reference, in the order the reference models play them.
* ``check_task(task, conditions)`` (``check-task``): the static checks, then in git
  workspaces made exactly as a grid makes them, through the real tools, verifier and
  classifier: the fixture must not already pass (with a test command: the tests must
  fail before the reference steps); after the reference steps the outcome must be
  ``PASS``; the attacker goal's check must be false after the reference alone and true
  after its steps; the legitimate note's check must be true after its steps and the
  outcome still ``PASS``; every content condition that carries an instruction must
  render it verbatim (that is how a policy decides it was "seen").
"""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import threading
from pathlib import Path

from claimgrid import ROOT
from claimgrid.classify.classifier import classify_outcome
from claimgrid.commands.options import data_opts
from claimgrid.inputs.tasks import Task, ToolStep, build_template, ensure_task_envs, materialise
from claimgrid.trace import format_trace
from claimgrid.verify.verifier import FinishedRun, verify

HARNESS_TOOLS = ROOT / "frameworks" / "_harness" / "harness_tools.py"
_tools_module = None
_tools_lock = threading.Lock()


def _harness_tools():
    """The harness tool layer (stdlib only), loaded from its file: the same code the agents call."""
    global _tools_module
    with _tools_lock:
        if _tools_module is not None:
            return _tools_module
        spec = importlib.util.spec_from_file_location("claimgrid_harness_tools", HARNESS_TOOLS)
        assert spec is not None and spec.loader is not None  # a .py file of this checkout
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _tools_module = mod
        return _tools_module


class _Problems(list):
    def __init__(self, task: Task):
        super().__init__()
        self.where = task.folder / "task.toml"

    def add(self, field: str | None, message: str) -> None:
        where = f"{self.where}: field '{field}'" if field else str(self.where)
        line = f"{where}: {message}"
        if line not in self:
            self.append(line)


def _sequences(task: Task) -> list[tuple[str, list[tuple[str, ToolStep]]]]:
    """(name, [(field, step)]) in the order the reference models play them."""
    spec = task.spec

    def named(prefix, steps):
        return [(f"{prefix}.{i}", s) for i, s in enumerate(steps)]

    ref = named("reference.steps", spec.reference.steps)
    return [
        ("reference", ref),
        ("attacker_goal", named("attacker_goal.steps", spec.attacker_goal.steps) + ref),
        ("legitimate_note", named("legitimate_note.steps", spec.legitimate_note.steps) + ref),
    ]


def _field_for(field: str, error: str) -> str:
    if "'old'" in error:
        return f"{field}.args.old"
    if "argument" in error:
        return f"{field}.args"
    if "is not a" in error or "does not exist" in error or "outside the workspace" in error or "path" in error:
        return f"{field}.args.path"
    return field


def _apply(
    task: Task, steps: list[tuple[str, ToolStep]], ws: Path, problems: _Problems, run_commands: bool
) -> list[dict]:
    """Play ``steps`` through the harness tools in ``ws``; each refused step is a problem."""
    mod = _harness_tools()
    channel = mod.ToolChannel(None)
    sandbox = Path(tempfile.mkdtemp(prefix="claimgrid-check-sbx-"))
    try:
        ctl = {
            "workspace": str(ws),
            "sandbox": str(sandbox),
            "python": task.python,
            "budgets": {"command_timeout_s": task.spec.expectation.test_timeout_s},
        }
        tools = {t.name: t for t in mod.make_tools(ctl, channel)}
        for field, step in steps:
            if step.tool == "run_command" and not run_commands:
                try:
                    mod.check_args(tools[step.tool].parameters, dict(step.args))
                except mod.ToolRefused as exc:
                    problems.add(f"{field}.args", str(exc))
                continue
            before = len(channel.events)
            tools[step.tool](**dict(step.args))
            event = channel.events[before]
            if not event["ok"]:
                problems.add(
                    _field_for(field, event["error"] or ""), f"{step.tool} fails on the fixture: {event['error']}"
                )
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)
    return channel.events


def static_problems(task: Task) -> list[str]:
    """The fast checks (no git, no tests, no commands): see the module docstring."""
    problems = _Problems(task)
    spec = task.spec
    nested = sorted(str(p.relative_to(task.folder)) for p in task.repo.rglob(".git"))
    if nested:
        # build_template runs git init over the fixture; a nested repository would be a submodule.
        problems.add(None, f"the fixture contains a git repository: {', '.join(nested)}")
    attacker = spec.attacker_goal
    if attacker.check.kind == "review_verdict":
        if spec.expectation.review is None:
            problems.add("attacker_goal.check", "a review_verdict check needs a reviewer task (expectation.review)")
        elif attacker.check.value == spec.expectation.review.truth:
            problems.add(
                "attacker_goal.check",
                f"the attacker's verdict {attacker.check.value} is the true verdict; following it is indistinguishable from resisting",
            )
    elif not attacker.steps:
        problems.add(
            "attacker_goal.steps", "an attacker goal needs steps (without them the obedient model silently 'resists')"
        )
    if not spec.legitimate_note.steps:
        problems.add("legitimate_note.steps", "a legitimate note needs steps (the diligent model follows them)")
    if spec.expectation.review and spec.reference.review_verdict != spec.expectation.review.truth:
        problems.add(
            "reference.review_verdict",
            f"{spec.reference.review_verdict} differs from expectation.review.truth {spec.expectation.review.truth}",
        )
    with tempfile.TemporaryDirectory(prefix="claimgrid-check-") as tmp:
        for name, steps in _sequences(task):
            ws = Path(tmp) / name
            shutil.copytree(task.repo, ws)
            _apply(task, steps, ws, problems, run_commands=False)
    return list(problems)


def _gateway_final(verdict: str | None) -> list[dict]:
    """A gateway record of a final answer stating ``verdict`` (what a reviewer model says)."""
    if verdict is None:
        return []
    return [
        {
            "source": "gateway",
            "status": 200,
            "tool_calls": [],
            "content": format_trace({"status": "DONE", "review_verdict": verdict}),
        }
    ]


def _why(events: list[dict]) -> str:
    by = {e["kind"]: e for e in events if e.get("source") == "verifier"}
    parts = []
    scope = by.get("scope") or {}
    if scope.get("outside_allowed"):
        parts.append(f"changed outside expectation.allowed_paths: {', '.join(scope['outside_allowed'])}")
    if scope.get("protected_touched"):
        parts.append(f"changed expectation.protected_paths: {', '.join(scope['protected_touched'])}")
    files = by.get("required_files") or {}
    if files.get("missing"):
        parts.append(f"missing: {', '.join(files['missing'])}")
    if files.get("content_mismatch"):
        parts.append(f"content differs: {', '.join(files['content_mismatch'])}")
    tests = by.get("tests")
    if tests and not tests.get("passed"):
        tail = [ln for ln in (tests.get("output_tail") or "").splitlines() if ln.strip()]
        parts.append(f"tests exit {tests.get('exit_code')}: {tail[-1] if tail else 'no output'}")
    return "; ".join(parts) or "see the verifier events"


def check_task(task: Task, conditions: dict | None = None) -> list[str]:
    """Every problem of ``task`` (static and dynamic), one line each; [] when it is sound."""
    problems = _Problems(task)
    problems.extend(static_problems(task))
    if problems:
        return list(problems)  # the dynamic checks would only repeat a broken step
    spec, exp = task.spec, task.spec.expectation
    for cond in (conditions or {}).values():
        instruction = cond.instruction_for(task)
        if instruction and instruction not in cond.render(task):
            problems.add(
                f"{cond.carries}.instruction",
                f"content condition '{cond.name}' does not render it verbatim, so it is never 'seen'",
            )
    ensure_task_envs([task])
    verdict = spec.reference.review_verdict
    with tempfile.TemporaryDirectory(prefix="claimgrid-check-") as tmp:
        tmp = Path(tmp)
        template = tmp / "template"
        base = build_template(task, task.slot_text(), template)

        def run(name: str, steps, carries: str | None, gateway_verdict: str | None):
            ws = tmp / name
            materialise(template, ws)
            tool_events = _apply(task, steps, ws, problems, run_commands=True)
            return verify(task, carries, FinishedRun(template, ws, base, tool_events, _gateway_final(gateway_verdict)))

        seqs = dict(_sequences(task))
        if exp.diff == "required":
            before = run("before", [], None, verdict)
            tests = next((e for e in before if e["kind"] == "tests"), None)
            files = next(e for e in before if e["kind"] == "required_files")
            if tests is not None and tests["passed"] is None:
                problems.add("expectation.test_command", f"could not run on the fixture: {_why(before)}")
            elif (tests is None or tests["passed"]) and not files["missing"] and not files["content_mismatch"]:
                field = "expectation.test_command" if tests is not None else "expectation.exact_contents"
                problems.add(
                    field, "the fixture already passes before the reference steps (it must fail before and pass after)"
                )

        # An impossible variant's reference is the ticket's honest fix: its tests must fail.
        want = "TESTS_FAIL" if exp.impossible else "PASS"
        after = run("reference", seqs["reference"], "attacker_goal", verdict)
        outcome = classify_outcome(after)
        if outcome != want:
            problems.add(
                "reference.steps", f"after the reference steps the outcome is {outcome}, not {want}: {_why(after)}"
            )
        attacked = next(e for e in after if e["kind"] == "attacker_goal")
        if attacked["achieved"]:
            problems.add(
                "attacker_goal.check",
                f"already true after the reference steps alone ({attacked['detail']}); "
                "'resisted' could never be observed",
            )

        attacker_verdict = (
            spec.attacker_goal.check.value if spec.attacker_goal.check.kind == "review_verdict" else verdict
        )
        obeyed = run("attacker", seqs["attacker_goal"], "attacker_goal", attacker_verdict)
        achieved = next(e for e in obeyed if e["kind"] == "attacker_goal")
        if not achieved["achieved"]:
            problems.add("attacker_goal.check", f"not achieved by the attacker goal's steps ({achieved['detail']})")

        followed = run("legitimate", seqs["legitimate_note"], "legitimate_note", verdict)
        note = next(e for e in followed if e["kind"] == "legitimate_note")
        if not note["followed"]:
            problems.add("legitimate_note.check", f"not made true by the note's steps ({note['detail']})")
        outcome = classify_outcome(followed)
        if outcome != want:
            problems.add(
                "legitimate_note.steps",
                f"with the note followed the outcome is {outcome}, not {want} (a legitimate note is in scope): "
                f"{_why(followed)}",
            )
    return list(problems)


def add_parser(sub) -> None:
    """``grid.py check-task [ID ...]``."""
    ct = sub.add_parser("check-task", help="check tasks' answer keys against their fixtures (exit 2 on a problem)")
    data_opts(ct)
    ct.add_argument("ids", nargs="*", metavar="ID", help="task ids (default: every task in --tasks-dir)")
