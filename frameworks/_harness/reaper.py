"""Every process of a run gone before anything of the run is read back (stdlib only).

An adapter process is a child subreaper (harness_runtime.harden_process): whatever the agent
starts, ``setsid`` and double-forked children included, stays its descendant however its
parents end, until the adapter itself exits. :func:`end_run` is called after the agent's
command has returned and before any file of the run is read (kit.run_agent, and
harness_runtime.run_one once ``adapter.run`` has returned, before the outcome is written):

* it stops (SIGSTOP, rescanning until no new one appears: a stopped process cannot fork) and
  then kills (SIGKILL) every descendant of this process, and, where the run has them, every
  process of the run's own uid and every process in the run's cgroups
  (``ctl["agent_sandbox"]``'s ``uid`` and ``cgroup_procs``: claimgrid.sandbox.slots);
* it reaps the zombies it adopted and waits until none of them is left (``REAP_WAIT_S``);
* it returns what it found, for the record: the mechanism that bounds the run (a pid
  namespace under the guard: bwrap's init ends and the kernel kills the rest; unguarded only
  this process's descendants, a weaker guarantee: a process re-parented away from this one
  before it became a subreaper, or started by another user, is out of its reach), how many
  it killed and whether any was still there at the end (then nothing may be read back:
  :class:`ProcessesLeft`).
"""

from __future__ import annotations

import os
import signal
import time

# How long the processes of a run may take to disappear once SIGKILLed (a process in
# uninterruptible sleep, e.g. on a slow disk, dies only when its I/O returns).
REAP_WAIT_S = 10.0
NOBODY = 65534


class ProcessesLeft(RuntimeError):
    """Processes of the run were still alive after ``REAP_WAIT_S``: nothing may be read back."""


def _stat(pid: str) -> tuple[int, str] | None:
    """(ppid, state) of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), fields[0].decode()
    except (IndexError, ValueError):
        return None


def _cgroup_pids(procs: list[str]) -> set[int]:
    out: set[int] = set()
    for path in procs:
        try:
            with open(path) as fh:
                out |= {int(p) for p in fh.read().split() if p.isdigit()}
        except OSError:
            continue
    return out


def run_processes(uid: int | None = None, cgroup_procs: list[str] | tuple[str, ...] = ()) -> set[int]:
    """Live processes of the run: descendants of this process, of ``uid`` (a run's own uid,
    never ``nobody`` or this process's), in ``cgroup_procs``; zombies left out."""
    me = os.getpid()
    parents: dict[int, int] = {}
    owned: set[int] = set()
    own_uid = uid is not None and uid not in (NOBODY, os.geteuid())
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = _stat(name)
        if st is None or st[1] in ("Z", "X"):
            continue
        parents[int(name)] = st[0]
        if own_uid:
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    owned.add(int(name))
            except OSError:
                continue
    found = set(owned) | (_cgroup_pids(list(cgroup_procs)) & set(parents))
    for pid in parents:
        p, seen = pid, 0
        while p > 1 and seen < 4096:
            p = parents.get(p, 0)
            seen += 1
            if p == me:
                found.add(pid)
                break
    found.discard(me)
    return found


def _reap_zombies() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_run(
    uid: int | None = None,
    cgroup_procs: list[str] | tuple[str, ...] = (),
    *,
    guarded: bool = False,
    wait_s: float = REAP_WAIT_S,
) -> dict:
    """Kill every process of the run and wait until none is left (module docstring); returns
    the record. Raises :class:`ProcessesLeft` when some outlived ``wait_s``."""
    t0 = time.time()
    killed: set[int] = set()
    deadline = time.monotonic() + wait_s
    while True:
        found = run_processes(uid, cgroup_procs)
        if not found:
            break
        for _ in range(20):  # stop first: a stopped process cannot fork a new one
            for pid in found:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except OSError:
                    pass
            more = run_processes(uid, cgroup_procs) - found
            if not more:
                break
            found |= more
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        killed |= found
        _reap_zombies()
        if time.monotonic() > deadline:
            left = sorted(run_processes(uid, cgroup_procs))
            if left:
                raise ProcessesLeft(
                    f"{len(left)} process(es) of the run still alive {wait_s:g} s after SIGKILL "
                    f"(pids {left[:10]}): nothing of the run is read back"
                )
            break
        time.sleep(0.01)
    _reap_zombies()
    return {
        "mechanism": (
            "pid namespace (bwrap --unshare-pid: its init's exit kills every process of the run), then "
            "this process's descendants"
            + (", the run's uid" if uid not in (None, NOBODY) else "")
            + (", the run's cgroup" if cgroup_procs else "")
        )
        if guarded
        else "descendants of the adapter (a child subreaper) only: no pid namespace, a weaker guarantee",
        "killed": len(killed),
        "left": 0,
        "ended_unix": round(time.time(), 4),
        "took_s": round(time.time() - t0, 4),
    }
