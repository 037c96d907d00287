"""The driver's dead-man switch: kills registered process trees and removes registered
folders when the driver is gone, however it went (kill -9 included).

The driver starts one watchdog per ``Launcher`` (``Watchdog()``), in its own session so
a terminal's Ctrl-C does not reach it, with the read end of a pipe as its stdin. The
driver writes one line per change: ``+tree PID`` / ``-tree PID`` (an adapter process,
fresh or warm child, or a warm parent) and ``+dir PATH`` / ``-dir PATH`` (a temporary
folder). Only the driver holds the write end (not inheritable), so the watchdog reads
EOF exactly when the driver process is gone; it then SIGKILLs every registered tree
(``kill.kill_tree``: descendants, session and group) and removes every registered
folder, and exits. ``+group PATH`` / ``-group PATH`` name a run's cgroup
(claimgrid/sandbox/slots.py): on EOF its processes are SIGKILLed and the group removed.
Every scratch folder of a node lives in its registered work folder (the verifier's
included), so EOF leaves nothing of the driver's behind. A clean driver forgets what it
cleaned itself, so EOF after a normal exit finds nothing left to do.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


class Watchdog:
    """Driver side: start the watchdog process and keep it informed (thread-safe)."""

    def __init__(self):
        r, w = os.pipe()  # both non-inheritable: no adapter ever holds the write end
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", __file__],
                stdin=r,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
                env={"PATH": "/usr/bin:/bin"},
            )
        finally:
            os.close(r)
        self._w: int | None = w
        self._lock = threading.Lock()

    def _send(self, line: str) -> None:
        with self._lock:
            if self._w is None:
                return
            try:
                os.write(self._w, (line + "\n").encode())
            except OSError:
                pass  # the watchdog died: the launcher still cleans up on a normal exit

    def watch_tree(self, pid: int) -> None:
        self._send(f"+tree {pid}")

    def forget_tree(self, pid: int) -> None:
        self._send(f"-tree {pid}")

    def watch_dir(self, path) -> None:
        self._send(f"+dir {os.fspath(path)}")

    def forget_dir(self, path) -> None:
        self._send(f"-dir {os.fspath(path)}")

    def watch_group(self, path) -> None:
        self._send(f"+group {os.fspath(path)}")

    def forget_group(self, path) -> None:
        self._send(f"-group {os.fspath(path)}")

    def close(self) -> None:
        """EOF: the watchdog cleans whatever is still registered, then exits."""
        with self._lock:
            w, self._w = self._w, None
        if w is not None:
            os.close(w)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # kill.py alone (stdlib only), not the claimgrid package: its imports would cost a second
    # of CPU exactly when the driver is gone and the machine is busy.
    spec = importlib.util.spec_from_file_location("_cg_kill", Path(__file__).with_name("kill.py"))
    assert spec is not None and spec.loader is not None  # a .py path always has a source loader
    kill = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kill)
    kill_tree = kill.kill_tree
    # The same way, claimgrid/anybytes.py (stdlib only): removes a tree of any depth.
    spec = importlib.util.spec_from_file_location("_cg_anybytes", Path(__file__).parent.parent / "anybytes.py")
    assert spec is not None and spec.loader is not None
    anybytes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(anybytes)

    trees: dict[int, None] = {}
    dirs: dict[str, None] = {}
    groups: dict[str, None] = {}
    for raw in sys.stdin.buffer:
        op, _, arg = raw.decode(errors="replace").rstrip("\n").partition(" ")
        if op == "+tree":
            trees[int(arg)] = None
        elif op == "-tree":
            trees.pop(int(arg), None)
        elif op == "+dir":
            dirs[arg] = None
        elif op == "-dir":
            dirs.pop(arg, None)
        elif op == "+group":
            groups[arg] = None
        elif op == "-group":
            groups.pop(arg, None)
    for pid in trees:
        kill_tree(pid)
    for path in groups:
        _remove_group(path)
    for path in dirs:
        anybytes.remove_tree(path)
    return 0


def _remove_group(path: str) -> None:
    """Kill what is left in a run's cgroup and remove it (slots.remove_group, stdlib only here)."""
    import time

    for _ in range(100):
        try:
            with open(os.path.join(path, "cgroup.procs")) as fh:
                pids = fh.read().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main())
