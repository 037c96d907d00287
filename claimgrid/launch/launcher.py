"""Run one adapter process per run: fresh interpreter or forked from a warm parent.

The driver never imports framework code: it starts ``<venv python>`` on
``frameworks/_harness/run_adapter.py`` (fresh) or asks the framework's warm parent
(``warm_parent.py``, one per framework, started lazily, restarted if it died) to
fork a child. Either way the adapter process

* gets the control JSON over stdin / the warm parent's socket (never a file, never
  the environment: the run token stays in its memory),
* gets the write end of a tools pipe that the launcher drains concurrently,
* runs in its own session/process group with stdout/stderr going to
  ``<sandbox>/adapter.stdout`` / ``adapter.stderr``, in a clean environment,
* is killed with its whole tree at ``timeout_s``, and its leftovers are swept after it exits,
* is registered with the launcher's watchdog (watchdog.py) while it runs, so it dies with
  the driver however the driver ends (kill -9 included), like the warm parents and the
  temporary folders,
* is killed at once by ``Launcher.interrupt`` (Ctrl-C): its result says ``interrupted``.

The verifier's test runs are registered the same way (``Launcher.processes``), so Ctrl-C
and the watchdog reach them too.

``Launcher.launch`` is thread-safe and never raises for anything the adapter does:
crash, hang, garbage output, garbage outcome are all a ``LaunchResult``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from claimgrid import ROOT
from claimgrid.inputs.venvs import Entry, harness_env
from claimgrid.launch.control import check_control
from claimgrid.launch.fresh import run_fresh
from claimgrid.launch.handles import LaunchResult, ProcessRecord
from claimgrid.launch.kill import kill_tree
from claimgrid.launch.outcome import read_outcome, tail
from claimgrid.launch.pipe import PipeReader, WriteEnd
from claimgrid.launch.warm import WarmPool, WarmStartError, run_warm
from claimgrid.launch.watchdog import Watchdog

HARNESS_DIR = ROOT / "frameworks" / "_harness"
RUN_ADAPTER = HARNESS_DIR / "run_adapter.py"
WARM_PARENT = HARNESS_DIR / "warm_parent.py"
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
ISOLATIONS = ("warm", "fresh")


def adapter_env(entry: Entry, home: str, python: str, sandbox: str | None = None) -> dict:
    """The adapter's whole environment: no inherited variables, no keys unless opted in.

    The same for a fresh process and a warm child (and the warm parent that forks it):
    the harness's paths (``HOME`` = ``<sandbox>/home``), the one framework-neutral
    offline table (``venvs.harness_env``: ``frameworks/_harness/env.toml``, the kit's
    too), the entry's own ``env`` from ``venvs.toml`` with ``{sandbox}`` filled in, and the
    ``pass_env`` names that are set. ``sandbox`` defaults to ``home``'s folder (a warm
    parent's own folder)."""
    env = {
        "PATH": f"{Path(python).parent}:{SAFE_PATH}",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONPATH": f"{HARNESS_DIR}:{entry.adapter_dir}",
        "PYTHONUNBUFFERED": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "XDG_CACHE_HOME": os.path.join(home, ".cache"),
        "XDG_CONFIG_HOME": os.path.join(home, ".config"),
        "XDG_DATA_HOME": os.path.join(home, ".local", "share"),
        **harness_env(),
        **entry.env_for(sandbox or os.path.dirname(home)),
    }
    for name in entry.pass_env:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def _prepare_sandbox(ctl: dict) -> tuple[str, str]:
    sandbox = ctl["sandbox"]
    home = os.path.join(sandbox, "home")
    os.makedirs(home, exist_ok=True)
    os.chmod(home, 0o700)
    # The agent's commands may run as another user: they may traverse the sandbox to
    # reach their HOME but not list or write it (outcome, logs, adapter HOME live here).
    os.chmod(sandbox, 0o711)
    try:
        os.unlink(ctl["outcome_path"])  # a stale outcome must never pass for this run's
    except FileNotFoundError:
        pass
    return sandbox, home


def _status_fields(exit_code: int | None) -> tuple[int | None, str | None]:
    """Popen-style code (negative = signal) -> (exit_code, signal name)."""
    if exit_code is None:
        return None, None
    if exit_code < 0:
        try:
            return None, signal.Signals(-exit_code).name
        except ValueError:
            return None, str(-exit_code)
    return exit_code, None


class _Tracker:
    """In-flight adapter pids: registered with the watchdog and killable by ``interrupt``."""

    def __init__(self, watchdog: Watchdog):
        self.watchdog = watchdog
        self.pids: set[int] = set()
        self.lock = threading.Lock()
        self.interrupted = False

    def begin(self, pid: int) -> None:
        self.watchdog.watch_tree(pid)
        with self.lock:
            self.pids.add(pid)
            late = self.interrupted
        if late:
            kill_tree(pid)

    def end(self, pid: int) -> None:
        with self.lock:
            self.pids.discard(pid)
        self.watchdog.forget_tree(pid)

    def kill_all(self) -> int:
        with self.lock:
            self.interrupted = True
            pids = list(self.pids)
        return sum(kill_tree(pid) for pid in pids)


class Launcher:
    """Launches adapter runs for the frameworks in ``framework_entries``.

    ``python``: override the venv interpreter for every framework (tests use
    ``sys.executable`` with stdlib-only fake adapters). ``warm_start_timeout_s``:
    how long a warm parent may take to import its framework (a run waits for it only
    until its own timeout).
    """

    def __init__(
        self,
        framework_entries: dict[str, Entry],
        isolation: str = "warm",
        python: str | None = None,
        warm_start_timeout_s: float = 180.0,
    ):
        if isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {ISOLATIONS}, not {isolation!r}")
        self.entries = dict(framework_entries)
        self.isolation = isolation
        self.python_override = python
        self.watchdog = Watchdog()
        self._track = _Tracker(self.watchdog)
        self._warm = WarmPool(self.entries, self.watchdog, warm_start_timeout_s)
        self._pending: list[str] = []  # frameworks prewarm has yet to start, in order
        self._prewarm_lock = threading.Lock()
        self._prewarm_parallel: int | None = None  # set by prewarm
        self._prewarm_runner: threading.Thread | None = None

    def python_for(self, entry: Entry) -> str:
        return self.python_override or str(entry.venv_python)

    def watch_dir(self, path) -> None:
        """Have ``path`` removed if the driver dies before it removes it itself."""
        self.watchdog.watch_dir(path)

    def forget_dir(self, path) -> None:
        self.watchdog.forget_dir(path)

    def watch_group(self, path) -> None:
        """Have the cgroup ``path`` emptied and removed if the driver dies first (slots.py)."""
        self.watchdog.watch_group(path)

    def forget_group(self, path) -> None:
        self.watchdog.forget_group(path)

    @property
    def processes(self) -> _Tracker:
        """Where other in-flight processes of a run (the verifier's test run) are registered:
        ``begin(pid)``/``end(pid)``; the watchdog kills them with the driver, ``interrupt`` at once."""
        return self._track

    @property
    def interrupted(self) -> bool:
        """True once ``interrupt`` ran (Ctrl-C): whatever a run got since is not its result."""
        return self._track.interrupted

    def running_pids(self) -> list[int]:
        """The adapter processes in flight now (the scheduler reads their CPU: admission.py)."""
        with self._track.lock:
            return list(self._track.pids)

    def ready(self, framework: str) -> bool:
        """False only while ``framework``'s warm parent is alive and still preloading: a run
        started now would wait for it (the scheduler prefers another framework's cell)."""
        if self.isolation != "warm":
            return True
        with self._prewarm_lock:
            if framework in self._pending:
                return False  # prewarm has not started it yet
        wp = self._warm.parent(framework)
        return wp is None or not wp.alive() or wp.poll_ready()

    def warm_parent_pid(self, framework: str) -> int | None:
        wp = self._warm.parent(framework)
        return wp.proc.pid if wp is not None else None

    # ------------------------------------------------------------------ public

    def launch(self, framework: str, ctl: dict, timeout_s: float) -> LaunchResult:
        """Run one control object to completion (or timeout); never raises for adapter faults.
        A ``ctl`` that is not a declared ``Control`` is the caller's bug: ``ControlError``."""
        entry = self.entries[framework]  # an unknown name is the caller's bug: KeyError
        check_control(ctl)  # before anything of it is sent (frameworks/_harness/harness_control.py)
        sandbox, home = _prepare_sandbox(ctl)
        stdout_path = os.path.join(sandbox, "adapter.stdout")
        stderr_path = os.path.join(sandbox, "adapter.stderr")
        t0 = time.monotonic()
        if self._track.interrupted:
            rec = ProcessRecord(launch_error="grid interrupted before this run started")
            return self._result(ctl, rec, [], 0, t0, stdout_path, stderr_path)
        r, w_fd = os.pipe()
        reader = PipeReader(r)
        w = WriteEnd(w_fd)
        python = self.python_for(entry)
        try:
            if self.isolation == "fresh":
                cmd = [python, str(RUN_ADAPTER), "--adapter-dir", str(entry.adapter_dir), "--tools-fd", str(w.fd)]
                rec = run_fresh(
                    cmd,
                    adapter_env(entry, home, python, ctl["sandbox"]),
                    ctl,
                    timeout_s,
                    w,
                    home,
                    (stdout_path, stderr_path),
                    self._track,
                )
            else:
                rec = self._run_warm(entry, python, ctl, t0 + timeout_s, w, home)
        finally:
            w.close()  # our copy must go, or the reader never sees EOF
        tool_events = reader.finish()
        return self._result(ctl, rec, tool_events, reader.garbage, t0, stdout_path, stderr_path)

    def _result(self, ctl, rec: ProcessRecord, tool_events, garbage, t0, stdout_path, stderr_path) -> LaunchResult:
        outcome, status, problem = read_outcome(ctl["outcome_path"], ctl)
        exit_code, sig = _status_fields(rec.returncode)
        event = {
            "source": "process",
            "kind": "exit",
            "isolation": self.isolation,
            "exit_code": exit_code,
            "signal": sig,
            "wall_s": round(time.monotonic() - t0, 4),
            "timed_out": rec.timed_out,
            "outcome_status": status,
            "stderr_tail": rec.stderr_tail or tail(stderr_path),
            "pid": rec.pid,
            "killed_processes": rec.killed,
            "leftovers_killed": rec.leftovers,
            "cpu_s": rec.cpu_s,
        }
        if problem:
            event["outcome_problem"] = problem
        if garbage:
            event["tools_channel_garbage"] = garbage
        if rec.launch_error:
            event["launch_error"] = rec.launch_error
        return LaunchResult(
            outcome, status, tool_events, event, stdout_path, stderr_path, interrupted=self._track.interrupted
        )

    def interrupt(self) -> int:
        """Ctrl-C: kill every in-flight adapter now; later launches return at once,
        marked ``interrupted``. Returns how many processes were signalled."""
        return self._track.kill_all()

    def close(self) -> None:
        """Stop every warm parent (their running children are killed with them) and the watchdog."""
        self._warm.close()
        self.watchdog.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ warm

    def prewarm(self, parallel: int | None = None, names=None) -> None:
        """Start the frameworks' warm parents in the background, ``parallel`` preloading at a
        time (default: the CPU count); a no-op for ``fresh``. ``names``: only these frameworks
        now (default: every entry); :meth:`prewarm_more` adds one later (its venv just built).

        All of them at once on few cores makes every preload finish late (bench/throughput.py
        prints the first run's time). A few at a time, the first is ready sooner and its runs use
        the cores while the rest preload; ``ready`` says False for a parent not started yet,
        so the scheduler prefers a framework that is ready (claimgrid.execute.admission.next_cell).
        A run of a framework still waiting here starts its parent itself."""
        if self.isolation != "warm":
            return
        self._prewarm_parallel = max(1, parallel or os.cpu_count() or 1)
        with self._prewarm_lock:
            self._pending = list(self.entries if names is None else [n for n in self.entries if n in names])
            self._prewarm_runner = thread = self._new_prewarm_thread()
        thread.start()

    def prewarm_more(self, name: str) -> None:
        """Preload ``name``'s warm parent too, after those :meth:`prewarm` started (a no-op
        for ``fresh``, or before :meth:`prewarm`)."""
        if self.isolation != "warm" or self._prewarm_parallel is None or name not in self.entries:
            return
        if self._warm.parent(name) is not None:
            return  # started already (by prewarm, or by a run)
        with self._prewarm_lock:
            if name in self._pending:
                return
            self._pending.append(name)
            if self._prewarm_runner is not None:
                return  # the running loop takes it
            self._prewarm_runner = thread = self._new_prewarm_thread()
        thread.start()

    def _new_prewarm_thread(self) -> threading.Thread:
        return threading.Thread(
            target=self._prewarm_loop, args=(self._prewarm_parallel,), name="claimgrid-prewarm", daemon=True
        )

    def _start_parent(self, entry: Entry):
        """The framework's warm parent, started now if none is alive (WarmPool.get)."""
        python = self.python_for(entry)
        cmd = [python, str(WARM_PARENT), "--adapter-dir", str(entry.adapter_dir)]
        return self._warm.get(entry.name, cmd, lambda h, e=entry, p=python: adapter_env(e, h, p))

    def _preloading(self) -> int:
        """Warm parents alive and still importing their framework (whoever started them)."""
        parents = [self._warm.parent(name) for name in self.entries]
        return sum(1 for wp in parents if wp is not None and wp.alive() and not wp.poll_ready())

    def _prewarm_loop(self, parallel: int) -> None:
        while True:
            busy = self._preloading()
            with self._prewarm_lock:
                if not self._pending or self._track.interrupted:
                    self._prewarm_runner = None  # decided under the lock: prewarm_more starts another
                    return
                name = self._pending.pop(0) if busy < parallel else None
            if name is None:
                time.sleep(0.05)
                continue
            try:
                self._start_parent(self.entries[name])
            except WarmStartError:
                pass  # closed, or the first run of that framework reports it

    def _run_warm(self, entry: Entry, python: str, ctl: dict, t_end: float, w: WriteEnd, home: str) -> ProcessRecord:
        with self._prewarm_lock:  # started here, ahead of prewarm's turn for it
            if entry.name in self._pending:
                self._pending.remove(entry.name)
        try:
            wp = self._start_parent(entry)
            ready = wp.wait_ready(t_end)
        except WarmStartError as exc:
            return ProcessRecord(returncode=exc.exit_code, launch_error=str(exc), stderr_tail=exc.log_tail)
        if not ready:
            # The run's own time is up while its framework is still importing: a timeout,
            # never a crash; the parent goes on preloading for the next run.
            return ProcessRecord(
                timed_out=True,
                launch_error=f"warm parent for {entry.name} still preloading when the run's timeout expired",
                stderr_tail=tail(wp.log_path),
            )
        return run_warm(wp, ctl, adapter_env(entry, home, python, ctl["sandbox"]), home, t_end, w, self._track)
