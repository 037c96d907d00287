"""mini-swe-agent's GatewayModel (frameworks/mini-swe-agent/gateway_model.py) on the wire.

It is mini-swe-agent's own OpenRouterModel with three things changed: the address (the run's
gateway), the key (``OPENAI_API_KEY``) and the per-call deadline (the run's, not its fixed 60 s);
mini.yaml's LiteLLM-only ``drop_params`` is not sent. Checked in the entry's own venv against a
local HTTP server that records each request; whole runs are the conformance suite's."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from claimgrid.inputs.venvs import ensure_venvs, load_venvs

pytestmark = pytest.mark.frameworks

ROOT = Path(__file__).resolve().parents[3]
SOURCE = ROOT / "frameworks" / "mini-swe-agent" / "gateway_model.py"
ENTRY = next(e for e in load_venvs().values() if e.is_cli and e.adapter.parent == SOURCE.parent)
SLOW_S = 4.0  # the slow request's answer comes this late; the deadline below is well under it
DEADLINE_S = 1.0
COMPLETION = {
    "id": "c1",
    "object": "chat.completion",
    "model": "agent-model",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})},
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}
# Run in the venv: GatewayModel from the file's text (its main() not run), one prompt per
# message of argv; prints each query's parsed actions or its exception's name, and its seconds.
PROBE = """
import json, runpy, sys, time
gm = runpy.run_path(sys.argv[1], run_name="gateway_model_probe")
model = gm["GatewayModel"](model_name="agent-model", gateway_url=sys.argv[2], call_timeout_s=float(sys.argv[3]),
                           model_kwargs={"drop_params": True, "temperature": 0})
for prompt in sys.argv[4:]:
    t0 = time.monotonic()
    try:
        out = [a["command"] for a in model.query([{"role": "user", "content": prompt}])["extra"]["actions"]]
    except Exception as e:
        out = type(e).__name__
    print(json.dumps({"prompt": prompt, "out": out, "s": time.monotonic() - t0}), flush=True)
"""


@pytest.fixture(scope="module")
def server():
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            if body["messages"][-1]["content"] == "slow":
                time.sleep(SLOW_S)
            data = json.dumps(COMPLETION).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up at its deadline

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_gateway_model_sends_to_the_run_gateway_with_its_key_and_deadline(server):
    ensure_venvs({ENTRY.name: ENTRY})
    url, seen = server
    env = {
        "PATH": "/usr/bin:/bin",
        "OPENAI_API_KEY": "run-key",
        "OPENROUTER_API_KEY": "not-this-one",
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "1",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_SILENT_STARTUP": "1",
        "HOME": "/tmp",
        "NO_COLOR": "1",
    }
    proc = subprocess.run(
        [str(ENTRY.venv_python), "-c", PROBE, str(SOURCE), url, str(DEADLINE_S), "quick", "slow"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    quick, slow = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
    assert quick["out"] == ["ls"], quick
    # The run's deadline, not OpenRouterModel's 60 s: the slow answer is never waited for.
    assert slow["out"] == "OpenRouterAPIError" and slow["s"] < SLOW_S, slow
    assert len(seen) == 2, seen  # one attempt each: no client retry
    for req in seen:
        assert req["path"] == "/v1/chat/completions", req
        assert req["auth"] == "Bearer run-key", req
        assert req["body"]["model"] == "agent-model", req
        assert "drop_params" not in req["body"] and req["body"]["temperature"] == 0, req
        assert [t["function"]["name"] for t in req["body"]["tools"]] == ["bash"], req
