"""Inbound connections to the gateway: per-run caps, a pre-authentication pool, deadlines.

All runs share one gateway (one event loop, one process's file descriptors), so what one
run's processes do with connections must not reach another run's calls. The rules, each
limit in :mod:`claimgrid.caps`:

* **Counted per run, once authenticated.** A connection belongs to a run from the first
  request whose headers carry a registered run token (``x-api-key`` or ``Authorization:
  Bearer``, where every dialect's clients send it). A run holds at most
  ``caps.GATEWAY_MAX_CONNECTIONS_PER_RUN``; one more closes the run's own longest-idle
  connection, and when none of its connections is idle the new request is refused (503,
  ``connections_over_cap``, recorded in that run's log; the connection is closed after it).
* **Before that, a small pool of its own.** A connection that has not yet presented a
  registered token is *pre-auth*: at most ``caps.GATEWAY_PREAUTH_CONNECTIONS`` of them, each
  closed ``caps.GATEWAY_AUTH_TIMEOUT_S`` after it opened. A new connection over the pool
  closes the oldest pre-auth one: a real client sends its request headers within
  milliseconds, so a flood of silent connections evicts itself, never a working client.
* **A real per-connection deadline.** A connection that has not delivered a whole request
  ``caps.GATEWAY_READ_TIMEOUT_S`` after it opened or after its last response (idle, sending
  a byte every few seconds, stopped mid-headers or mid-body), or whose reader stopped taking
  a response for ``caps.GATEWAY_WRITE_STALL_S``, is aborted (``transport.abort``: ``close``
  would wait for ever to flush to a reader that never reads). A sweep once a
  ``caps.GATEWAY_SWEEP_S`` checks every connection, so each closes at its deadline plus at
  most that.
* **All together** at most ``caps.GATEWAY_MAX_CONNECTIONS``, and never more than the
  process's open-file limit leaves room for (:func:`fd_room`): a connection over it is
  accepted and aborted at once, rather than left in the kernel's accept queue where no
  deadline reaches it (the cause of connections outliving their timeout when the
  gateway's process ran out of descriptors).
"""

from __future__ import annotations

import fcntl
import resource
import struct
import termios
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from claimgrid import caps

OVER_CAP_HEADER = b"x-claimgrid-over-connection-cap"  # set by the gateway only (stripped from clients)


def _cap(name: str):
    return field(default_factory=lambda: getattr(caps, name))  # read when made: a test may patch caps


@dataclass(frozen=True)
class Timeouts:
    """The deadlines and caps a gateway applies (claimgrid.caps by default; a test may shorten them)."""

    auth_s: float = _cap("GATEWAY_AUTH_TIMEOUT_S")
    read_s: float = _cap("GATEWAY_READ_TIMEOUT_S")
    write_stall_s: float = _cap("GATEWAY_WRITE_STALL_S")
    sweep_s: float = _cap("GATEWAY_SWEEP_S")
    per_run: int = _cap("GATEWAY_MAX_CONNECTIONS_PER_RUN")
    preauth: int = _cap("GATEWAY_PREAUTH_CONNECTIONS")


def fd_room(reserve: int = caps.GATEWAY_FD_RESERVE) -> int:
    """Connections this process can hold: its open-file limit (the soft one raised to the hard
    one first) less ``reserve`` for the driver's own files."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(16, soft - reserve)


class Inbound:
    """The gateway's connection book, on its event loop only (no locks: one thread)."""

    def __init__(self, registered, timeouts: Timeouts | None = None, total: int | None = None):
        """``registered(token) -> bool``: whether a token is a run's (the gateway's registry)."""
        self.registered = registered
        self._timeouts = timeouts
        self.total = min(caps.GATEWAY_MAX_CONNECTIONS, total if total is not None else fd_room())
        self.open: set = set()
        self.preauth: OrderedDict = OrderedDict()  # protocol -> None, oldest first
        self.by_run: dict[str, OrderedDict] = {}  # token -> protocols, least recently active first
        self.aborted = {"over_total": 0, "preauth_evicted": 0, "auth_timeout": 0, "read_timeout": 0,
                        "write_stall": 0, "run_idle_evicted": 0}  # fmt: skip
        self.refused: dict[str, int] = {}  # token -> requests refused over its run's cap
        self._sweeping = False

    @property
    def t(self) -> Timeouts:
        """The given timeouts, else the caps as they are now (read each time: a test patches caps)."""
        return self._timeouts or Timeouts()

    # ---- the protocol's calls
    def opened(self, proto, loop) -> bool:
        """A new connection; False when it was aborted at once (over the total)."""
        while len(self.open) >= self.total and self.preauth:
            self._evict_preauth()  # room for a client that may authenticate, taken from the silent
        if len(self.open) >= self.total:
            self.aborted["over_total"] += 1
            proto.transport.abort()
            return False
        self.open.add(proto)
        proto.cg_opened = proto.cg_cycle = time.monotonic()
        proto.cg_token = None
        proto.cg_paused_since = None
        proto.cg_over = False
        while len(self.preauth) >= self.t.preauth:
            self._evict_preauth()
        self.preauth[proto] = None
        if not self._sweeping:
            self._sweeping = True
            loop.call_later(self.t.sweep_s, self._sweep, loop)
        return True

    def closed(self, proto) -> None:
        self.open.discard(proto)
        self.preauth.pop(proto, None)
        token = getattr(proto, "cg_token", None)
        if token is not None:
            conns = self.by_run.get(token)
            if conns is not None:
                conns.pop(proto, None)
                if not conns:
                    del self.by_run[token]

    def request(self, proto, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """A request's headers arrived on ``proto``: authenticate it (once) and count it
        against its run; returns the headers the app sees (the over-cap marker when refused)."""
        headers = [(k, v) for k, v in headers if k.lower() != OVER_CAP_HEADER]
        proto.cg_paused_since = None
        if proto.cg_token is None:
            token = _token(headers)
            if token is not None and self.registered(token):
                self._admit(proto, token)
        if proto.cg_token is not None:
            conns = self.by_run.get(proto.cg_token)
            if conns is not None and proto in conns:
                conns.move_to_end(proto)  # the most recently active
        if proto.cg_over:
            self.refused[proto.cg_token] = self.refused.get(proto.cg_token, 0) + 1
            headers.append((OVER_CAP_HEADER, b"1"))
        return headers

    def response_done(self, proto) -> None:
        proto.cg_cycle = time.monotonic()
        proto.cg_paused_since = None
        if proto.cg_over and not proto.transport.is_closing():
            proto.transport.close()  # refused over its run's cap: answered, then closed

    def write_paused(self, proto, paused: bool) -> None:
        proto.cg_paused_since = time.monotonic() if paused else None

    # ---- internals
    def _evict_preauth(self) -> None:
        """Close one pre-auth connection: the oldest with nothing waiting to be read (a client
        whose request headers are already in the kernel's buffer is about to authenticate:
        an accept storm between its accept and its first read must not evict it), else the
        oldest."""
        victim = next((p for p in self.preauth if _waiting(p) == 0), None)
        if victim is None:
            victim = next(iter(self.preauth))
        self.preauth.pop(victim)
        self.open.discard(victim)
        self.aborted["preauth_evicted"] += 1
        victim.transport.abort()

    def _admit(self, proto, token: str) -> None:
        self.preauth.pop(proto, None)
        conns = self.by_run.setdefault(token, OrderedDict())
        if len(conns) >= self.t.per_run:
            idle = next((p for p in conns if _idle(p)), None)
            if idle is None:
                proto.cg_token, proto.cg_over = token, True  # answered 503, then closed
                return
            conns.pop(idle)
            idle.cg_token = None
            self.aborted["run_idle_evicted"] += 1
            idle.transport.abort()
        conns[proto] = None
        proto.cg_token = token

    def _sweep(self, loop) -> None:
        now, t = time.monotonic(), self.t
        for proto in list(self.open):
            why = self._expired(proto, now, t)
            if why is not None:
                self.aborted[why] += 1
                proto.transport.abort()
        if self.open:
            loop.call_later(t.sweep_s, self._sweep, loop)
        else:
            self._sweeping = False

    def _expired(self, proto, now: float, t: Timeouts) -> str | None:
        if proto.transport.is_closing() and getattr(proto, "cg_paused_since", None) is None:
            return None  # closing with nothing left to write: gone in a moment
        if proto.cg_token is None and now - proto.cg_opened >= t.auth_s:
            return "auth_timeout"
        if not _request_whole(proto):
            if now - proto.cg_cycle >= t.read_s:
                return "read_timeout"
        elif proto.cg_paused_since is not None and now - proto.cg_paused_since >= t.write_stall_s:
            return "write_stall"
        return None

    def facts(self) -> dict:
        """What the book holds and what it closed (for tests and the gateway's own record)."""
        return {
            "open": len(self.open),
            "preauth": len(self.preauth),
            "by_run": {t[:6] + "...": len(c) for t, c in self.by_run.items()},
            "aborted": dict(self.aborted),
            "refused": sum(self.refused.values()),
            "total_cap": self.total,
        }


def _token(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The run token where the dialects' clients send it: ``x-api-key``, else a bearer token."""
    found = {k.lower(): v for k, v in headers if k.lower() in (b"x-api-key", b"authorization")}
    key = found.get(b"x-api-key")
    if key:
        return key.decode("latin-1").strip() or None
    scheme, _, value = found.get(b"authorization", b"").decode("latin-1").partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None


def _waiting(proto) -> int:
    """Bytes the kernel holds for this connection, not yet read (FIONREAD); 0 when unknown."""
    sock = proto.transport.get_extra_info("socket")
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except (OSError, AttributeError, ValueError):
        return 0
    return struct.unpack("i", raw)[0]


def _request_whole(proto) -> bool:
    """The connection's current request arrived whole and its answer is being made or sent.
    A whole request is DONE, or MUST_CLOSE when the client sent ``Connection: close`` (urllib
    does): its answer may take as long as the model."""
    import h11

    whole = (h11.DONE, h11.MUST_CLOSE)
    return proto.conn.their_state in whole and proto.conn.our_state not in whole


def _idle(proto) -> bool:
    """Between requests: the last response sent, no new request begun."""
    import h11

    return proto.conn.our_state is h11.IDLE and proto.conn.their_state is h11.IDLE and not proto.conn.trailing_data[0]
