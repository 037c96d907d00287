"""The adapter's outcome file, read by the driver.

``read_outcome`` classifies the outcome file as ``ok | missing | unparseable |
invalid`` (docs/adapter-authors.md) and never raises; ``tail`` reads a log's end.
"""

from __future__ import annotations

import json
import os

from claimgrid.sandbox.readback import Refusal, read_back_path


def _valid(outcome, ctl: dict) -> str | None:
    """Why an outcome breaks the contract, or None."""
    if not isinstance(outcome, dict):
        return "outcome is not a JSON object"
    if outcome.get("schema") != 1:
        return "schema is not 1"
    if outcome.get("run_id") != ctl.get("run_id"):
        return "run_id does not match the control"
    if not (outcome.get("final_text") is None or isinstance(outcome.get("final_text"), str)):
        return "final_text is neither string nor null"
    events = outcome.get("events")
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        return "events is not a list of objects"
    if any(e.get("source") != "runtime" for e in events):
        return "events contains a non-runtime event"
    err = outcome.get("error")
    if err is not None and not (isinstance(err, dict) and isinstance(err.get("type"), str)):
        return "error is neither null nor an object with a type"
    if not isinstance(outcome.get("versions"), dict):
        return "versions is not an object"
    if not isinstance(outcome.get("wall_s"), (int, float)):
        return "wall_s is not a number"
    return None


def read_outcome(path: str, ctl: dict) -> tuple[dict | None, str, str | None]:
    """``(outcome or None, status, problem)``; only a valid outcome is returned."""
    # The adapter's folder is the driver's, but an unguarded coding agent runs as the driver's
    # user: the file is read without following a link, as a regular file, bounded.
    raw = read_back_path(path, "outcome")
    if raw is None:
        return None, "missing", None
    if isinstance(raw, Refusal):
        return None, "missing", str(raw)
    try:
        outcome = json.loads(raw)
    except ValueError as exc:
        return None, "unparseable", f"not JSON: {exc}"
    problem = _valid(outcome, ctl)
    if problem:
        return None, "invalid", problem
    return outcome, "ok", None


def tail(path: str, chars: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - chars * 4))
            return fh.read().decode("utf-8", errors="replace")[-chars:]
    except OSError:
        return ""
