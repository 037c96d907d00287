"""The tools pipe, driver side.

``PipeReader`` drains the pipe's read end on its own thread from the moment the run
starts, so an agent that calls many tools never blocks on a full pipe buffer;
``WriteEnd`` is the write end the adapter inherits, closed exactly once.
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


class WriteEnd:
    """The tools pipe's write end, closed exactly once (fd numbers are reused across threads)."""

    def __init__(self, fd: int):
        self.fd: int | None = fd

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            os.close(fd)
