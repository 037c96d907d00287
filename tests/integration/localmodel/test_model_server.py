"""The local model server for real (the local-model extra's engine and weights): its HTTP
face, its key (only the gateway's deployment holds it: anything else is refused), real token
counts, the seed rule, and no orphan however the driver ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from claimgrid import ROOT, localmodel

from tests import extras
from tests import loopback_http

MODEL = "local/smollm2-135m"  # the shipped catalog's first entry is the CI model
extras.need("local-model", "llama_cpp_py_sync")
pytestmark = pytest.mark.timeout(400)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    }
]


@pytest.fixture(scope="module")
def served():
    [server] = localmodel.serve([MODEL], jobs=1)
    yield server
    server.stop()
    assert server.proc.poll() is not None


def _key(served) -> dict:
    return {"authorization": f"Bearer {served.api_key}"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().split(")")[-1].split()[0] != "Z"


def test_health_models_and_provenance(served):
    assert loopback_http.get(served.api_base.removesuffix("/v1") + "/health").json() == {"status": "ok"}
    listed = loopback_http.get(served.api_base + "/models", headers=_key(served)).json()["data"]
    assert [m["id"] for m in listed] == [MODEL.split("/", 1)[1]]
    facts = served.facts()
    assert len(facts["weights"]["sha256"]) == 64 and facts["engine"]["version"] == "0.11739"
    assert len(facts["engine"]["llama_cpp_commit"]) == 40 and len(facts["template"]["sha256"]) == 64
    assert facts["speed"]["prompt_tokens_per_s"] > 0 and facts["speed"]["generation_tokens_per_s"] > 0
    assert served.deadline["seconds"] > 0 and "tok/s" in served.deadline["rule"]


def test_chat_completion_real_usage_cap_and_seed(served):
    body = {
        "model": "x",
        "messages": [{"role": "user", "content": "Say hello."}],
        "tools": TOOLS,
        "max_tokens": 10_000,  # over the entry's cap: the cap wins
        "seed": 42,
        "temperature": 0.9,
    }
    a = loopback_http.post(served.api_base + "/chat/completions", json=body, headers=_key(served), timeout=300).json()
    b = loopback_http.post(served.api_base + "/chat/completions", json=body, headers=_key(served), timeout=300).json()
    usage = a["usage"]
    assert usage["prompt_tokens"] > 20 and 0 < usage["completion_tokens"] <= served.entry.max_output_tokens
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert a["choices"][0]["message"]["content"] == b["choices"][0]["message"]["content"]  # same seed, same text
    assert a["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    if a["choices"][0]["message"].get("tool_calls"):
        assert a["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_and_bad_requests(served):
    body = {"model": "x", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True}
    with loopback_http.stream("POST", served.api_base + "/chat/completions", json=body, headers=_key(served),
                              timeout=300) as r:
        events = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant" and chunks[-1]["usage"]["completion_tokens"] <= 4
    url = served.api_base + "/chat/completions"
    assert loopback_http.post(url, content=b"{", headers=_key(served), timeout=30).status_code == 400
    assert loopback_http.post(url, json={"messages": []}, headers=_key(served), timeout=30).status_code == 400
    huge = {"messages": [{"role": "user", "content": "word " * 20_000}]}
    r = loopback_http.post(url, json=huge, headers=_key(served), timeout=300)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    # Through LiteLLM, as the gateway calls it: the refusal is read as the context-window limit.
    import litellm

    from claimgrid.gateway.retry import context_window_refusal

    with pytest.raises(Exception) as caught:
        litellm.completion(model="openai/local", api_base=served.api_base, api_key=served.api_key, messages=huge["messages"],
                           max_tokens=4, num_retries=0)
    assert context_window_refusal(caught.value) == served.entry.context


def test_a_request_without_the_servers_key_is_refused(served):
    """Anyone else on loopback (a run's agent whose commands are unguarded) gets a 401 on
    every route but /health, before the engine is reached; the key is on no command line."""
    body = {"model": "x", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    wrong = [{}, {"authorization": "Bearer local"}, {"authorization": f"Bearer {served.api_key}x"},
             {"authorization": served.api_key}, {"x-api-key": served.api_key}]
    for headers in wrong:
        for r in (loopback_http.post(served.api_base + "/chat/completions", json=body, headers=headers, timeout=30),
                  loopback_http.get(served.api_base + "/models", headers=headers, timeout=30),
                  loopback_http.get(served.api_base + "/nowhere", headers=headers, timeout=30)):
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", (headers, r.text)
            assert served.api_key not in r.text
    assert loopback_http.get(served.api_base.removesuffix("/v1") + "/health", timeout=30).status_code == 200
    ok = loopback_http.post(served.api_base + "/chat/completions", json=body, headers=_key(served), timeout=300)
    assert ok.status_code == 200, ok.text
    cmdline = open(f"/proc/{served.proc.pid}/cmdline", "rb").read()
    assert len(served.api_key) > 32 and served.api_key.encode() not in cmdline
    assert served.api_key not in repr(served) and served.api_key not in json.dumps(served.facts())


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_server_dies_with_its_driver(tmp_path, how):
    """A driver killed (SIGKILL: no cleanup code runs) leaves no server behind."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from claimgrid import localmodel
        [s] = localmodel.serve([{MODEL!r}], jobs=1)
        print(s.proc.pid, flush=True)
        time.sleep(600)
        """
    )
    driver = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    line = driver.stdout.readline()
    assert line.strip(), "the driver printed no server pid"
    pid = int(line)
    assert _alive(pid)
    driver.send_signal(getattr(signal, how))
    driver.wait(30)
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), f"the server {pid} outlived its driver killed by {how}"
