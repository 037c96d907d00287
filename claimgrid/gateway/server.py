"""Gateway: the harness model endpoint, served by uvicorn in a background thread.

    gw = Gateway()                  # nothing started yet
    url = gw.start()                # "http://127.0.0.1:PORT/v1"; idempotent
    gw.register(token, script)      # before the run's agent starts
    events, raw = gw.finish(token)  # after it exits: CONTRACTS exchange events + raw bodies
    gw.stop()

It binds to 127.0.0.1 only, on a port the OS picks, and, when given ``unix_socket``, also
serves the same app on that Unix socket: the one address a guarded coding agent has (its
sandbox has an empty network namespace; claimgrid/sandbox/loopback.py forwards its loopback
port to this socket, bound into the sandbox). The socket is served by the same server,
event loop and app as the TCP port rather than by a forwarder in the driver: an exchange
through it is recorded by the very code that records every other one, with no extra copy
or thread to lose or reorder bytes, and who may connect is the socket's folder's business
(the node's own 0700 work folder). All runs share one event loop; a run is selected by its
token alone, whichever address it came in on. Reference models are answered by harness code; the one
LiteLLM Router (real models) is built on the first call that needs it
(claimgrid.gateway.dispatch), so starting a gateway does not import LiteLLM.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from claimgrid import caps
from claimgrid.errors import ClaimgridError
from claimgrid.gateway.dispatch import Dispatcher
from claimgrid.gateway.inbound import Inbound, Timeouts
from claimgrid.gateway.runs import Registry
from claimgrid.procstat import cpu_seconds
from claimgrid.reference.script import RunScript

if TYPE_CHECKING:
    import uvicorn

HOST = "127.0.0.1"


def _guarded_protocol(inbound):
    """uvicorn's h11 protocol with the gateway's connection book (claimgrid.gateway.inbound):
    each connection is counted, authenticated by the run token of its first request, capped
    per run, and aborted at its deadline (uvicorn's own keep-alive timeout closes only idle
    connections after a response, and with ``close``, which waits for a reader that may never
    read; one that never sends a whole request would stay open for ever)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11(H11Protocol):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            if not inbound.opened(self, self.loop):
                return
            next_event = self.conn.next_event

            def counted():
                event = next_event()
                if isinstance(event, h11.Request):
                    headers = inbound.request(self, list(event.headers))
                    event = h11.Request(
                        method=event.method, target=event.target, headers=headers, http_version=event.http_version
                    )
                return event

            self.conn.next_event = counted  # type: ignore[method-assign]  # wraps h11's reader on this connection only

        def on_response_complete(self) -> None:
            super().on_response_complete()
            inbound.response_done(self)

        def pause_writing(self) -> None:
            super().pause_writing()
            inbound.write_paused(self, True)

        def resume_writing(self) -> None:
            super().resume_writing()
            inbound.write_paused(self, False)

        def connection_lost(self, exc) -> None:
            inbound.closed(self)
            super().connection_lost(exc)

    return GuardedH11


def _private_folder() -> str:
    """A new 0700 folder whose ``gateway.sock`` path can be bound (the temporary folder, else /tmp)."""
    for base in (tempfile.gettempdir(), "/tmp"):
        if len(os.path.join(base, "cg-gw-" + "x" * 8, "gateway.sock")) <= caps.UNIX_SOCKET_PATH_MAX:
            return tempfile.mkdtemp(prefix="cg-gw-", dir=base)
    raise ClaimgridError(f"no folder for the gateway's socket fits {caps.UNIX_SOCKET_PATH_MAX} bytes")


def _unix_listener(path: str) -> socket.socket:
    """A listening Unix socket at ``path`` (a stale one from a killed driver is replaced)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o666)
    return sock


class Gateway:
    def __init__(
        self,
        retry=None,
        replay=None,
        reference_path: str = "harness",
        connections=None,
        unix_socket: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        """``retry``: RetryPolicy for real providers (default: RetryPolicy()); ``replay``:
        a ReplaySource (claimgrid.gateway.recorded) to serve recorded exchanges offline;
        ``reference_path``: ``harness`` (default) or ``router``, the pre-issue-12 LiteLLM
        path kept for tests/integration/gateway/test_gateway_reference_parity.py and bench/gateway.py;
        ``connections``: per-provider limits (claimgrid.gateway.connections.Connections);
        ``unix_socket``: the path of the Unix socket also served (module docstring; made 0666 so
        a sandbox's unprivileged uid can connect: the folder holding it is what keeps others
        out); None: ``gateway.sock`` in a new private folder of its own, removed by ``stop``;
        ``timeouts``: the inbound connection caps and deadlines (claimgrid.gateway.inbound;
        default: claimgrid.caps)."""
        self.registry = Registry()
        self.inbound = Inbound(lambda token: self.registry.get(token) is not None, timeouts)
        self.connections = connections
        self.retry = retry
        self.replay = replay
        self.dispatcher = Dispatcher(retry=retry, reference_path=reference_path)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None
        self._lock = threading.Lock()
        self.unix_socket = unix_socket
        self._own_socket_dir: str | None = None  # the private folder made for it (unix_socket None)
        self._sockets: list[socket.socket] = []

    @property
    def url(self) -> str | None:
        return self._url

    def start(self, timeout_s: float = 60.0) -> str:
        """Start serving (once) and return the base URL ending in ``/v1``."""
        with self._lock:
            if self._url:
                return self._url
            import uvicorn

            # Imported when serving starts: the app pulls in Starlette (about 140 modules), which
            # a process that imports the gateway package without serving does not need.
            from claimgrid.gateway.app import create_app

            app = create_app(self.registry, self.dispatcher, replay=self.replay, connections=self.connections)
            # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets
            # whose proto says TCP. Without it a keep-alive client waits out its own delayed ACK
            # on every response (Nagle on the server against the client's delayed ACK).
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((HOST, 0))
            port = sock.getsockname()[1]
            if self.unix_socket is None:
                self._own_socket_dir = _private_folder()
                self.unix_socket = os.path.join(self._own_socket_dir, "gateway.sock")
            sockets = [sock, _unix_listener(self.unix_socket)]
            config = uvicorn.Config(
                app,
                log_level="warning",
                access_log=False,
                lifespan="off",
                http=_guarded_protocol(self.inbound),
                timeout_keep_alive=int(caps.GATEWAY_IDLE_TIMEOUT_S),
                # No uvicorn limit: the connection book is it (one request in flight per
                # connection). uvicorn's own count still holds connections the book has just
                # aborted, so a limit there answered a working client 503 during a flood.
                limit_concurrency=None,
            )
            server = uvicorn.Server(config)
            thread = threading.Thread(
                target=server.run, kwargs={"sockets": sockets}, name="claimgrid-gateway", daemon=True
            )
            thread.start()
            deadline = time.monotonic() + timeout_s
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    server.should_exit = True
                    raise ClaimgridError(f"the model gateway did not start on {HOST}:{port}")
                time.sleep(0.01)
            self._server, self._thread, self._sock, self._sockets = server, thread, sock, sockets
            self._url = f"http://{HOST}:{port}/v1"
            return self._url

    def thread_cpu_s(self) -> float | None:
        """CPU seconds the gateway's serving thread has used (Linux /proc); None if unknown.

        Every request is handled on that thread's event loop (LiteLLM's Router included), so
        this is the gateway's whole cost (less the Router's one-time build, in a worker
        thread); the throughput bench reports it per run."""
        thread = self._thread
        tid = getattr(thread, "native_id", None) if thread is not None else None
        if tid is None:
            return None

        return cpu_seconds(f"/proc/self/task/{tid}/stat")

    def register(self, token: str, script: RunScript, on_request: Callable[[int], None] | None = None) -> None:
        """Map ``token`` (the run's API key) to its script; a token is registered once.

        ``on_request(call_index)`` runs in a worker thread when each of the run's requests
        arrives, before it is answered (a turn boundary: the agent waits for this answer); an
        exception from it is the caller's to record, never the call's (``app.turn_boundary``).
        A run whose assigned model or substitute is a real model gets the gateway's LiteLLM
        Router built here, before its agent starts (the first time: seconds)."""
        if not isinstance(script, RunScript):
            raise TypeError("register() needs a RunScript")
        cassette = self.replay.cassette(script.run_id) if self.replay is not None else None
        if self.replay is None and self.dispatcher.needs_router(script):
            # Built before the run's agent starts (once per gateway): the first build imports
            # LiteLLM, seconds of CPU that inside the run would eat its first call's deadline.
            self.dispatcher.router.get()
        self.registry.add(token, script, cassette, on_request)

    @property
    def spend(self):
        """The running totals of every exchange so far (claimgrid.gateway.budget.Spend)."""
        return self.registry.spend

    def finish(self, token: str) -> tuple[list[dict], list[dict]]:
        """Unregister the run; return its exchange events and raw exchanges, by call_index."""
        state = self.registry.pop(token)
        now = state.elapsed()
        with state.lock:
            # A real provider's call still unanswered when the run ended (its process exited or
            # was killed while it waited): the gateway's record that the run ended waiting on it.
            for index, t in sorted(state.open_calls.items()):
                state.events.append(
                    {"source": "gateway", "kind": "in_flight", "call_index": index, "t": t, "open_s": round(now - t, 3)}
                )
            events = sorted(state.events, key=lambda e: e["call_index"])
            raw = sorted(state.raw, key=lambda r: r["call_index"])
        return events, raw

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._server is None:
                return
            self._server.should_exit = True
            assert self._thread is not None  # set together with _server (start)
            self._thread.join(timeout_s)
            for sock in self._sockets:
                sock.close()
            if self.unix_socket is not None:
                try:
                    os.unlink(self.unix_socket)
                except FileNotFoundError:
                    pass
            if self._own_socket_dir is not None:
                shutil.rmtree(self._own_socket_dir, ignore_errors=True)
                self._own_socket_dir = self.unix_socket = None
            self._server = self._thread = self._url = None

    def __enter__(self) -> Gateway:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
