"""How close the grid runs to the machine's floor, and where the rest of the CPU goes.

    uv run bench/throughput.py                      # the full default matrix
    uv run bench/throughput.py --repeats 6          # a long grid: runs/s per 500 runs, memory
    uv run bench/throughput.py -- --frameworks langgraph --tasks fix-float-add   # any grid.py run flags

Two grids run through ``grid.py run`` as subprocesses, each in its own cgroup (``CpuGroup``;
else reaped with ``wait4``) so its CPU covers the driver and every process it started (gateway thread, warm parents and the
runs they forked, verifier sandboxes, git):

1. a one-off grid (one cell per framework): start-up, venv checks, warm-parent preloads;
2. the measured grid (the default matrix unless flags are given).

From the measured grid's evidence: each run's CPU (``process.cpu_s``, the forked run's
user+system CPU from ``wait4`` in the warm parent) minus the harness tool layer's CPU inside
it (``tools.harness_cpu_s``) is the frameworks' own CPU per run; the **floor** is the runs/s
the machine's cores would give if the harness cost nothing. The rest is the harness:
gateway thread (``meta.cpu.gateway_thread_s``), the driver's other threads (runner,
verifier, store), other processes (verifier sandboxes, git, warm parents), and the tool
layer. The one-off grid's harness CPU is shown apart and not charged per run.

Prints a table, runs/s per 500 runs and the process tree's memory over time, and last,
exactly: ``floor F runs/s, matrix M runs/s (P% of floor), harness CPU per run H s (S% of total)``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimgrid.procstat import stat_fields  # noqa: E402
from claimgrid.store import LedgerFolder  # noqa: E402 - the store's one reader of a ledger folder


def _rollup_kb(pid: int) -> dict[str, int]:
    """``/proc/PID/smaps_rollup``'s sizes in kB (``Pss``, ``Private_Dirty``, ...); {} when gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            return {
                parts[0].rstrip(":"): int(parts[1])
                for parts in (line.split() for line in fh)
                if len(parts) == 3 and parts[2] == "kB"
            }
    except (OSError, ValueError):
        return {}


def _pss_kb(pid: int) -> int | None:
    return _rollup_kb(pid).get("Pss")


def _uss_kb(pid: int) -> int:
    """Private memory (what the process alone holds: freed when it exits)."""
    r = _rollup_kb(pid)
    return r.get("Private_Clean", 0) + r.get("Private_Dirty", 0)


def _framework_of(cmdline: bytes) -> str | None:
    """The framework a warm parent serves: its ``--adapter-dir`` folder's name."""
    args = cmdline.split(b"\0")
    for i, arg in enumerate(args[:-1]):
        if arg == b"--adapter-dir":
            return os.fsdecode(os.path.basename(args[i + 1].rstrip(b"/")))
    return None


def _tree_memory(root_pid: int, per_framework: dict | None = None) -> tuple[float, list[float]]:
    """PSS of ``root_pid`` and all its descendants, in MB; and the PSS of each forked run
    in flight (a child of a warm parent), in MB. With ``per_framework`` (a dict), each warm
    parent's own PSS and each forked run's PSS and private memory (USS, its tool commands
    included) are appended under the framework's name: ``{name: {"parent": [...], "run": [...],
    "run_uss": [...]}}`` in MB."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = stat_fields(f"/proc/{name}/stat")
            if fields:
                children.setdefault(int(fields[1]), []).append(int(name))
    total, runs, stack = 0, [], [root_pid]
    if per_framework is not None:  # the driver itself (grid.py: gateway, runner threads, store)
        per_framework.setdefault("", {"parent": [], "run": [], "run_uss": []})["parent"].append(
            (_pss_kb(root_pid) or 0) / 1024
        )
    while stack:
        pid = stack.pop()
        kids = children.get(pid, [])
        stack += kids
        total += _pss_kb(pid) or 0
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            cmdline = b""
        if b"warm_parent.py" in cmdline:  # its children are the runs it forked (their own tool commands are inside)
            mine = None
            if per_framework is not None:
                mine = per_framework.setdefault(_framework_of(cmdline) or "?", {"parent": [], "run": [], "run_uss": []})
                mine["parent"].append((_pss_kb(pid) or 0) / 1024)
            for kid in kids:
                run_total, run_uss, sub = 0, 0, [kid]
                while sub:
                    p = sub.pop()
                    sub += children.get(p, [])
                    run_total += _pss_kb(p) or 0
                    if mine is not None:
                        run_uss += _uss_kb(p)
                if not run_total:  # exited, being reaped (a zombie has no memory map): not a run in flight
                    continue
                runs.append(run_total / 1024)
                if mine is not None:
                    mine["run"].append(run_total / 1024)
                    mine["run_uss"].append(run_uss / 1024)
    return total / 1024, runs


class CpuGroup:
    """A cgroup holding ``grid.py`` and everything it starts, for the whole tree's CPU.

    ``wait4`` misses the CPU of every process that ran in a sandbox: bubblewrap's own init
    in the sandbox's pid namespace reaps the command but does not hand its CPU up to the
    process that waits for bwrap (measured 2026-11-30: a 0.39 s CPU loop reads 0.002 s
    through ``RUSAGE_CHILDREN`` when run under ``bwrap --unshare-pid``). A cgroup counts
    every descendant however it ends. cgroup v2 (``cpu.stat``) or v1 (``cpuacct``); where
    neither can be created (not root, read-only), ``usage_s`` is None and the bench falls
    back to ``wait4``, saying so.
    """

    def __init__(self):
        self.path, self.kind = None, None
        name = f"claimgrid-bench-{os.getpid()}-{time.monotonic_ns()}"
        for root, kind in (
            ("/sys/fs/cgroup", "v2"),
            ("/sys/fs/cgroup/unified", "v2"),
            ("/sys/fs/cgroup/cpuacct", "v1"),
        ):
            group = Path(root) / name
            try:
                group.mkdir()
            except OSError:
                continue
            if (group / ("cpu.stat" if kind == "v2" else "cpuacct.usage")).exists():
                self.path, self.kind = group, kind
                break
            group.rmdir()

    def enter(self) -> None:
        """Move the calling process into the group (a ``preexec_fn``: the child before exec)."""
        if self.path is not None:
            with open(self.path / "cgroup.procs", "w") as fh:
                fh.write("0")

    def usage_s(self) -> float | None:
        if self.path is None:
            return None
        try:
            if self.kind == "v1":
                return int((self.path / "cpuacct.usage").read_text()) / 1e9
            stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        except (OSError, KeyError, ValueError):
            return None

    def remove(self) -> None:
        if self.path is not None:
            try:
                self.path.rmdir()
            except OSError:  # a straggler still inside: the group stays, empty soon
                pass


def run_grid(out: Path, flags: list[str]) -> dict:
    """Run one grid; its wall time, its whole process tree's CPU (CpuGroup, else wait4) and memory samples."""
    cmd = [sys.executable, str(ROOT / "grid.py"), "run", "--out", str(out), "--no-progress", *flags]
    t0 = time.monotonic()
    group = CpuGroup()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=group.enter if group.path is not None else None,
    )
    started_unix = time.time()
    samples: list[tuple[float, float]] = []
    per_run: list[tuple[int, float]] = []  # (runs in flight, PSS of one of them)
    frameworks: dict = {}  # framework -> its warm parent's and forked runs' memory samples
    stop = threading.Event()

    def sample():
        while not stop.wait(2.0):
            tree, runs = _tree_memory(proc.pid, frameworks)
            samples.append((time.monotonic() - t0, tree))
            per_run.extend((len(runs), mb) for mb in runs)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    stop.set()
    sampler.join()
    waited_cpu = usage.ru_utime + usage.ru_stime
    tree_cpu = group.usage_s()
    group.remove()
    if proc.returncode != 0:
        raise SystemExit(f"grid.py run {' '.join(flags)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {
        "wall_s": time.monotonic() - t0,
        "cpu_s": tree_cpu if tree_cpu is not None else waited_cpu,
        "cpu_source": f"cgroup {group.kind}" if tree_cpu is not None else "wait4 (sandboxed processes missing)",
        "waited_cpu_s": waited_cpu,
        "memory": samples,
        "run_memory": per_run,
        "framework_memory": frameworks,
        "out": out,
        "started_unix": started_unix,
    }


def evidence(out: Path) -> dict:
    """Per-run CPU facts and completion times from a ledger folder."""
    ledger = LedgerFolder(out)
    meta = ledger.meta()
    runs, done_at = [], []
    for rec in [r.model_dump(mode="json") for r in ledger.runs()]:
        run_cpu = tool_cpu = None
        for ev in ledger.event_dicts(rec["run_id"]):
            if ev.get("source") == "process" and ev.get("kind") == "exit":
                run_cpu = ev.get("cpu_s")
            elif ev.get("source") == "tools" and isinstance(ev.get("harness_cpu_s"), (int, float)):
                tool_cpu = (tool_cpu or 0) + ev["harness_cpu_s"]
        t = rec.get("timings") or {}
        runs.append(
            {
                "framework": rec["framework"],
                "run_cpu": run_cpu,
                "tool_cpu": tool_cpu or 0.0,
                "ended_unix": (t["started_unix"] + t["wall_s"]) if "started_unix" in t else None,
            }
        )
        done_at.append((ledger.run_dir(rec["run_id"]) / "manifest.json").stat().st_mtime)
    return {"meta": meta, "runs": runs, "done_at": sorted(done_at)}


FRAMEWORK_ROW = "frameworks' own code (inside each run)"
TOTAL_ROW = "whole grid (grid.py and every process it started)"


def cpu_rows(grid: dict) -> tuple[dict[str, float], int]:
    """CPU seconds by where they went, for one grid run by ``run_grid``; and its run count."""
    ev = evidence(grid["out"])
    ends = [r["ended_unix"] for r in ev["runs"] if r["ended_unix"] is not None]
    grid.update(
        meta=ev["meta"], done_at=ev["done_at"], first_run_s=(min(ends) - grid["started_unix"]) if ends else None
    )
    cpu = ev["meta"].get("cpu") or {}
    gateway = cpu.get("gateway_thread_s") or 0.0
    driver_self = cpu.get("driver_self_s") or 0.0
    run_total = sum(r["run_cpu"] or 0 for r in ev["runs"])
    tools = sum(r["tool_cpu"] for r in ev["runs"])
    return {
        FRAMEWORK_ROW: run_total - tools,
        "harness tool layer (inside each run)": tools,
        "gateway thread (every model call)": gateway,
        "driver's other threads (runner, verifier, store)": driver_self - gateway,
        "other processes (sandboxed tests and commands, git, warm parents, ledger render)": grid["cpu_s"]
        - driver_self
        - run_total,
        TOTAL_ROW: grid["cpu_s"],
    }, len(ev["runs"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="repeats of the measured grid (default 1)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("grid_flags", nargs="*", help="grid.py run flags for the measured grid (after --)")
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1

    from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.inputs.tasks import in_suite, load_tasks
    from claimgrid.reference import registry

    clean = next(c.name for c in load_content_conditions().values() if c.carries is None)
    plain = next(s.name for s in load_swap_conditions().values() if s.unavailable_from_call < 0)
    task = next(iter(in_suite(load_tasks(), "default")))
    model = registry.default_models()[0]
    base = tempfile.mkdtemp(prefix="claimgrid-bench-throughput-")
    fw_flags = []  # the one-off grid keeps the measured grid's frameworks, one cell each
    for i, flag in enumerate(args.grid_flags):
        if flag == "--frameworks" and i + 1 < len(args.grid_flags):
            fw_flags = ["--frameworks", args.grid_flags[i + 1]]
        elif flag.startswith("--frameworks="):
            fw_flags = [flag]

    oneoff = run_grid(
        Path(base) / "oneoff",
        ["--tasks", task, "--content", clean, "--swap", plain, "--models", model, "--jobs", str(args.jobs), *fw_flags],
    )
    grid = run_grid(Path(base) / "grid", ["--jobs", str(args.jobs), "--repeats", str(args.repeats), *args.grid_flags])
    rows1, n1 = cpu_rows(oneoff)
    rows, n = cpu_rows(grid)
    if n <= n1:
        raise SystemExit("the measured grid must have more runs than the one-off grid")
    # Per run: the difference between the two grids over the difference in runs, so every
    # one-off cost (start-up, venv checks, preloads, first imports) cancels out.
    per_run = {name: (rows[name] - rows1[name]) / (n - n1) for name in rows}
    fw_per_run = per_run[FRAMEWORK_ROW]
    if fw_per_run <= 0:
        raise SystemExit("no run measured its CPU (process.cpu_s): --isolation fresh does not; use warm")
    harness_per_run = sum(v for k, v in per_run.items() if k not in (FRAMEWORK_ROW, TOTAL_ROW))
    total_per_run = per_run[TOTAL_ROW]
    wall = grid["meta"].get("wall_s") or grid["wall_s"]
    matrix_rps = n / wall
    floor_rps = cores / fw_per_run

    print(
        f"measured grid: {n} runs, {wall:.1f} s executing ({grid['wall_s']:.1f} s with start-up and "
        f"ledger), {cores} cores, --jobs {args.jobs}"
    )
    print(f"CPU measured by {grid['cpu_source']} (wait4 of grid.py alone: {grid['waited_cpu_s']:.1f} s)")
    print(
        f"one-off grid: {n1} runs, {oneoff['wall_s']:.1f} s, CPU {rows1[TOTAL_ROW]:.1f} s "
        "(start-up, venv checks, warm-parent preloads)"
    )
    first = [g.get("first_run_s") for g in (oneoff, grid)]
    if None not in first:
        print(
            f"start: first run finished {first[0]:.1f} s after `grid.py` started (one-off grid), "
            f"{first[1]:.1f} s (measured grid)"
        )
    sched = grid["meta"].get("scheduler") or {}
    if sched:
        print(
            f"scheduler: --jobs {sched.get('jobs')}, up to {sched.get('max_inflight')} in flight; "
            f"{sched.get('started_beyond_jobs')} runs started while others waited, peak {sched.get('peak_inflight')} in flight, "
            f"{sched.get('started_early_as_long')} started early as long"
        )
    print()
    print(f"{'where the CPU goes':<58}{'grid s':>9}{'one-off s':>10}{'per run s':>11}{'share':>8}")
    for name in rows:
        print(
            f"{name:<58}{rows[name]:>9.1f}{rows1[name]:>10.1f}{per_run[name]:>11.4f}"
            f"{100 * per_run[name] / max(total_per_run, 1e-9):>7.1f}%"
        )
    print("(per run = (grid - one-off) / (runs - one-off runs): one-off costs cancel)\n")

    times = grid["done_at"]
    if len(times) >= 1000:
        print(
            "runs/s per 500 runs:",
            " ".join(f"{500 / max(times[i + 499] - times[i], 1e-9):.2f}" for i in range(0, len(times) - 499, 500)),
        )
    mem = [m for _, m in grid["memory"]]
    if len(mem) >= 4:
        q = max(1, len(mem) // 4)
        print(
            f"process tree PSS: second quarter {sum(mem[q : 2 * q]) / q:.0f} MB, last quarter "
            f"{sum(mem[-q:]) / q:.0f} MB, peak {max(mem):.0f} MB ({len(mem)} samples; the first quarter "
            "holds the warm parents' preloads)"
        )
    run_mem = grid["run_memory"]
    if run_mem:
        sizes = sorted(mb for _, mb in run_mem)
        print(
            f"memory per forked run in flight (PSS, its tool commands included): median {sizes[len(sizes) // 2]:.0f} MB, "
            f"max {sizes[-1]:.0f} MB ({len(sizes)} samples; up to {max(k for k, _ in run_mem)} children of warm parents "
            "at once, runs being reaped included)"
        )
    fw_mem = grid["framework_memory"]
    if fw_mem:

        def med(xs):
            return sorted(xs)[len(xs) // 2] if xs else float("nan")

        print(
            "memory per framework (MB; medians over the samples, max in brackets): warm parent PSS, "
            "forked run PSS, forked run private (USS)"
        )
        driver = fw_mem.pop("", {}).get("parent") or []
        if driver:
            print(f"  {'grid.py (driver)':<16} PSS {med(driver):6.0f} ({max(driver):4.0f})")
        for name in sorted(fw_mem):
            m = fw_mem[name]
            print(
                f"  {name:<16} parent {med(m['parent']):6.0f} ({max(m['parent'], default=0):4.0f})   "
                f"run {med(m['run']):5.0f} ({max(m['run'], default=0):4.0f})   "
                f"run private {med(m['run_uss']):5.0f} ({max(m['run_uss'], default=0):4.0f})   "
                f"{len(m['run'])} run samples"
            )
    print(
        f"floor {floor_rps:.2f} runs/s, matrix {matrix_rps:.2f} runs/s ({100 * matrix_rps / floor_rps:.0f}% of floor), "
        f"harness CPU per run {harness_per_run:.3f} s ({100 * harness_per_run / total_per_run:.0f}% of total)"
    )
    if not args.grid_flags and args.repeats == 1:  # the default matrix: the table's figure
        from _figures import record  # bench/, the script's own folder

        record(
            "throughput.py",
            {
                "default matrix": f"{n:,} runs in {wall:.0f} s executing; {matrix_rps:.2f} runs/s, "
                f"{100 * matrix_rps / floor_rps:.0f}% of the machine's floor ({floor_rps:.2f} runs/s)",
                "harness CPU per run": f"{harness_per_run:.3f} s ({100 * harness_per_run / total_per_run:.0f}% of the total)",
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
