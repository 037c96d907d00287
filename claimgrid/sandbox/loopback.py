"""The loopback forwarder: a guarded coding agent's one way out, to the gateway's Unix socket.

Run inside the agent's sandbox (claimgrid.launch.confine.agent_sandbox), as a script, by an
interpreter already bound there (the framework venv's python), so it imports the standard
library only and nothing of ``claimgrid``::

    python loopback.py SOCKET PORT -- AGENT ARGV...

The sandbox has an empty network namespace: only its own loopback interface exists and
nothing listens on it. This script listens on ``127.0.0.1:PORT`` there, then starts the
agent (its base URL points at that port) and copies every connection byte for byte, both
ways, to the Unix socket ``SOCKET``, whose far end is the run's gateway
(claimgrid.gateway.server serves the same app there). Nothing is parsed or changed: every
request still carries the run token and is recorded by the gateway as it arrives. It
exits with the agent's exit status (a signal as 128 + its number) once the agent has
exited; the sandbox's pid namespace ends with it, and with it anything the agent left.

The port is listened on before the agent starts, so the agent's first call never meets a
closed port. A connection the socket refuses is closed at once (the agent sees its call
fail, as it would with the gateway down).

**The lifeline.** When this script's standard input is a pipe, it is the sandbox's life:
the launcher (the adapter) holds the pipe's write end and never writes; once that end is
closed (the adapter stopped the agent at its timeout, or the adapter itself died, however),
this script kills every process of the sandbox (``kill(-1)``: in its own pid namespace,
processes of its own uid) and exits, so bwrap's init exits and the namespace ends. bwrap's
``--die-with-parent`` alone is not enough: killed with SIGKILL during its own set-up (as root,
bubblewrap 0.11.0), bwrap went on to start the command without it in force in 6 of 12 tries,
and the agent ran on with nobody to stop it; with the lifeline in 0 of 12 (in 1, bwrap's init
stayed asleep with no command under it: the launcher's stop-then-kill of the adapter's whole
tree reaches it). It also ends the sandbox when the adapter alone is killed. The agent's own
standard input is ``/dev/null``.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading

_CHUNK = 1 << 16


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until ``src`` ends; then end ``dst``'s writing side."""
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    upstream.close()
    client.close()


def _accept(listener: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve, args=(client, path), daemon=True).start()


def listen(port: int) -> socket.socket:
    """The listening socket on the sandbox's loopback (``port`` 0: one the kernel picks)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def forward(listener: socket.socket, path: str) -> threading.Thread:
    """Forward every connection of ``listener`` to the Unix socket ``path`` (a daemon thread)."""
    thread = threading.Thread(target=_accept, args=(listener, path), name="loopback", daemon=True)
    thread.start()
    return thread


def _hold(fd: int) -> None:
    """Read ``fd`` until its write end is closed, then end the whole sandbox (module docstring)."""
    try:
        while os.read(fd, 4096):
            pass
    except OSError:
        pass
    try:
        os.kill(-1, signal.SIGKILL)  # every other process this uid has in this pid namespace
    finally:
        os._exit(128 + signal.SIGKILL)


def lifeline(fd: int = 0) -> bool:
    """Watch ``fd`` (standard input) as the sandbox's lifeline when it is a pipe; True if it is."""
    try:
        is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False
    if is_pipe:
        threading.Thread(target=_hold, args=(fd,), name="lifeline", daemon=True).start()
    return is_pipe


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: loopback.py SOCKET PORT -- ARGV...\n")
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    forward(listen(port), path)
    lifeline(0)
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda n, _f: proc.send_signal(n))
    code = proc.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(status)  # forwarding threads may still be blocked in recv: they end with the process
