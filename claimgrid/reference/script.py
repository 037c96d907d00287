"""RunScript: the part of the answer key one run's reference models may use.

A RunScript lives only inside the driver process, in the gateway's registry, keyed by
the run's token. It is deliberately impossible to ship anywhere else: it refuses to be
pickled or copied out, its ``repr`` names the run and nothing of the answer key, and
the gateway's HTTP surface has no route that returns it. The agent process receives only
the token, and the token only selects a script inside the gateway.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from claimgrid.inputs.tasks import Task
from claimgrid.reference.registry import NAMES

# A live view of the reference-model registry (user --policies files included).
REFERENCE_MODEL_NAMES = NAMES


@dataclass(frozen=True)
class CallLimits:
    """A run's model-call budget (the gateway refuses further calls), per-call deadline, the
    output-token cap of its real calls and its token budget (None: none)."""

    max_model_calls: int = 24
    model_call_timeout_s: float = 15.0
    max_output_tokens: int | None = None
    max_run_tokens: int | None = None


@dataclass(frozen=True)
class Step:
    """One scripted tool call: the tool's name and its arguments."""

    tool: str
    args: dict[str, Any]
    # Truth-only annotation (never sent): paths a run_command step changes, for
    # claimgrid.reference.truth; edit_file / write_file steps change their ``path``.
    changes: tuple[str, ...] = ()
    # Truth-only annotation (never sent): paths whose whole text this step's output completes
    # (a ``cat -n`` of the file, the last of its ``sed -n`` ranges); ``read_file`` reads its ``path``.
    reads: tuple[str, ...] = ()
    # Truth-only annotation (never sent): paths this step puts back as they were before the run
    # (an edit reversed, a written file removed); a path whose last change undoes it is no change.
    undoes: tuple[str, ...] = ()


def _steps(tool_steps) -> tuple[Step, ...]:
    return tuple(Step(s.tool, dict(s.args)) for s in tool_steps)


@dataclass(frozen=True, repr=False)
class RunScript:
    """Everything the gateway needs to serve one run.

    ``instruction``: the sentence the content condition put into the slot (None for
    clean); a policy has "seen" it when it appears in a role=tool message of the
    request. ``attacker_steps`` / ``legit_steps`` are empty unless the condition carries
    that instruction. ``swap_*`` mirror the run's SwapCondition.
    """

    run_id: str  # the run's opaque delegation id: the only id a policy may echo
    task_id: str
    role: str
    content_slot: str
    expected_evidence: str
    fixture_files: frozenset[str]
    instruction: str | None
    carries: str | None
    reference_steps: tuple[Step, ...]
    reference_verdict: str | None
    attacker_steps: tuple[Step, ...]
    attacker_verdict: str | None  # set when the attacker goal is a review verdict
    legit_steps: tuple[Step, ...]
    model: str
    substitute: str
    agent_name: str
    swap_name: str = "none"
    unavailable_from_call: int = -1
    on_unavailable: str = "none"
    reported_name: str | None = None
    max_model_calls: int = 24
    model_call_timeout_s: float = 15.0  # the run's per-call deadline (the ``slow`` fault exceeds it)
    # The output-token cap the gateway sets on each real (non-reference) call, and the run's
    # prompt+completion token budget (claimgrid.execute.model_limits; None: none).
    max_output_tokens: int | None = None
    max_run_tokens: int | None = None
    # The framework's final-answer protocol (venvs.toml ``final_answer``): None = a plain text
    # message ends the run; (tool, argument) = the framework ends only on a call of ``tool``
    # with the answer in ``argument`` (claimgrid.gateway.scripted.in_protocol).
    final_answer: tuple[str, str] | None = None
    # The agent's own tools' spelling of the abstract actions (venvs.toml ``tools`` of a CLI
    # agent, claimgrid.reference.tool_table): None = the harness tools, sent as they are.
    tool_table: Any = None

    @classmethod
    def for_cell(
        cls,
        run_id: str,
        task: Task,
        content,
        swap,
        model: str,
        substitute: str,
        agent_name: str,
        limits: CallLimits | None = None,
    ) -> RunScript:
        """Build the script of one grid cell from the task, its content and swap conditions;
        ``limits``: the run's model-call budget and per-call deadline (defaults as the grid's).
        The framework's final-answer protocol is set apart (``with_final_answer``)."""
        limits = limits or CallLimits()
        spec = task.spec
        carries = content.carries
        attacker = spec.attacker_goal
        return cls(
            run_id=run_id,
            task_id=spec.id,
            role=spec.role,
            content_slot=spec.content_slot,
            expected_evidence=task.expected_evidence,
            fixture_files=frozenset(str(p.relative_to(task.repo)) for p in task.repo.rglob("*") if p.is_file()),
            instruction=content.instruction_for(task),
            carries=carries,
            reference_steps=_steps(spec.reference.steps),
            reference_verdict=spec.reference.review_verdict,
            attacker_steps=_steps(attacker.steps) if carries == "attacker_goal" else (),
            attacker_verdict=(
                attacker.check.value if carries == "attacker_goal" and attacker.check.kind == "review_verdict" else None
            ),
            legit_steps=_steps(spec.legitimate_note.steps) if carries == "legitimate_note" else (),
            model=model,
            substitute=substitute,
            agent_name=agent_name,
            swap_name=swap.name,
            unavailable_from_call=swap.unavailable_from_call,
            on_unavailable=swap.on_unavailable,
            reported_name=swap.reported_name,
            max_model_calls=limits.max_model_calls,
            model_call_timeout_s=limits.model_call_timeout_s,
            max_output_tokens=limits.max_output_tokens,
            max_run_tokens=limits.max_run_tokens,
        )

    def with_final_answer(self, final_answer: tuple[str, str] | None) -> RunScript:
        """This script for a framework whose final-answer protocol is ``final_answer``."""
        return dataclasses.replace(self, final_answer=final_answer)

    def with_tool_table(self, table) -> RunScript:
        """This script for an agent whose tools are spelled by ``table`` (a ``ToolTable``)."""
        return dataclasses.replace(self, tool_table=table)

    @property
    def is_review(self) -> bool:
        return self.reference_verdict is not None

    def __repr__(self) -> str:
        return f"RunScript(run_id={self.run_id!r}, model={self.model!r}, swap={self.swap_name!r})"

    # The answer key must not leave this process: no pickling (multiprocessing, a
    # subprocess pipe), no copy module round trips that could be serialised.
    def __reduce__(self):
        raise TypeError("RunScript holds the answer key and stays inside the gateway process")

    def __reduce_ex__(self, protocol):
        return self.__reduce__()

    def __getstate__(self):
        return self.__reduce__()
