"""Registered runs: token -> script, call counter and the run's gateway log."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from claimgrid.gateway.budget import Spend
from claimgrid.reference.progress import RunProgress
from claimgrid.reference.script import RunScript


@dataclass
class RunState:
    """One run's state. ``next_call`` hands out call indexes (every request, retries too)."""

    script: RunScript
    started: float = field(default_factory=time.monotonic)
    calls: int = 0
    inflight: int = 0  # requests being answered now (caps.GATEWAY_MAX_REQUESTS_PER_RUN)
    events: list = field(default_factory=list)
    raw: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    spend: Spend | None = None  # the grid's running totals (every recorded exchange adds)
    cassette: list | None = None  # replay only: the run's recorded exchanges, by call index
    # What the reference policy answered, by conversation position: its step comes from here,
    # never from the shape of the framework's history (claimgrid.reference.progress).
    progress: RunProgress = field(default_factory=RunProgress)
    # Called with each request's call index when it arrives, before it is answered (the
    # harness's turn snapshots of an agent with its own tools, claimgrid.verify.snapshots).
    on_request: Callable[[int], None] | None = None
    tokens: int = 0  # prompt + completion tokens of the run's answered calls (provider usage)
    # Calls to a real provider not yet answered: call index -> t (seconds since registration).
    # Those still open when the run ends are recorded by ``Gateway.finish`` (kind in_flight).
    open_calls: dict = field(default_factory=dict)

    def next_call(self) -> int:
        with self.lock:
            index = self.calls
            self.calls += 1
            return index

    def record(self, event: dict, raw: dict) -> None:
        usage = event.get("usage") or {}
        with self.lock:
            self.events.append(event)
            self.raw.append(raw)
            self.tokens += (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
        if self.spend is not None:
            self.spend.add(event)

    def elapsed(self) -> float:
        return round(time.monotonic() - self.started, 4)


class Registry:
    """Thread-safe token registry shared by the driver thread and the server's event loop."""

    def __init__(self) -> None:
        self._runs: dict[str, RunState] = {}
        self._lock = threading.Lock()
        self.spend = Spend()

    def add(
        self,
        token: str,
        script: RunScript,
        cassette: list | None = None,
        on_request: Callable[[int], None] | None = None,
    ) -> None:
        if not token:
            raise ValueError("a run token must be a non-empty string")
        with self._lock:
            if token in self._runs:
                raise ValueError(f"token for run {self._runs[token].script.run_id!r} is already registered")
            self._runs[token] = RunState(script, spend=self.spend, cassette=cassette, on_request=on_request)

    def get(self, token: str | None) -> RunState | None:
        if not token:
            return None
        with self._lock:
            return self._runs.get(token)

    def pop(self, token: str) -> RunState:
        with self._lock:
            if token not in self._runs:
                raise KeyError("this token is not registered with the gateway")
            return self._runs.pop(token)
