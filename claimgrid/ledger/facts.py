"""What the ledger needs to know about the grid's tasks and conditions, read from the folder.

The ledger is a function of its folder: a published ledger renders the same on any
checkout, whatever that checkout's ``tasks/`` and ``conditions/`` hold. So the grid
stores, at grid time, every task and condition fact the renderer needs:

* :func:`grid_facts` ``(tasks, content) -> dict``: the ``meta.json`` keys ``grid.py run``
  writes (docs/CONTRACTS.md, "meta.json: what the ledger renders from"):
  ``task_facts`` = ``{task id: {"role", "attacker_goal_check", "legitimate_note_check",
  "expected_evidence", "evidence_command"}}`` (each check the task's check as JSON, or null;
  the last two the task's declared evidence, which ``reclassify`` applies to a record without it) and ``content_facts`` =
  ``{content condition: {"carries"}}``. The swap conditions are ``meta.json``
  ``swap_conditions``; the reference truth of each run is its record's ``truth``.
* :func:`render_inputs` ``(meta, records) -> RenderInputs``: those facts for the renderer.

A ledger written before a fact was stored still renders: the missing fact is read from
this checkout's ``tasks/`` or ``conditions/`` (or the reference registry for a run's
truth), and :attr:`RenderInputs.notes` says so once, naming what was read, for LEDGER.md.
A fact that is neither stored nor loadable is absent ("not recorded"), never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from claimgrid.errors import ClaimgridError
from claimgrid.store.record import RunRecord

TRUTH_EVERY_RUN = "every run (the registry's truth follows the model that served each call)"
TRUTH_DOCUMENTED = (
    "runs where the assigned model served every call (swap `none`, or a swap not reached or "
    "a no-op): only the documented claim verdict is known"
)
UNTREATED = ("control (no swap)", "not reached", "no-op (substitute = assigned)")

Checks = tuple[dict | None, dict | None]


def _check(goal) -> dict | None:
    return goal.check.model_dump(mode="json") if goal is not None else None


def grid_facts(tasks: dict, content: dict) -> dict:
    """The ``meta.json`` keys the renderer reads, for the grid's ``tasks`` (id -> Task) and
    ``content`` (name -> ContentCondition)."""
    return {
        "task_facts": {
            tid: {
                "role": t.role,
                "attacker_goal_check": _check(t.spec.attacker_goal),
                "legitimate_note_check": _check(t.spec.legitimate_note),
                # What reclassify needs of the task (a record that lacks its declaration).
                "expected_evidence": t.spec.expectation.evidence,
                "evidence_command": t.spec.expectation.evidence_command,
            }
            for tid, t in tasks.items()
        },
        "content_facts": {name: {"carries": c.carries} for name, c in content.items()},
    }


@dataclass
class RenderInputs:
    """The task and condition facts one ledger renders from, and where they came from."""

    roles: dict[str, str] = field(default_factory=dict)  # task id -> role (records without ``role``)
    carries: dict[str, str | None] = field(default_factory=dict)  # content -> what it carries
    checks: dict[str, Checks] = field(default_factory=dict)  # task id -> (goal check, note check)
    swap_specs: dict = field(default_factory=dict)  # swap condition -> its configured treatment
    swap_specs_recorded: bool = False
    truth: Callable[[dict], dict] = lambda row: {}  # a run's row -> {field: true value}
    truth_scope: str = TRUTH_DOCUMENTED
    notes: list[str] = field(default_factory=list)


def _checkout_tasks() -> dict:
    try:
        from claimgrid.inputs.tasks import load_tasks

        return load_tasks()
    except (ClaimgridError, OSError):
        return {}


def _checkout_content() -> dict:
    try:
        from claimgrid.inputs.conditions import load_content_conditions

        return load_content_conditions()
    except (ClaimgridError, OSError):
        return {}


def _checkout_swaps() -> dict:
    try:
        from claimgrid.inputs.conditions import load_swap_conditions

        return load_swap_conditions()
    except (ClaimgridError, OSError):
        return {}


def _registry_truth(meta: dict):
    """The registry's truth computed from this checkout's tasks and conditions (records
    older than the stored ``truth``); None when they cannot be loaded."""
    from functools import cache

    # The grid's own reference models (--policies) are those the command loaded from files its
    # user named: nothing a ledger's meta.json names is ever imported by rendering it.
    try:
        from claimgrid.reference.registry import TruthCell, truth_of
    except ImportError:
        return None
    tasks, content, swaps = _checkout_tasks(), _checkout_content(), _checkout_swaps()
    if not (tasks and content and swaps):
        return None
    stored = meta.get("max_model_calls")
    budget = stored if isinstance(stored, int) else 24

    @cache
    def cell(task, cont, swap, model, substitute) -> tuple:
        if task not in tasks or cont not in content or swap not in swaps:
            return ()
        try:
            t = truth_of(TruthCell(tasks[task], content[cont], swaps[swap], model, substitute, budget))
        except Exception:  # noqa: BLE001 - a truth function that fails gives no truth, never a guess
            return ()
        return tuple(sorted((t or {}).items()))

    return lambda row: dict(cell(row["task"], row["content"], row["swap_condition"], row["model"], row["substitute"]))


def _documented_truth(row: dict) -> dict:
    from claimgrid.reference.truth import expected_claim_verdict

    if row.get("treatment") not in UNTREATED:
        return {}
    try:
        v = expected_claim_verdict(row["model"], row["role"])
    except (ClaimgridError, OSError):  # it reads this checkout's tasks: none, no truth
        return {}
    return {} if v is None else {"claim_verdict": v}


def render_inputs(meta: dict, records: dict[str, RunRecord]) -> RenderInputs:
    """The facts for rendering ``records`` (run id -> typed record) of a ledger whose
    ``meta.json`` is ``meta``: from the folder, else from this checkout (said in ``notes``)."""
    out = RenderInputs()
    from_checkout: list[str] = []  # facts the folder lacks, read from this checkout
    left_out: list[str] = []  # facts the folder lacks and this checkout cannot give

    def fill(what: str, got) -> None:
        (from_checkout if got else left_out).append(what)

    task_facts = meta.get("task_facts")
    if isinstance(task_facts, dict):
        out.roles = {t: str(f["role"]) for t, f in task_facts.items() if isinstance(f, dict) and f.get("role")}
        out.checks = {
            t: (f.get("attacker_goal_check"), f.get("legitimate_note_check"))
            for t, f in task_facts.items()
            if isinstance(f, dict)
        }
    elif records:
        tasks = _checkout_tasks()
        out.checks = {tid: (_check(t.spec.attacker_goal), _check(t.spec.legitimate_note)) for tid, t in tasks.items()}
        out.roles = {tid: t.role for tid, t in tasks.items()}
        fill("the tasks' attacker-goal and owner's-note checks, for the paired metrics", tasks)
        if any(not r.role for r in records.values()):
            fill("the roles of runs recorded without one", tasks)

    content_facts = meta.get("content_facts")
    if isinstance(content_facts, dict):
        out.carries = {c: f.get("carries") for c, f in content_facts.items() if isinstance(f, dict)}
    elif any(r.facts is None or "carries" not in r.facts.model_fields_set for r in records.values()):
        out.carries = {name: c.carries for name, c in _checkout_content().items()}
        fill("what each content condition carries, for runs recorded without it", out.carries)

    specs = meta.get("swap_conditions")
    if specs:
        out.swap_specs, out.swap_specs_recorded = dict(specs), True
    elif records:
        out.swap_specs = {
            n: {"unavailable_from_call": c.unavailable_from_call, "on_unavailable": c.on_unavailable,
                "reported_name": c.reported_name}
            for n, c in _checkout_swaps().items()
        }  # fmt: skip
        if not out.swap_specs:  # when read, the design table's row says so itself
            left_out.append("the swap conditions' configured call index")

    # The truth each run's record stored at grid time; records older than it: the registry
    # on this checkout's tasks and conditions, else only the documented claim verdict.
    older = {rid for rid, r in records.items() if "truth" not in r.model_fields_set}
    fallback = _registry_truth(meta) if older else None
    if older:
        fill(f"the reference truth of {len(older)} run(s) recorded without it", fallback is not None)

    def truth(row: dict) -> dict:
        rid = row["run_id"]
        if rid not in older:
            return dict(sorted((records[rid].truth or {}).items()))  # the calibration rows' order
        return (fallback or _documented_truth)(row)

    out.truth = truth
    out.truth_scope = TRUTH_EVERY_RUN if not older or fallback is not None else TRUTH_DOCUMENTED
    if from_checkout:
        out.notes.append(
            "Read from this checkout's tasks/ and conditions/, which may differ from the grid's: "
            + "; ".join(from_checkout)
            + ". This ledger was written before grids stored them in meta.json and the run records."
        )
    if left_out:
        out.notes.append(
            "Not recorded in this ledger (written before grids stored them) and not in this checkout, so left "
            "out: " + "; ".join(left_out) + "."
        )
    return out
