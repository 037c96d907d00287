"""Output-shape probes: reference models that answer in shapes real models produce.

Each is ``diligent`` with one answer in another shape: an answer of its own inserted before
diligent's first (``insert``), or one of diligent's answers changed (``alter``). The step
bookkeeping is the run's progress (claimgrid.reference.progress): after an inserted answer,
diligent sees its own steps only. What a framework does with the shape (executes every
call, the first only, refuses the arguments, takes a cut text as the answer, ends on a
refusal) is the finding (claimgrid.classify.reactions); the truth states only what holds
whatever it does (``fault_truth``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable

# The built-in behaviours register first, so the default models keep their order before the probes.
from claimgrid.reference import progress, readers, speakers  # noqa: F401
from claimgrid.reference.policies import ToolCall, Turn, diligent, register_probe
from claimgrid.reference.registry import Probe, get


def shape_of(model: str) -> str | None:
    """The output-shape kind of ``model``'s registry entry (None: not a shape probe)."""
    entry = get(model)
    return entry.shape if entry is not None else None


def _base(script, messages) -> Turn:
    return diligent(script, messages)


def inserting(first: Callable) -> Callable:
    """A policy: ``first(script)`` as its first answer, then diligent as if it had not been.
    A text-only first answer is given once (the view counts answers without a tool call)."""

    def policy(script, messages):
        view = progress.current()
        if view is None:  # outside the gateway: no inserted answer is told apart
            return _base(script, messages)
        turn = first(script)
        n = len(turn.tool_calls)
        if (n and view.steps == 0) or (not n and view.steps == 0 and view.texts == 0):
            return turn
        shifted = progress.View(view.call_index, view.steps - (1 if n else 0), view.calls[n:], view.texts, exact=True)
        with progress.active(shifted):
            return _base(script, messages)

    return policy


def altering(at: Callable[[Turn, progress.View | None], bool], change: Callable[[Turn, object], Turn]) -> Callable:
    """A policy: diligent, with its answer changed by ``change(turn, script)`` where
    ``at(turn, view)`` holds (the view: the run's progress, None outside the gateway)."""

    def policy(script, messages):
        turn = _base(script, messages)
        return change(turn, script) if at(turn, progress.current()) else turn

    return policy


def first_answer(turn: Turn, view) -> bool:
    return turn.tool_calls != () and (view is None or view.steps == 0)


def second_answer(turn: Turn, view) -> bool:
    return turn.tool_calls != () and view is not None and view.steps == 1


def first_final(turn: Turn, view) -> bool:
    """Diligent's first final answer: a framework that asks again gets a plain one."""
    return not turn.tool_calls and (view is None or view.texts == 0)


def first_final_before_more(turn: Turn, view) -> bool:
    # Once the extra call ran, the last recorded call is it: the final answer is then plain.
    return first_final(turn, view) and (view is None or not view.calls or view.calls[-1] != AFTER_FINAL)


def register_shape(name: str, kind: str, policy: Callable, description: str):
    module = sys._getframe(1).f_globals.get("__name__", __name__)
    return register_probe(name, Probe(shape=kind), policy, description, True, module)


def _call(name: str, args, i: int = 0, tag: str = "shape") -> ToolCall:
    return ToolCall(f"call_{tag}_{i}", name, args if isinstance(args, str) else json.dumps(args))


def _parallel(turn: Turn, script) -> Turn:
    return dataclasses.replace(turn, tool_calls=(_call("list_dir", {"path": "."}, 9), *turn.tool_calls))


def _with_text(turn: Turn, script) -> Turn:
    return dataclasses.replace(turn, content=f"I will start by reading {script.content_slot}.")


def _reused_id(turn: Turn, script) -> Turn:
    # The id diligent's first answer carried (policies._call: call_<model>_<index>).
    calls = tuple(dataclasses.replace(c, id=c.id.rsplit("_", 1)[0] + "_0") for c in turn.tool_calls)
    return dataclasses.replace(turn, tool_calls=calls)


def _reasoning(turn: Turn, script) -> Turn:
    return dataclasses.replace(
        turn, extra=(("reasoning_content", "The work is done; now I write the final report with its trace."),)
    )


def _length_cut(turn: Turn, script) -> Turn:
    text = turn.content or ""
    return dataclasses.replace(turn, content=text[: len(text) // 2], finish="length")


def _then_call(turn: Turn, script) -> Turn:
    return dataclasses.replace(turn, tool_calls=(_call(AFTER_FINAL[0], AFTER_FINAL[1], 0, "after_final"),))


AFTER_FINAL = ("list_dir", {"path": "."})
REFUSAL = "I'm sorry, but I can't help with that request."

register_shape(
    "parallel-calls",
    "parallel",
    altering(first_answer, _parallel),
    "shape: diligent; its first answer holds two tool calls (list_dir, then its read)",
)
register_shape(
    "text-and-calls",
    "text_with_calls",
    altering(first_answer, _with_text),
    "shape: diligent; its first answer holds text beside its tool call",
)
register_shape(
    "wrong-typed-args",
    "wrong_type",
    inserting(lambda s: Turn(tool_calls=(_call("read_file", {"path": 42}),))),
    "shape: first calls read_file with a number for its string path, then works as diligent",
)
register_shape(
    "extra-args",
    "extra_args",
    inserting(lambda s: Turn(tool_calls=(_call("read_file", {"path": s.content_slot, "encoding": "utf-8"}),))),
    "shape: first calls read_file with an argument its schema does not have, then works as diligent",
)
register_shape(
    "missing-args",
    "missing_args",
    inserting(lambda s: Turn(tool_calls=(_call("read_file", {}),))),
    "shape: first calls read_file without its required path, then works as diligent",
)
register_shape(
    "reused-call-id",
    "reused_id",
    altering(second_answer, _reused_id),
    "shape: diligent; its second tool call reuses the first one's call id",
)
register_shape(
    "reasoning-content",
    "reasoning",
    altering(first_final, _reasoning),
    "shape: diligent; its final answer carries reasoning_content beside the text",
)
register_shape(
    "refusal",
    "refusal",
    inserting(lambda s: Turn(content=None, extra=(("refusal", REFUSAL),), final=False)),
    "shape: first answers with a refusal (no content, a refusal field), then works as diligent if asked again",
)
register_shape(
    "length-cut-final",
    "length_cut",
    altering(first_final, _length_cut),
    "shape: diligent; its final answer is cut in half with finish_reason length",
)
register_shape(
    "final-then-call",
    "final_then_call",
    altering(first_final_before_more, _then_call),
    "shape: diligent; its final answer also holds a further tool call",
)
register_shape(
    "says-will-call",
    "announces",
    inserting(lambda s: Turn(content=f"I'll start by reading {s.content_slot} with read_file.", final=False)),
    "shape: first answers only that it will call a tool (no call), then works as diligent if asked again",
)
