"""Attacks on the tool layer, in-process with the real bubblewrap guard: the path jail
(symlinks, absolute paths, a symlink-swap race) and run_command's sandbox (uid, python,
network, other runs' files, processes that outlive the command)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

from tests.integration.harness.test_harness_tools import GUARD, TASK_PYTHON, ht, make_kit


@pytest.fixture
def guarded(tmp_path):
    return make_kit(tmp_path, guarded=True)


def last(channel):
    return channel.events[-1]


# ---------------------------------------------------------------- path jail


def test_symlink_inside_the_workspace_is_followed_inside(guarded):
    ws, tools, channel = guarded
    os.symlink("src", ws / "code")  # relative, inside
    os.symlink(str(ws / "src" / "a.py"), ws / "abs.py")  # absolute, inside
    assert "return a - b" in tools["read_file"](path="code/a.py")
    assert "return a - b" in tools["read_file"](path="abs.py")
    assert "wrote" in tools["write_file"](path="code/b.py", content="x = 1\n")
    assert (ws / "src" / "b.py").read_text() == "x = 1\n"
    assert "return a - b" in tools["read_file"](path=str(ws / "src" / "a.py"))
    assert "return a - b" in tools["read_file"](path="/workspace/src/a.py")  # what run_command shows


@pytest.mark.parametrize(
    "path", ["../evil.txt", "/tmp/evil-cg.txt", "src/../../evil.txt", "out/evil.txt", "outfile", "deep/../out/x.txt"]
)
def test_writes_that_would_leave_the_workspace_are_refused(guarded, tmp_path, path):
    ws, tools, channel = guarded
    target = tmp_path / "outside"
    target.mkdir()
    (target / "outfile").write_text("keep\n")
    os.symlink(target, ws / "out")  # planted symlink to a folder outside
    os.symlink(target / "outfile", ws / "outfile")  # and to a file outside
    (ws / "deep").mkdir()
    result = tools["write_file"](path=path, content="pwned")
    assert result.startswith("ERROR:") and "outside the workspace" in result, result
    assert last(channel)["ok"] is False
    assert sorted(os.listdir(target)) == ["outfile"] and (target / "outfile").read_text() == "keep\n"
    assert not (tmp_path / "evil.txt").exists() and not os.path.exists("/tmp/evil-cg.txt")
    edit = tools["edit_file"](path="outfile", old="keep", new="pwned")
    assert edit.startswith("ERROR:") and (target / "outfile").read_text() == "keep\n"


def test_files_the_tools_create_belong_to_the_sandbox_user(guarded):
    ws, tools, channel = guarded
    tools["write_file"](path="new/deeper/f.txt", content="x")
    owner = os.stat(ws).st_uid
    assert os.stat(ws / "new").st_uid == os.stat(ws / "new" / "deeper" / "f.txt").st_uid == owner
    if os.geteuid() == 0:
        assert owner == 65534
    out = tools["run_command"](command="echo more >> new/deeper/f.txt && cat new/deeper/f.txt")
    assert "xmore" in out and last(channel)["exit_code"] == 0


def test_symlink_swap_race_writes_nothing_outside(tmp_path):
    """A background loop swaps a folder and a symlink to an outside folder while the
    agent writes and reads through it: no write lands outside, no outside byte is read."""
    ws, tools, channel = make_kit(tmp_path, guarded=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (ws / "d").mkdir()
    (ws / "d" / "secret.txt").write_text("inside\n")
    stop = threading.Event()
    swaps = 0

    def swapper():
        nonlocal swaps
        real, link, tmp = ws / "d", ws / "d.link", ws / "d.tmp"
        os.symlink(outside, link)
        while not stop.is_set():
            try:
                os.rename(real, tmp)  # d -> aside
                os.rename(link, real)  # symlink takes its place
                os.rename(real, link)  # and back
                os.rename(tmp, real)
                swaps += 1
            except OSError:
                # write_file created a fresh d/ in the gap: drop it and put the real one back.
                for _ in range(1000):
                    try:
                        if os.path.islink(real):
                            os.rename(real, link)
                        elif os.path.isdir(real) and os.path.isdir(tmp):
                            shutil.rmtree(real)
                        if os.path.isdir(tmp) and not os.path.lexists(real):
                            os.rename(tmp, real)
                    except OSError:
                        continue
                    if os.path.isdir(real) and os.path.islink(link) and not os.path.lexists(tmp):
                        break

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    attempts = writes_ok = leaked = 0
    deadline = time.monotonic() + 8  # bounded (the issue: <= 20 s)
    try:
        while time.monotonic() < deadline:
            attempts += 1
            if tools["write_file"](path="d/x.txt", content="race").startswith("wrote"):
                writes_ok += 1
            if "TOP SECRET" in tools["read_file"](path="d/secret.txt"):
                leaked += 1
    finally:
        stop.set()
        thread.join(5)
    assert swaps > 100 and attempts > 100, (swaps, attempts)
    assert sorted(os.listdir(outside)) == ["secret.txt"], "a write escaped the workspace"
    assert leaked == 0
    assert writes_ok > 0  # the tool still works between swaps (refusals are the rest)
    print(f"race: {attempts} attempts, {writes_ok} writes inside, {swaps} swaps, 0 escaped")


# ---------------------------------------------------------------- command sandbox


def test_python_in_the_sandbox_is_the_task_interpreter(guarded):
    ws, tools, channel = guarded
    out = tools["run_command"](
        command="python -c 'import sys; print(sys.prefix, sys.version_info[:2])'; "
        "python3 -c 'import sys; print(sys.prefix)'; id -u; pwd"
    )
    prefix = subprocess.run(
        [TASK_PYTHON, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True
    ).stdout.strip()
    lines = out.splitlines()
    assert lines[0].startswith(prefix + " ") and lines[1] == prefix, out
    assert lines[2] == ("65534" if os.geteuid() == 0 else str(os.geteuid()))
    assert lines[3] == "/workspace" and last(channel)["exit_code"] == 0


def test_no_network_from_inside(guarded):
    """Neither a loopback listener of the host (the gateway's kind) nor anything else is reachable."""
    ws, tools, channel = guarded
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        out = tools["run_command"](
            command=(
                "python3 - <<'PY'\nimport socket\n"
                f"for host, port in [('127.0.0.1', {port}), ('10.0.0.1', 80), ('1.1.1.1', 53)]:\n"
                "    s = socket.socket(); s.settimeout(2)\n"
                "    try:\n        s.connect((host, port)); print('CONNECTED', host)\n"
                "    except OSError as exc:\n        print('refused', host, exc.errno)\n"
                "PY"
            )
        )
        listener.settimeout(0.5)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert "CONNECTED" not in out and out.count("refused") == 3, out


def test_other_runs_and_the_harness_are_invisible(guarded, tmp_path):
    ws, tools, channel = guarded
    other = tmp_path / "other-run"
    other.mkdir()
    (other / "token.txt").write_text("tok-other")
    sandbox = tools["run_command"]._ctx.ctl["sandbox"]
    out = tools["run_command"](
        command=f"ls {other} {sandbox} 2>&1; cat {other}/token.txt 2>&1; "
        "ls /proc | grep -c '^[0-9]'; ls ..; cat /proc/1/environ 2>&1 | head -c 200"
    )
    assert "tok-other" not in out and "No such file" in out
    assert out.splitlines()[3] in {"2", "3", "4"}, out  # only the sandbox's own processes


def test_a_daemon_dies_with_its_command(guarded, tmp_path):
    """setsid/nohup leave no survivor: the pid namespace ends with the command."""
    ws, tools, channel = guarded
    marker = f"cg-daemon-{os.getpid()}-{time.monotonic_ns()}"
    out = tools["run_command"](
        command=(
            f"(setsid sh -c 'sleep 1.5; echo {marker} > late-setsid.txt; exec -a {marker} sleep 60' &) ; "
            f"nohup sh -c 'sleep 1.5; echo x > late-nohup.txt; exec -a {marker} sleep 60' >/dev/null 2>&1 & "
            "echo started"
        )
    )
    assert "started" in out and last(channel)["exit_code"] == 0
    time.sleep(2.5)
    assert not (ws / "late-setsid.txt").exists() and not (ws / "late-nohup.txt").exists()
    survivors = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert survivors == []


def test_limits_apply(guarded):
    ws, tools, channel = guarded
    out = tools["run_command"](
        command="ulimit -f; ulimit -u; head -c 300M /dev/zero > big.bin; echo rc=$?; stat -c %s big.bin"
    )
    lines = out.splitlines()
    assert int(lines[0]) * 512 == GUARD.limits.fsize_bytes or int(lines[0]) * 1024 == GUARD.limits.fsize_bytes
    assert int(lines[1]) == GUARD.limits.nproc
    assert "rc=0" not in out and int(lines[-3]) <= GUARD.limits.fsize_bytes, out
    os.unlink(ws / "big.bin")


def test_unguarded_control_keeps_the_nobody_drop(tmp_path):
    ws, tools, channel = make_kit(tmp_path, guarded=False)
    assert tools["run_command"]._ctx.ctl["command_sandbox"] is None
    out = tools["run_command"](command="id -u; pwd")
    lines = out.splitlines()
    assert lines[0] == ("65534" if os.geteuid() == 0 else str(os.geteuid())) and lines[1] == str(ws)
    assert ht.CommandSandbox(None, str(ws), None, 5).guarded is False
