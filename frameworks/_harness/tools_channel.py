"""The tools channel: ``source: tools`` events as JSON lines on an inherited pipe.

Stdlib only; runs inside each framework's venv.
"""

from __future__ import annotations

import json
import os
import threading
import time


class ToolChannel:
    """Writes ``source: tools`` events as JSON lines to an inherited pipe descriptor.

    The descriptor is made non-inheritable at once, so no ``run_command`` child ever
    holds it. Writes are serialised (frameworks may run tools on several threads) and
    looped until complete, because one line may exceed the pipe's atomic size. ``emit``
    never raises for what an event holds.
    """

    def __init__(self, fd: int | None, start: float | None = None):
        self.fd = fd
        if fd is not None:
            os.set_inheritable(fd, False)
        self.start = time.monotonic() if start is None else start
        self._lock = threading.Lock()
        self._seq = 0
        self.refused = 0  # tool calls refused over the run's cap (ToolContext), sent on close
        self.events: list[dict] = []  # kept too, for tests and for the outcome's tail

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def emit(self, event: dict) -> dict:
        with self._lock:
            event = {"source": "tools", "kind": "tool_call", "seq": self._seq, **event}
            self._seq += 1
            self.events.append(event)
            if self.fd is not None:
                # ASCII JSON: any string (a lone surrogate in an argument, a file name that is
                # not UTF-8, decoded with surrogateescape) is written as escapes the driver
                # reads back unchanged, so no content can keep an event off the channel.
                data = (json.dumps(event, ensure_ascii=True, default=repr) + "\n").encode()
                try:
                    while data:
                        n = os.write(self.fd, data)
                        data = data[n:]
                except OSError:
                    # The driver stopped listening (killed run); the event stays local.
                    self.fd = None
            return event

    def close(self) -> None:
        if self.refused:
            # The first refused call has its own event; the count of all of them is this one.
            self.emit({"kind": "limit", "t": self.now(), "cap": "max_tool_calls", "refused": self.refused})
        with self._lock:
            if self.fd is not None:
                try:
                    os.close(self.fd)
                except OSError:
                    pass
                self.fd = None
