"""The agent sandbox (claimgrid.launch.confine.agent_sandbox): a coding agent's whole process in
the guard, checked with the real bwrap and the real gateway and a stand-in agent (a Python
program in the sandbox's own interpreter), so every run of the suite holds it without the npm
agents (tests/frameworks/test_cli_guard_attacks.py drives the real ones, deep):

* the agent's model call through the loopback forwarder reaches the gateway's Unix socket and is
  recorded as any exchange; its environment passes in, and its key is the placeholder the
  forwarder replaces by the run token (which only the forwarder holds, from the lifeline): the
  token is nowhere the agent can read (its environment, its parent's ``/proc`` files);
* inside: the run's uid (not root), ``HOME`` = ``/tmp``, cwd ``/workspace``; the gateway's host
  port, a host listener and a host file outside the workspace are out of reach;
* stopping the sandbox as the adapter does at its timeout (SIGKILL to its bwrap, the lifeline
  pipe closed) takes every process of the agent with it, a sleeper that left its session
  included;
* unguarded there is no agent sandbox, and a guarded agent without the gateway's socket is a
  harness error.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from claimgrid.gateway import Gateway
from claimgrid.launch.confine import (
    LOOPBACK_PORT,
    SANDBOX_LOOPBACK,
    AgentDeadlines,
    agent_sandbox,
    agent_tmp,
    hand_over,
)
from claimgrid.sandbox.guard import Guard

from tests.integration.harness.test_harness_tools import GUARD, TASK_PYTHON
from tests.test_gateway_support import script

AGENT_PYTHON = str(Path(sys.executable).parent.resolve() / Path(sys.executable).name)

# The stand-in agent: one model call through its base URL, then the probes; prints JSON.
AGENT = r"""
import json, os, socket, sys, urllib.request
url, host_port, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3]
out = {"uid": os.getuid(), "home": os.environ.get("HOME"), "cwd": os.getcwd()}
req = urllib.request.Request(url + "/chat/completions", method="POST",
    data=json.dumps({"model": "agent-model", "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["AGENT_TOKEN"], "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=20) as resp:
    out["status"], out["body"] = resp.status, json.loads(resp.read())
seen = []
for name in ("environ", "cmdline", "mem"):
    try:
        with open(f"/proc/{os.getppid()}/{name}", "rb") as fh:
            seen.append(fh.read(1 << 16).decode(errors="replace"))
    except OSError as exc:
        seen.append(type(exc).__name__)
out["parent"] = seen
out["own_environ"] = open("/proc/self/environ", "rb").read().decode(errors="replace")
def connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "CONNECTED"
    except OSError as exc:
        return type(exc).__name__
out["gateway_port"], out["forwarder_port"] = connect(host_port), connect(int(url.split(":")[2].split("/")[0]))
try:
    out["secret"] = open(secret).read()
except OSError as exc:
    out["secret"] = type(exc).__name__
print(json.dumps(out))
"""


@pytest.fixture
def gateway(tmp_path):
    gw = Gateway(unix_socket=str(tmp_path / "gw.sock"))
    gw.start()
    yield gw
    gw.stop()


def _sandbox(tmp_path, gw) -> tuple[dict, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("the workspace\n")
    hand_over(GUARD, ws)
    tmp = agent_tmp(GUARD, tmp_path / "tmp")
    spec = agent_sandbox(
        GUARD,
        ws,
        agent_python=AGENT_PYTHON,
        task_python=TASK_PYTHON,
        gateway_socket=gw.unix_socket,
        deadlines=AgentDeadlines(30),
        tmp=tmp,
    )
    assert spec is not None
    return spec, ws


def test_the_agent_reaches_the_gateway_through_the_forwarder_and_nothing_else(tmp_path, gateway):
    from claimgrid.inputs.tasks import load_tasks

    token = "cg-" + secrets.token_urlsafe(16)
    gateway.register(token, script(next(iter(load_tasks().values()))))
    spec, _ws = _sandbox(tmp_path, gateway)
    secret_dir = tmp_path / "host"
    secret_dir.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    (secret_dir / "secret.txt").write_text("SECRET-" + secrets.token_hex(8))
    (secret_dir / "secret.txt").chmod(0o644)
    host_port = int(gateway.url.split(":")[2].split("/")[0])
    argv = [
        *spec["argv_prefix"],
        AGENT_PYTHON,
        "-c",
        AGENT,
        spec["gateway_url"],
        str(host_port),
        str(secret_dir / "secret.txt"),
    ]
    assert token not in " ".join(argv)
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode() + b"\n")  # the lifeline's first line, as kit.run_agent writes it
    try:
        proc = subprocess.run(
            argv,
            env={"AGENT_TOKEN": spec["credential"], "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
            stdin=read_end,
        )
    finally:
        os.close(write_end)
        os.close(read_end)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == 200 and out["body"]["choices"], out
    # The placeholder went in, the token came out at the gateway; the agent cannot read it.
    assert spec["credential"] != token and token not in proc.stdout + proc.stderr, out
    environ, cmdline, mem = out["parent"]
    assert environ == mem == "PermissionError", out["parent"]  # the forwarder is not dumpable
    assert "loopback.py" in cmdline and token not in cmdline and token not in out["own_environ"]
    events, _raw = gateway.finish(token)
    assert len(events) == 1 and events[0]["status"] == 200 and events[0]["dialect"] == "chat-completions"
    # The run has ended: its token, replayed by whoever captured it, is refused.
    replay = urllib.request.Request(
        gateway.url + "/chat/completions",
        method="POST",
        data=json.dumps({"model": "agent-model", "messages": []}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(replay, timeout=20)
    assert refused.value.code == 401
    assert out["home"] == spec["home"] == "/tmp" and out["cwd"] == spec["workspace"] == "/workspace"
    assert out["uid"] != 0
    assert spec["gateway_url"] == f"http://127.0.0.1:{LOOPBACK_PORT}/v1" and out["forwarder_port"] == "CONNECTED"
    assert out["gateway_port"] == "ConnectionRefusedError", out
    assert out["secret"] == "FileNotFoundError", out


def test_a_command_of_the_agents_shell_on_path_has_the_runs_time_limit(tmp_path, gateway):
    """``bash`` on the sandbox's PATH (what Codex CLI runs its commands with) is the guard's
    limited shell: a command over the run's per-command limit is killed (exit 124), one under it
    is not."""
    ws = tmp_path / "ws"
    ws.mkdir()
    hand_over(GUARD, ws)
    spec = agent_sandbox(
        GUARD,
        ws,
        agent_python=AGENT_PYTHON,
        task_python=TASK_PYTHON,
        gateway_socket=gateway.unix_socket,
        deadlines=AgentDeadlines(30, 1),
        tmp=agent_tmp(GUARD, tmp_path / "tmp"),
    )
    assert spec is not None and spec["command_timeout_s"] == 1
    agent = (
        "import subprocess, shutil, time; t = time.monotonic(); "
        "slow = subprocess.run(['bash', '-c', 'sleep 5; echo OVERRAN'], capture_output=True, text=True); "
        "fast = subprocess.run(['bash', '-c', 'echo FAST'], capture_output=True, text=True); "
        "print(shutil.which('bash'), slow.returncode, repr(slow.stdout), fast.returncode, fast.stdout.strip(), "
        "round(time.monotonic() - t))"
    )
    read_end, write_end = os.pipe()
    os.write(write_end, b"cg-test-token\n")
    try:
        proc = subprocess.run(
            [*spec["argv_prefix"], AGENT_PYTHON, "-c", agent],
            env={},
            stdin=read_end,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
        os.close(read_end)
    where, slow_code, slow_out, fast_code, fast_out, took = proc.stdout.split()
    assert where == "/opt/claimgrid/bin/bash" and slow_code == "124" and "OVERRAN" not in slow_out, proc.stdout
    assert fast_code == "0" and fast_out == "FAST" and int(took) < 5, proc.stdout


def _marked(mark: str, sleepers_only: bool = False) -> list[int]:
    """Processes whose command line holds ``mark`` (only the ``sleep`` ones: ``sleepers_only``)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if any(mark in a for a in argv) and (not sleepers_only or argv[0] == "sleep"):
            pids.append(int(pid))
    return pids


# When the sandbox's bwrap is killed: during its own set-up (as soon as it exists), once the
# forwarder runs, or once the agent's sleepers run. Killed during set-up without the lifeline,
# the sandbox went on to start its command with nothing to stop it in 6 of 12 tries
# (claimgrid/sandbox/loopback.py).
@pytest.mark.parametrize("when", ["set-up", "set-up", "forwarding", "sleeping"])
def test_killing_the_sandbox_takes_every_agent_process_with_it(tmp_path, gateway, when):
    """As the adapter stops its agent at the timeout: SIGKILL to the sandbox's bwrap, then the
    lifeline's write end closed (claimgrid/sandbox/loopback.py)."""
    spec, _ = _sandbox(tmp_path, gateway)
    mark = str(800_000 + secrets.randbelow(99_999))
    hang = (
        f"import subprocess, time; subprocess.Popen(['sleep', '{mark}1'], start_new_session=True); "
        f"subprocess.run(['sleep', '{mark}2'])"
    )
    read_end, write_end = os.pipe()
    os.write(write_end, b"cg-test-token\n")
    proc = subprocess.Popen([*spec["argv_prefix"], AGENT_PYTHON, "-c", hang], env={}, stdin=read_end)
    reached = {
        "set-up": lambda: bool(_marked(mark)),
        "forwarding": lambda: _forwarding(mark),
        "sleeping": lambda: len(_marked(mark, sleepers_only=True)) == 2,
    }[when]
    try:
        deadline = time.monotonic() + 30
        while not reached():
            assert time.monotonic() < deadline, "the agent never started"
            time.sleep(0.002)
    finally:
        proc.kill()  # SIGKILL to bwrap, as the adapter's subprocess timeout sends
        proc.wait()
        os.close(write_end)
        os.close(read_end)
    time.sleep(1.0)  # what survives the kill would have started its sleepers by now
    # A process that is exiting is not one that survived: at load 8 on a cold machine one was
    # still in /proc 6 s after the kill and gone a moment later (CI, 2026-12-06). What survives
    # sleeps for days, so a longer wait cannot hide it.
    deadline = time.monotonic() + 20
    while (left := _agent_processes(mark, when)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == [], [_describe(pid) for pid in left]


def _agent_processes(mark: str, when: str) -> list[int]:
    """What is left of the sandbox: every process with ``mark``, but, for a kill during bwrap's
    own set-up, bwrap's init alone (it can stay asleep there, with no command under it; the
    launcher's stop-then-kill of the adapter's whole tree reaches it: it is killed here)."""
    left = _marked(mark)
    if when != "set-up":
        return left
    bwrap = [pid for pid in left if _argv0(pid) == GUARD.bwrap]
    if bwrap and len(bwrap) == len(left):
        for pid in bwrap:
            os.kill(pid, signal.SIGKILL)
        return []
    return left


def _argv0(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _forwarding(mark: str) -> bool:
    """Whether the forwarder of the sandbox whose agent holds ``mark`` runs (bwrap's set-up is done)."""
    for pid in _marked(mark):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[1] == SANDBOX_LOOPBACK:
            return True
    return False


def _describe(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid}: gone"
    keep = [line for line in status if line.split(":")[0] in ("State", "PPid", "NSpid", "Uid")]
    return f"{pid}: {argv[:200]} {keep}"


def test_unguarded_there_is_no_agent_sandbox_and_a_guarded_one_needs_the_socket(tmp_path):
    off = Guard(enabled=False, reason="--guard off")
    assert (
        agent_sandbox(
            off,
            tmp_path,
            agent_python=AGENT_PYTHON,
            task_python=TASK_PYTHON,
            gateway_socket=None,
            deadlines=AgentDeadlines(30),
        )
        is None
    )
    with pytest.raises(RuntimeError, match="Unix socket"):
        agent_sandbox(
            GUARD,
            tmp_path,
            agent_python=AGENT_PYTHON,
            task_python=TASK_PYTHON,
            gateway_socket=None,
            deadlines=AgentDeadlines(30),
        )


def test_the_gateway_socket_is_removed_when_the_gateway_stops(tmp_path):
    gw = Gateway(unix_socket=str(tmp_path / "gw.sock"))
    gw.start()
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(str(tmp_path / "gw.sock"))
    sock.close()
    gw.stop()
    assert not (tmp_path / "gw.sock").exists()
