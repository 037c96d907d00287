"""Offline by default: importing and serving opens no socket beyond 127.0.0.1.

Runs in a fresh interpreter (LiteLLM's import-time fetches only happen once per process),
with every LITELLM_* variable removed so the gateway package must set the switches itself.
The gateway imports LiteLLM itself, lazily, on its first real-model call (a second
gateway on loopback plays the provider); the probe's own LiteLLM client comes after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = r"""
import json, socket
attempts = []
LOCAL = ("127.0.0.1", "localhost", "::1")

def _host(address):
    return address[0] if isinstance(address, tuple) else str(address)

_connect, _create, _getaddrinfo = socket.socket.connect, socket.create_connection, socket.getaddrinfo
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and _host(address) not in LOCAL:
        attempts.append(["connect", str(address)])
        raise OSError("network disabled by test")
    return _connect(self, address)
def create_connection(address, *a, **kw):
    if _host(address) not in LOCAL:
        attempts.append(["create_connection", str(address)])
        raise OSError("network disabled by test")
    return _create(address, *a, **kw)
def getaddrinfo(host, *a, **kw):
    if host not in LOCAL and host is not None:
        attempts.append(["getaddrinfo", str(host)])
        raise socket.gaierror("network disabled by test")
    return _getaddrinfo(host, *a, **kw)
socket.socket.connect, socket.create_connection, socket.getaddrinfo = connect, create_connection, getaddrinfo

import os, sys
from claimgrid.gateway import Gateway, RunScript
from claimgrid.inputs.tasks import load_tasks
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
import httpx
task = load_tasks()["write-status"]
cc, sc = load_content_conditions()["clean"], load_swap_conditions()
gw = Gateway(); url = gw.start()
msgs = [{"role": "user", "content": "go"}]
gw.register("ref", RunScript.for_cell("ref", task, cc, sc["reported"], "diligent", "reader", "reporter"))
b = httpx.post(url + "/chat/completions", json={"model": "diligent", "messages": msgs, "stream": True},
               headers={"Authorization": "Bearer ref"}, timeout=60)
lazy = "litellm" not in sys.modules  # reference calls only so far: LiteLLM not imported
gw.finish("ref")
upstream = Gateway(); upstream.start()
upstream.register("u", RunScript.for_cell("u", task, cc, sc["none"], "diligent", "reader", "reporter"))
os.environ["OPENAI_API_BASE"], os.environ["OPENAI_API_KEY"] = upstream.url, "u"
# reported swap into a real substitute: registering it builds the Router (imports LiteLLM)
gw.register("t", RunScript.for_cell("r", task, cc, sc["reported"], "diligent", "openai/gpt-4o-mini", "reporter"))
for _ in range(3):  # call 2: the Router's fallback path
    c = httpx.post(url + "/chat/completions", json={"model": "diligent", "messages": msgs},
                   headers={"Authorization": "Bearer t"}, timeout=60)
import litellm
a = litellm.completion(model="openai/diligent", api_base=url, api_key="t", messages=msgs)
events, _ = gw.finish("t")
gw.stop(); upstream.stop()
print("RESULT " + json.dumps({"attempts": attempts, "status": [e["status"] for e in events],
      "served": [e["served_model"] for e in events], "a": a.choices[0].message.tool_calls[0].function.name,
      "sse": b.text.rstrip().endswith("data: [DONE]"), "lazy": lazy}))
"""


def test_import_and_serve_without_network():
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["attempts"] == []
    assert result["status"] == [200, 200, 200, 200]
    assert result["served"] == ["diligent", "diligent", "openai/gpt-4o-mini", "openai/gpt-4o-mini"]
    assert result["a"] == "read_file" and result["sse"] is True and result["lazy"] is True
