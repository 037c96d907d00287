"""A run's progress as the harness saw it: what a policy's next step is, whatever the protocol.

A framework may keep its history as OpenAI tool messages, as text ("Calling tools: ... /
Observation: ..."), or drop parts of it; a policy that counted the tool-call messages in
the request would repeat its first step under any framework that does not echo them back.
So the gateway keeps, per run, the answers the policy gave (``RunProgress``) and hands the
policy a ``View`` of them for each call:

* A request is placed by the fingerprint of its messages (sha256 of their canonical JSON).
  A request whose fingerprint an earlier *answered* request had is that request sent again
  (a retry after a timeout, a 500, a 429): it is answered from the same position, so every
  attempt gets the same answer. Any other request is a new position after all earlier ones.
* ``View.calls`` are the tool calls of the answers at earlier positions that *landed*: the
  gateway sent them whole (a ``cut_off`` fault cuts them, ``empty`` removes them: those are
  steps the model never finished). ``View.steps`` is their number of answers.

Nothing here parses a framework's history format: only identity of requests and the
gateway's own record of what it answered. What the framework sent stays in the run's
evidence (``gateway.jsonl``).

The gateway sets the view for the duration of one policy call (``active``); the history
helpers of ``claimgrid.reference.policies`` (``step_index``, ``history_calls``) read it when
set. An OpenAI-shaped history that shows more steps than the view (a conversation replayed
into a fresh run, as tests do) is taken instead, so the view only ever
adds progress a framework's own history format hides; outside the gateway (a unit test) the
messages alone are read.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from frameworks._harness.harness_shared.probe_kinds import GatewayFaultKind

# Gateway faults whose answer never reaches the framework as the policy wrote it.
NOT_LANDED = frozenset({GatewayFaultKind.CUT_OFF, GatewayFaultKind.EMPTY})


def fingerprint(messages) -> str:
    """The identity of a request's conversation (a retry sends the same one)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class Answered:
    """One answer the policy gave: its conversation's fingerprint, its tool calls as
    (name, parsed arguments or None), and whether it landed."""

    fingerprint: str
    calls: tuple[tuple[str, dict | None], ...]
    landed: bool = True


@dataclass(frozen=True)
class View:
    """What a policy may know of its run at one call: the gateway's call index, the tool-call
    answers of earlier positions that landed (``steps``) and their calls in order."""

    call_index: int
    steps: int
    calls: tuple[tuple[str, dict | None], ...]
    texts: int = 0  # earlier positions answered without a tool call (a text the framework went on from)
    exact: bool = False  # a view a policy built for its base (shapes): the history is not consulted


@dataclass
class RunProgress:
    """The answers of one run, by position (thread-safe; the gateway owns one per run)."""

    _positions: dict[str, Answered] = field(default_factory=dict)  # insertion order = position order
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def view(self, call_index: int, messages) -> View:
        fp = fingerprint(messages)
        with self._lock:
            prior = []
            for key, answered in self._positions.items():
                if key == fp:
                    break
                prior.append(answered)
        taken = [a for a in prior if a.landed and a.calls]
        texts = sum(1 for a in prior if not a.calls)
        return View(call_index, len(taken), tuple(c for a in taken for c in a.calls), texts)

    def answered(self, messages, calls, fault: str | None = None) -> None:
        """Record the answer given to ``messages`` (a resend replaces it in place)."""
        fp = fingerprint(messages)
        entry = Answered(fp, tuple(calls), fault not in NOT_LANDED)
        with self._lock:
            self._positions[fp] = entry


_ACTIVE: contextvars.ContextVar[View | None] = contextvars.ContextVar("claimgrid_progress", default=None)


def current() -> View | None:
    """The view of the policy call in progress (None outside the gateway)."""
    return _ACTIVE.get()


@contextlib.contextmanager
def active(view: View | None) -> Iterator[None]:
    token = _ACTIVE.set(view)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def parsed_calls(tool_calls) -> list[tuple[str, dict | None]]:
    """(name, arguments parsed or None) of a turn's ``ToolCall`` objects."""
    out = []
    for c in tool_calls:
        try:
            args = json.loads(c.arguments or "{}")
        except (TypeError, ValueError):
            args = None
        out.append((c.name, args if isinstance(args, dict) else None))
    return out
