"""Driver-side reading of what an adapter process left behind: tools pipe and outcome.

* ``PipeReader`` drains the tools pipe on its own thread from the moment the run
  starts, so an agent that calls many tools never blocks on a full pipe buffer.
* ``read_outcome`` classifies the outcome file as ``ok | missing | unparseable |
  invalid`` (docs/CONTRACTS.md) and never raises.
"""

from __future__ import annotations

import json
import os
import select
import threading


class PipeReader:
    """Collects JSON-line ``source: tools`` events from a pipe's read end."""

    def __init__(self, fd: int):
        self.fd = fd
        self.events: list[dict] = []
        self.garbage = 0  # lines that were not tool events (only the adapter process can write here)
        self._buf = b""
        self._stop = threading.Event()
        self._eof = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tools-pipe", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self.fd], [], [], 0.2)
                if not ready:
                    continue
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    break
                self._feed(chunk)
        except OSError:
            pass
        finally:
            if self._buf.strip():
                self._line(self._buf)
            self._eof.set()

    def _feed(self, chunk: bytes) -> None:
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if line.strip():
                self._line(line)

    def _line(self, line: bytes) -> None:
        try:
            ev = json.loads(line)
        except ValueError:
            self.garbage += 1
            return
        if isinstance(ev, dict) and ev.get("source") == "tools":
            self.events.append(ev)
        else:
            self.garbage += 1

    def finish(self, grace_s: float = 2.0) -> list[dict]:
        """Wait for EOF (every write end closed) up to ``grace_s``, then stop reading."""
        self._eof.wait(grace_s)
        self._stop.set()
        self._thread.join(1.0)
        try:
            os.close(self.fd)
        except OSError:
            pass
        return self.events


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
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        return None, "missing", None
    except OSError as exc:
        return None, "missing", f"{type(exc).__name__}: {exc}"
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
