"""The loopback forwarder: a guarded coding agent's one way out, to the gateway's Unix socket.

Run inside the agent's sandbox (claimgrid.launch.confine.agent_sandbox), as a script, by an
interpreter already bound there (the framework venv's python), so it imports the standard
library only and nothing of ``claimgrid``::

    python loopback.py SOCKET PORT [--inject PLACEHOLDER] -- AGENT ARGV...

The sandbox has an empty network namespace: only its own loopback interface exists and
nothing listens on it. This script listens on ``127.0.0.1:PORT`` there, then starts the
agent (its base URL points at that port) and copies every connection byte for byte, both
ways, to the Unix socket ``SOCKET``, whose far end is the run's gateway
(claimgrid.gateway.server serves the same app there). Nothing is parsed or changed: every
request still carries the run token and is recorded by the gateway as it arrives. It
exits with the agent's exit status (a signal as 128 + its number) once the agent has
exited; the sandbox's pid namespace ends with it, and with it anything the agent left.

**The credential.** With ``--inject PLACEHOLDER`` the agent never holds the run token: its
configuration and environment carry ``PLACEHOLDER`` (a fixed, worthless string), and this
script, the one process of the sandbox that knows the token, puts the token in its place on
the request's way to the gateway, and only where a credential belongs: the whole value of an
``x-api-key`` header (the placeholder alone) or of an ``Authorization`` header
(``Bearer`` and the placeholder alone). Nowhere else: a placeholder in the request line (a
path such as ``/v1/models/PLACEHOLDER``), in any other header, in a header that merely holds
it among other text, or in a body goes on as the placeholder, so no request can make the
gateway (or a provider behind it) echo the token back. Bodies and responses are copied byte
for byte (a request's body by its ``Content-Length`` or its chunks, an ``Upgrade``
connection raw after its first request). A header block whose framing the gateway could
read otherwise than this script does (a line with no ``name:``, a folded line, a bare CR or
LF, more than one ``Content-Length`` or ``Transfer-Encoding``, both, a ``Transfer-Encoding``
other than ``chunked``, a length that is not digits) is not passed on: the connection is
closed, so bytes this script took for a body are never a header block at the gateway, nor
the reverse. The token arrives as the first line of the lifeline (below), read before the
agent starts, after this process made itself non-dumpable (``PR_SET_DUMPABLE`` 0: its
``/proc`` files, memory and descriptors are root's, and no process of the run's uid may
ptrace it); it is never in an environment or on a command line in the sandbox. So ``env``,
``/proc/self/environ`` and ``/proc/$PPID/environ`` in the agent's shell show the placeholder
at most, and what the agent could replay outside the sandbox is nothing; inside it, a
request through this forwarder is a request of this run, recorded and budgeted as one, and
the gateway refuses the token itself once the run has ended (claimgrid.gateway.server
``finish``).

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

import ctypes
import os
import signal
import socket
import stat
import subprocess
import sys
import threading

_CHUNK = 1 << 16
# The longest request header block passed on (a request line and headers); a longer one is
# not HTTP the gateway would take (its own limit is lower), and the connection is closed.
_MAX_HEAD = 64 << 10
PR_SET_DUMPABLE = 4


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


class _Reader:
    """Buffered reads of one socket (what an injecting pump has taken but not yet sent)."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buf = sock, b""

    def fill(self) -> bool:
        data = self.sock.recv(_CHUNK)
        self.buf += data
        return bool(data)

    def line(self) -> bytes | None:
        while b"\r\n" not in self.buf:
            if len(self.buf) > _MAX_HEAD or not self.fill():
                return None
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line + b"\r\n"

    def take(self, n: int) -> bytes:
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


# The headers a credential is sent in (the gateway reads the run token from these only:
# claimgrid.gateway.inbound), with the value's form before the credential.
_CREDENTIAL_HEADERS = {b"x-api-key": b"", b"authorization": b"bearer "}
# Header names a request's framing depends on: at most one of them, once.
_FRAMING = (b"content-length", b"transfer-encoding")
_TOKEN_CHARS = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def credential_header(line: bytes, placeholder: bytes, token: bytes) -> bytes:
    """One header line with the token in place of the placeholder when the line is a credential
    header whose whole value is the placeholder (``x-api-key: P``, ``Authorization: Bearer P``,
    the scheme in any case); any other line unchanged (module docstring)."""
    name, sep, value = line.partition(b":")
    form = _CREDENTIAL_HEADERS.get(name.lower())
    if not sep or form is None:
        return line
    value = value.strip(b" \t")
    if value.lower()[: len(form)] != form or value[len(form) :] != placeholder:
        return line
    return name + b": " + value[: len(form)] + token


def _framing(lines: list[bytes]) -> dict[bytes, bytes] | None:
    """The framing fields (lowercased values) of a header block's ``lines`` (the request line
    first), or None when the gateway could frame it otherwise than this script does (module
    docstring)."""
    fields: dict[bytes, bytes] = {}
    if any(b"\r" in line or b"\n" in line for line in lines):
        return None  # a bare CR or LF: a line break for the gateway's parser, not for this script
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or not set(name) <= _TOKEN_CHARS:
            return None  # no name, a folded line (leading space), a space before the colon
        key = name.lower()
        if key in _FRAMING and key in fields:
            return None
        fields[key] = value.strip(b" \t").lower()
    if all(k in fields for k in _FRAMING):
        return None
    if b"transfer-encoding" in fields and fields[b"transfer-encoding"] != b"chunked":
        return None
    if b"content-length" in fields and not fields[b"content-length"].isdigit():
        return None
    return fields


def _inject_pump(src: socket.socket, dst: socket.socket, placeholder: bytes, token: bytes) -> None:
    """Copy requests from ``src`` to ``dst``, the placeholder replaced by the token in each
    request's credential headers only (module docstring); ``dst``'s writing side ends when
    ``src`` does, or when a request's framing is ambiguous."""
    r = _Reader(src)
    try:
        while True:
            while b"\r\n\r\n" not in r.buf:
                if len(r.buf) > _MAX_HEAD or not r.fill():
                    if r.buf and len(r.buf) <= _MAX_HEAD:
                        dst.sendall(r.buf)  # a torn request: the gateway answers it as one
                    return
            head, _, r.buf = r.buf.partition(b"\r\n\r\n")
            request_line, *lines = head.split(b"\r\n")
            fields = _framing([request_line, *lines])
            if fields is None:
                return
            lines = [credential_header(line, placeholder, token) for line in lines]
            dst.sendall(b"\r\n".join([request_line, *lines]) + b"\r\n\r\n")
            if b"upgrade" in fields.get(b"connection", b""):
                dst.sendall(r.take(len(r.buf)))
                _pump(src, dst)
                return
            if b"chunked" in fields.get(b"transfer-encoding", b""):
                while True:
                    size_line = r.line()
                    if size_line is None:
                        return
                    dst.sendall(size_line)
                    size = int(size_line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while True:  # trailers, up to the empty line
                            trailer = r.line()
                            if trailer is None:
                                return
                            dst.sendall(trailer)
                            if trailer == b"\r\n":
                                break
                        break
                    left = size + 2  # the chunk and its CRLF
                    while left:
                        if not r.buf and not r.fill():
                            return
                        part = r.take(left)
                        dst.sendall(part)
                        left -= len(part)
            else:
                left = int(fields.get(b"content-length", b"0") or b"0")
                while left:
                    if not r.buf and not r.fill():
                        return
                    part = r.take(left)
                    dst.sendall(part)
                    left -= len(part)
    except (OSError, ValueError):
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _serve(client: socket.socket, path: str, inject: tuple[bytes, bytes] | None = None) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        upstream.close()
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    if inject is None:
        _pump(client, upstream)
    else:
        _inject_pump(client, upstream, *inject)
    back.join()
    upstream.close()
    client.close()


def _accept(listener: socket.socket, path: str, inject: tuple[bytes, bytes] | None = None) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve, args=(client, path, inject), daemon=True).start()


def listen(port: int) -> socket.socket:
    """The listening socket on the sandbox's loopback (``port`` 0: one the kernel picks)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener


def forward(listener: socket.socket, path: str, inject: tuple[bytes, bytes] | None = None) -> threading.Thread:
    """Forward every connection of ``listener`` to the Unix socket ``path`` (a daemon thread);
    ``inject``: ``(placeholder, token)``, the placeholder replaced in each request's credential headers."""
    thread = threading.Thread(target=_accept, args=(listener, path, inject), name="loopback", daemon=True)
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


def read_token(fd: int = 0) -> bytes:
    """The run token, the lifeline's first line, read a byte at a time (nothing after it is
    taken from the pipe), once this process is non-dumpable (module docstring)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    out = b""
    while not out.endswith(b"\n") and len(out) < 4096:
        byte = os.read(fd, 1)
        if not byte:
            break
        out += byte
    return out.strip()


def main(argv: list[str]) -> int:
    inject = None
    if len(argv) >= 4 and argv[2] == "--inject":
        placeholder, argv = argv[3].encode(), [argv[0], argv[1], *argv[4:]]
        token = read_token(0)
        if not token:
            sys.stderr.write("loopback.py: --inject: no token on the lifeline\n")
            return 2
        inject = (placeholder, token)
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: loopback.py SOCKET PORT [--inject PLACEHOLDER] -- ARGV...\n")
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    forward(listen(port), path, inject)
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
