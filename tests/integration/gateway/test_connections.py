"""Per-provider connection limits (claimgrid.gateway.connections): the real gateway in front of
a loopback provider never has more calls in flight to it than ``--max-connections``, and
every real-provider call records how long it queued for a connection.
"""

from __future__ import annotations

import threading

from claimgrid.gateway import Gateway
from claimgrid.gateway.connections import Connections
from claimgrid.reference import registry


def test_calls_to_one_provider_never_exceed_max_connections(tasks, monkeypatch):
    from tests.fake_upstream import FakeUpstream
    from tests.test_gateway_support import http_turn, script

    inner = Gateway()
    inner.start()
    inner.register(
        "inner", script(next(iter(tasks.values())), model=registry.default_models()[0], max_model_calls=1000)
    )
    up = FakeUpstream(inner, "inner", lambda key, n: ("slow", 0.4)).start()
    monkeypatch.setenv("OPENAI_API_BASE", up.url)
    monkeypatch.setenv("OPENAI_API_KEY", "fake-upstream-key")
    conns = Connections(default=2)
    gw = Gateway(connections=conns)
    gw.start()
    try:
        model = "openai/gpt-4o-mini"
        tokens = [f"t{i}" for i in range(6)]
        for t in tokens:
            gw.register(t, script(next(iter(tasks.values())), model=model))
        threads = [
            threading.Thread(target=http_turn, args=(gw.url, t, model, [{"role": "user", "content": "go"}], False))
            for t in tokens
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        events = [gw.finish(t)[0][0] for t in tokens]
    finally:
        gw.stop()
        up.stop()
        inner.stop()
    assert all(e["status"] == 200 for e in events), [e["error"] for e in events]
    assert up.peak_in_flight == 2
    assert conns.facts()["peak"] == {"openai": 2}
    queued = sorted(e["queued_ms"] for e in events)  # recorded for every real-provider call
    # Six 0.4 s calls through two connections: at least four waited for one (how the first
    # two arrive depends on the machine's load, so no bound on them).
    assert sum(q >= 300 for q in queued) >= 4, queued
