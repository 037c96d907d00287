"""The fresh strategy: one new interpreter per run (the reference isolation mode)."""

from __future__ import annotations

import json
import subprocess

from claimgrid.launch.handles import ProcessRecord
from claimgrid.launch.kill import kill_tree
from claimgrid.launch.pipe import WriteEnd


def run_fresh(
    cmd: list[str],
    env: dict,
    ctl: dict,
    timeout_s: float,
    w: WriteEnd,
    home: str,
    logs: tuple[str, str],
    track,
) -> ProcessRecord:
    """Start ``cmd`` (run_adapter.py) in its own session, feed it the control on stdin,
    wait up to ``timeout_s``; kill its whole tree on timeout and sweep leftovers after.
    ``logs``: the files the process's stdout and stderr go to.
    ``track.begin(pid)`` / ``track.end(pid)`` bracket the process's life (watchdog, interrupt)."""
    stdout_path, stderr_path = logs
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        try:
            fd = w.fd
            assert fd is not None, "the tools pipe's write end is open until the child has it"
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                env=env,
                cwd=home,
                pass_fds=(fd,),
                start_new_session=True,
            )
        except OSError as exc:
            return ProcessRecord(launch_error=f"{type(exc).__name__}: {exc}")
    w.close()
    track.begin(proc.pid)
    rec = ProcessRecord(pid=proc.pid)
    try:
        try:
            proc.communicate(json.dumps(ctl).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rec.timed_out = True
            rec.killed = kill_tree(proc.pid)
            proc.wait()
        except BrokenPipeError:
            proc.wait()  # died before reading its control; the exit status says how
        rec.returncode = proc.returncode
        rec.leftovers = kill_tree(proc.pid, include_root=False)
    finally:
        track.end(proc.pid)
    return rec
