"""Measure the gateway's per-call cost: ``uv run bench/gateway.py``.

Serves reference model ``diligent`` (no upstream network), so the time is the gateway's
own: HTTP, JSON, the policy, the log, and on the ``router`` path LiteLLM's Router and
custom provider. Both reference paths run in one invocation:

- ``router``: every reference call through LiteLLM's Router (the path before the harness answered them);
- ``harness``: reference calls answered by claimgrid.gateway.scripted (the default).

Per path and swap (``none``; ``reported``, the Router's fallback): the client round trip
(median, p90), the gateway's own ``latency_ms`` (median), and the gateway serving
thread's CPU per call (Linux /proc), then the router/harness CPU ratio. ``--startup``
adds the CPU of a fresh interpreter that starts a gateway and serves one call, per path
(what every ``grid.py`` start pays).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from the repo

import claimgrid.gateway.offline  # noqa: E402,F401  (before any LiteLLM import: no cost-map download)

PATHS = ("router", "harness")
SWAPS = ("none", "reported")

STARTUP_PROBE = r"""
import resource, sys
import httpx
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.gateway import Gateway, RunScript
from claimgrid.reference.script import CallLimits
from claimgrid.inputs.tasks import load_tasks
task = load_tasks()["fix-float-add"]
gw = Gateway(reference_path=sys.argv[1]); url = gw.start()
gw.register("t", RunScript.for_cell("t", task, load_content_conditions()["clean"],
            load_swap_conditions()["none"], "diligent", "reader", "builder"))
r = httpx.post(url + "/chat/completions", json={"model": "diligent", "messages": [{"role": "user", "content": "go"}]},
               headers={"Authorization": "Bearer t"}, timeout=120)
assert r.status_code == 200, r.text
u = resource.getrusage(resource.RUSAGE_SELF)
print(f"{u.ru_utime + u.ru_stime:.3f} {int('litellm' in sys.modules)}")
gw.stop()
"""


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def _per_call(path: str, n: int, warmup: int) -> dict[str, dict]:
    """{swap: figures} for one reference path, on its own gateway."""
    import httpx

    from claimgrid.gateway.server import Gateway
    from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.inputs.tasks import load_tasks
    from claimgrid.reference.script import CallLimits, RunScript

    task = load_tasks()["fix-float-add"]
    content, swaps = load_content_conditions()["clean"], load_swap_conditions()
    messages = [{"role": "user", "content": task.spec.prompt}]
    gw = Gateway(reference_path=path)
    url = gw.start()
    out = {}
    with httpx.Client(base_url=url, timeout=30) as client:
        for swap in SWAPS:
            token = f"bench-{uuid.uuid4().hex}"
            gw.register(
                token,
                RunScript.for_cell(
                    token,
                    task,
                    content,
                    swaps[swap],
                    "diligent",
                    "reader",
                    "builder",
                    limits=CallLimits(max_model_calls=10**9),
                ),
            )

            def call(token=token):  # bound now: each swap registers its own token
                r = client.post(
                    "/chat/completions",
                    json={"model": "diligent", "messages": messages},
                    headers={"Authorization": f"Bearer {token}"},
                )
                r.raise_for_status()

            for _ in range(warmup):  # the swap starts at call 2; first calls build lazy state
                call()
            cpu0, rtt = gw.thread_cpu_s(), []
            for _ in range(n):
                t0 = time.perf_counter()
                call()
                rtt.append((time.perf_counter() - t0) * 1000)
            cpu1 = gw.thread_cpu_s()
            events, _ = gw.finish(token)
            assert {e["swap"] for e in events[warmup:]} == {swap}, "the measured calls must be swapped"
            own = [e["latency_ms"] for e in events[warmup:]]
            out[swap] = {
                "rtt_med": statistics.median(rtt),
                "rtt_p90": _pct(rtt, 0.9),
                "own_med": statistics.median(own),
                "cpu_ms": (cpu1 - cpu0) * 1000 / n if cpu0 is not None and cpu1 is not None else None,
            }
    gw.stop()
    return out


def _startup(path: str) -> tuple[float, bool]:
    proc = subprocess.run(
        [sys.executable, "-c", STARTUP_PROBE, path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    if proc.returncode:
        raise SystemExit(proc.stderr[-2000:])
    cpu, litellm = proc.stdout.split()
    return float(cpu), litellm == "1"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench/gateway.py")
    parser.add_argument("-n", type=int, default=300, help="measured calls per path and swap (default 300)")
    parser.add_argument(
        "--startup",
        action="store_true",
        help="also measure a fresh interpreter's CPU to start a gateway and serve one call",
    )
    args = parser.parse_args(argv)

    figures = {path: _per_call(path, args.n, warmup=10) for path in PATHS}
    for path in PATHS:
        for swap in SWAPS:
            f = figures[path][swap]
            cpu = f"{f['cpu_ms']:6.2f} ms" if f["cpu_ms"] is not None else "   n/a"
            print(
                f"{path:<8} swap {swap:<9} client round trip median {f['rtt_med']:6.2f} ms  p90 "
                f"{f['rtt_p90']:6.2f} ms | gateway latency_ms median {f['own_med']:6.2f} | "
                f"gateway CPU per call {cpu}"
            )
    for swap in SWAPS:
        r, h = figures["router"][swap]["cpu_ms"], figures["harness"][swap]["cpu_ms"]
        if r is not None and h:
            print(f"swap {swap:<9} gateway CPU per call: router {r:.2f} ms / harness {h:.2f} ms = {r / h:.1f}x")
    if args.startup:
        for path in PATHS:
            cpu, litellm = _startup(path)
            print(
                f"startup  {path:<8} fresh interpreter, gateway start + one call: {cpu:.2f} s CPU "
                f"(litellm imported: {'yes' if litellm else 'no'})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
