"""Measure the gateway's per-call overhead: ``uv run bench/gateway.py``.

Serves reference model ``diligent`` (no upstream network), so the time is the gateway's
own: HTTP, JSON, the Router, the custom provider, the policy, the log. Reports the
median and p90 of the client-side round trip and of the gateway's own ``latency_ms``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from the repo


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench/gateway.py")
    parser.add_argument("-n", type=int, default=200, help="calls per client (default 200)")
    args = parser.parse_args(argv)

    import httpx
    import litellm

    from claimgrid.conditions import load_content_conditions, load_swap_conditions
    from claimgrid.tasks import load_tasks
    from claimgrid.gateway.script import RunScript
    from claimgrid.gateway.server import Gateway

    task = load_tasks()["fix-float-add"]
    content, swap = load_content_conditions()["clean"], load_swap_conditions()["none"]
    gw = Gateway()
    url = gw.start()
    messages = [{"role": "user", "content": task.spec.prompt}]

    def fresh_token():
        token = f"bench-{uuid.uuid4().hex}"
        gw.register(token, RunScript.for_cell(token, task, content, swap, "diligent", "reader",
                                              "builder", max_model_calls=10**9))
        return token

    def measure(label, call):
        token = fresh_token()
        for _ in range(10):  # warm-up: first calls build LiteLLM's lazy state
            call(token)
        rtt = []
        for _ in range(args.n):
            t0 = time.perf_counter()
            call(token)
            rtt.append((time.perf_counter() - t0) * 1000)
        events, _ = gw.finish(token)
        own = [e["latency_ms"] for e in events[10:]]
        print(f"{label:<22} client round trip median {statistics.median(rtt):6.2f} ms  p90 {_pct(rtt, .9):6.2f} ms"
              f" | gateway latency_ms median {statistics.median(own):6.2f}  p90 {_pct(own, .9):6.2f}")

    with httpx.Client(base_url=url, timeout=30) as client:
        def raw(token):
            r = client.post("/chat/completions", json={"model": "diligent", "messages": messages},
                            headers={"Authorization": f"Bearer {token}"})
            r.raise_for_status()
        measure("raw httpx (keep-alive)", raw)

    def via_litellm(token):
        litellm.completion(model="openai/diligent", api_base=url, api_key=token, messages=messages)
    measure("litellm.completion", via_litellm)
    gw.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
