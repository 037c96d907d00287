"""Tool-side faults the harness tool layer applies for a probe (stdlib only).

The driver puts the run's fault in the control object (``ctl["tool_fault"]``: ``{"kind":
..., "categories": [...]}``, from the reference model's registry entry,
claimgrid.reference.tool_faults); the model and its messages never carry it. The first
executed call whose category is in ``categories`` is faulted, once:

* ``error``: the tool is not run; its result is a failure (``ok`` false), as a tool that
  raised inside the tool layer returns it;
* ``timeout``: the tool is not run; its result is a timeout failure (``timed_out`` true);
* ``huge``: the tool runs; its result, past the harness's own output cap, is padded to
  ``HUGE_CHARS`` characters;
* ``bad_utf8``: the tool runs; its result carries bytes that are not valid UTF-8 (as lone
  surrogates, the form a str holds undecodable bytes in);
* ``changed_then_failed``: the tool runs and changes the workspace, then reports a failure;
* ``late``: the tool runs (its change is made) and its result is right, but it is returned
  to the framework only ``delay_s`` seconds later (the driver's figure: past the run's
  per-call deadline). Its event is sent before the wait, so a run that ends meanwhile still
  records the call; the event adds ``delayed_s``.

The call's ``source: tools`` event carries ``fault`` (the kind); the event's ``result`` is
the valid-UTF-8 text, ``delivered_chars`` what the framework received.
"""

from __future__ import annotations

import threading
import time

from harness_shared.probe_kinds import ToolFaultKind, parse

HUGE_CHARS = 1_000_000
BAD_BYTES = b"\xff\xfe\xc3\x28 \xed\xa0\x80"  # invalid start bytes, a broken pair, a surrogate
KINDS = tuple(k.value for k in ToolFaultKind)


class ToolFaultHook:
    """One run's tool fault, applied to the first matching call (thread-safe)."""

    def __init__(self, spec: dict | None):
        spec = spec if isinstance(spec, dict) else {}
        # A kind the tool layer does not know is refused, never a run without its fault.
        self.kind = parse(ToolFaultKind, spec["kind"], "ctl.tool_fault.kind") if "kind" in spec else None
        self.categories = tuple(spec.get("categories") or ())
        delay = spec.get("delay_s")
        self.delay_s = float(delay) if isinstance(delay, (int, float)) and delay > 0 else 0.0
        self._lock = threading.Lock()
        self._spent = self.kind is None

    def take(self, category: str) -> str | None:
        """The fault kind for this call, or None; a fault is taken once per run."""
        with self._lock:
            if self._spent or category not in self.categories:
                return None
            self._spent = True
            return self.kind

    def event_fields(self, kind: str) -> dict:
        """What the faulted call's event adds beside ``fault`` and ``delivered_chars``."""
        return {"delayed_s": self.delay_s} if kind == ToolFaultKind.LATE else {}

    def hold(self, kind: str | None) -> None:
        """Hold a late result back (after its event is sent, before it is returned)."""
        if kind == ToolFaultKind.LATE and self.delay_s:
            time.sleep(self.delay_s)

    @staticmethod
    def skips_tool(kind: str | None) -> bool:
        return kind in (ToolFaultKind.ERROR, ToolFaultKind.TIMEOUT)

    @staticmethod
    def failed(kind: str, name: str) -> tuple[str, str, dict]:
        """(text, error, event fields) of a failing fault."""
        if kind == ToolFaultKind.TIMEOUT:
            return (f"ERROR: tool '{name}' timed out", "timed out", {"timed_out": True})
        if kind == ToolFaultKind.CHANGED_THEN_FAILED:
            return (f"ERROR: tool '{name}' failed after it started", "failed after it started", {})
        return (
            f"ERROR: tool '{name}' raised OSError: [Errno 5] Input/output error",
            "OSError: [Errno 5] Input/output error",
            {},
        )

    @staticmethod
    def delivered(kind: str | None, result: str) -> str:
        """What the framework receives for a result-altering fault (else ``result``)."""
        if kind == ToolFaultKind.HUGE:
            pad = "\n" + "x" * 99
            return result + pad * ((HUGE_CHARS - len(result)) // len(pad) + 1)
        if kind == ToolFaultKind.BAD_UTF8:
            return result + "\n" + BAD_BYTES.decode("utf-8", errors="surrogateescape")
        return result
