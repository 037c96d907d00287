"""Warm parent: import a framework once, then fork one child per run.

    <venv python> frameworks/_harness/warm_parent.py --adapter-dir frameworks/<name> --socket PATH --driver-pid N

The driver's pid comes on the command line and is checked before preload and on every
turn of the serving loop: a parent whose driver died (kill -9 included, even while it was
still importing) exits and kills its children. The parent imports the adapter and calls ``preload()`` once; it never runs an agent
and starts no threads (forking a threaded process is unsafe). It then serves a unix
socket with a single-threaded selector loop. Binding the socket is the readiness
signal: a connectable socket means preload is done.

Protocol, one connection per run:

* request: one JSON line ``{"ctl": {...}, "env": {...}, "cwd": "..."}`` carrying the
  tools pipe's write end as SCM_RIGHTS ancillary data;
* reply 1: ``{"pid": N}`` as soon as the child is in its own session;
* reply 2: ``{"pid": N, "status": S, "cpu_s": C}`` (raw ``waitpid`` status; user+system CPU
  seconds of the child and its reaped descendants, from ``wait4``) when the child is reaped;
* if the driver closes the connection before the child exits, the child's process
  group is killed (the driver gave the run up).

The child calls ``os.setsid()`` (so the driver can kill its whole tree), drops every
descriptor the parent owns, points stdout/stderr at files in the run's sandbox, takes the
run's environment from the request plus what the parent's adapter import and ``preload()``
changed in its own (so ``os.environ`` at ``run()`` is a fresh process's), runs
exactly like fresh mode (``harness_runtime.run_one``) and leaves with ``os._exit``
(a normal interpreter exit hangs CrewAI's event-bus shutdown in a forked child).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import selectors
import signal
import socket
import sys
import threading
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness_runtime import environ_changes, harden_process, load_adapter, reset_environ, run_one  # noqa: E402

MAX_REQUEST = 16 << 20


class WarmParent:
    def __init__(self, adapter, socket_path: str, driver_pid: int, preload_env: dict | None = None):
        self.adapter = adapter
        self.preload_env = preload_env or {}  # what import + preload() changed in os.environ
        self.driver_pid = driver_pid
        self.sel = selectors.DefaultSelector()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        old = os.umask(0o177)  # the socket is the driver's alone
        try:
            self.listener.bind(socket_path)
        finally:
            os.umask(old)
        self.listener.listen(64)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        self.conns: dict[int, socket.socket] = {}  # child pid -> its driver connection
        self.stopping = False
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "signal")

    # -- loop

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.set_wakeup_fd(self.wake_w)
        while not self.stopping:
            if os.getppid() != self.driver_pid:
                # The driver died (kill -9 included): nobody can read our children's results.
                self.stopping = True
                break
            for key, _ in self.sel.select(timeout=1.0):
                if key.data == "accept":
                    self._accept()
                elif key.data == "signal":
                    self._drain_wake()
                else:
                    self._driver_closed(key.data)
            self._reap()
        for pid in list(self.conns):
            _killpg(pid)
        self._reap(block=True)

    def _on_term(self, *_):
        self.stopping = True

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def _reap(self, block: bool = False) -> None:
        while self.conns:
            try:
                pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.conns.pop(pid, None)
            if conn is not None:
                # The run's own CPU (and its reaped descendants'): the framework's share of the
                # grid's CPU, read by bench/throughput.py.
                self._send(conn, {"pid": pid, "status": status, "cpu_s": round(usage.ru_utime + usage.ru_stime, 4)})
                self._close(conn)

    def _driver_closed(self, pid: int) -> None:
        conn = self.conns.get(pid)
        try:
            data = conn.recv(1) if conn else b""
        except OSError:
            data = b""
        if not data:
            _killpg(pid)
            if conn is not None:
                self.sel.unregister(conn)

    # -- one request

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(10)  # the driver sends its request at once; never stall the loop long
        tools_fd = None
        try:
            payload, tools_fd = _read_request(conn)
            req = json.loads(payload)
            pid = self._fork(req, tools_fd)
        except Exception as exc:
            self._send(conn, {"error": f"{type(exc).__name__}: {exc}"})
            conn.close()
            return
        finally:
            if tools_fd is not None:
                os.close(tools_fd)  # only the child keeps the write end
        self.conns[pid] = conn
        self._send(conn, {"pid": pid})
        self.sel.register(conn, selectors.EVENT_READ, pid)

    def _fork(self, req: dict, tools_fd: int) -> int:
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns
            code = 2
            try:
                os.setsid()
                os.close(ready_r)
                self._drop_parent_state()
                os.write(ready_w, b"1")
                os.close(ready_w)
                code = _child_main(self.adapter, req, tools_fd, self.preload_env)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)
        os.close(ready_w)
        # Reply with the pid only once the child leads its own session, so a kill of
        # the process group can never miss it.
        os.read(ready_r, 1)
        os.close(ready_r)
        return pid

    def _drop_parent_state(self) -> None:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        self.sel.close()
        self.listener.close()
        for conn in self.conns.values():
            conn.close()
        os.close(self.wake_r)
        os.close(self.wake_w)

    # -- io

    def _send(self, conn, obj) -> None:
        try:
            conn.sendall((json.dumps(obj) + "\n").encode())
        except OSError:
            pass

    def _close(self, conn) -> None:
        try:
            self.sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()


def _read_request(conn: socket.socket) -> tuple[bytes, int | None]:
    data, fds, _, _ = socket.recv_fds(conn, 65536, 1)
    tools_fd = fds[0] if fds else None
    if tools_fd is not None:
        os.set_inheritable(tools_fd, False)
    while not data.endswith(b"\n"):
        more = conn.recv(65536)
        if not more:
            raise ValueError("request ended before its newline")
        data += more
        if len(data) > MAX_REQUEST:
            raise ValueError("request too large")
    return data, tools_fd


def _child_main(adapter, req: dict, tools_fd: int, preload_env: dict | None = None) -> int:
    ctl, env = req["ctl"], req.get("env") or {}
    sandbox = ctl["sandbox"]
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    for fd, name in ((1, "adapter.stdout"), (2, "adapter.stderr")):
        out = os.open(os.path.join(sandbox, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    reset_environ(env, preload_env)  # the run's, as a fresh process has it after its preload()
    os.chdir(req.get("cwd") or sandbox)
    return run_one(ctl, adapter, tools_fd, "warm")


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def main(argv=None) -> int:
    harden_process()
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter-dir", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--driver-pid", type=int, required=True)
    args = ap.parse_args(argv)
    if os.getppid() != args.driver_pid:
        return 0  # the driver is gone already: nobody will ever connect
    launched = dict(os.environ)
    adapter = load_adapter(args.adapter_dir)
    preload = getattr(adapter, "preload", None)
    if preload is not None:
        preload()
    # Handed to every child on top of its run's environment (e.g. LiteLLM's
    # TIKTOKEN_CACHE_DIR, set when it is imported), as a fresh process keeps them.
    preload_env = environ_changes(launched, dict(os.environ))
    if threading.active_count() > 1:
        print(
            f"warm_parent: warning: {threading.active_count() - 1} thread(s) running after preload; "
            "forked children inherit only the forking thread",
            file=sys.stderr,
        )
    # Everything import and preload() made moves to the collector's permanent generation: a
    # forked run's first full collection no longer walks (and so copies, page by page) the
    # parent's objects. Measured on the OpenAI Agents SDK: median run CPU 0.163 -> 0.065 s
    # (bench/README.md). A child's own objects are collected as before.
    gc.collect()
    gc.freeze()
    parent = WarmParent(adapter, args.socket, args.driver_pid, preload_env)
    parent.serve()
    return 0


if __name__ == "__main__":
    code = main()
    # Children are reaped: skip interpreter teardown (a framework's atexit handlers cost
    # seconds, and the driver waits for this exit when it stops the grid).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
