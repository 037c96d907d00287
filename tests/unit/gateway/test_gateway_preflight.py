"""preflight(): one clear line for a real model that cannot be served; reference names pass."""

from __future__ import annotations

import socket

import pytest

from claimgrid.commands.serve_gateway import demo_scripts
from claimgrid.errors import ClaimgridError
from claimgrid.gateway import REFERENCE_MODEL_NAMES, preflight


def test_reference_models_always_pass(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    preflight(list(REFERENCE_MODEL_NAMES))


def test_missing_key_is_one_line(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ClaimgridError) as exc:
        preflight(["diligent", "openai/gpt-4o-mini"])
    msg = str(exc.value)
    assert "\n" not in msg and "openai/gpt-4o-mini" in msg and "OPENAI_API_KEY" in msg


def test_unknown_provider_is_one_line():
    with pytest.raises(ClaimgridError) as exc:
        preflight(["not-a-provider-model"])
    assert "\n" not in str(exc.value) and "provider/model" in str(exc.value)


def test_unreachable_local_server_is_one_line(monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{port}")
    with pytest.raises(ClaimgridError) as exc:
        preflight(["ollama/llama3"])
    assert "\n" not in str(exc.value) and f"127.0.0.1:{port} is unreachable" in str(exc.value)


def test_reachable_local_server_passes(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{s.getsockname()[1]}")
        preflight(["ollama/llama3"])


def test_demo_tokens_cover_every_reference_model():
    scripts = demo_scripts()
    assert set(scripts) == {f"demo-{m}" for m in REFERENCE_MODEL_NAMES}
    assert {s.task_id for s in scripts.values()} == {"write-status"}
    assert {s.swap_name for s in scripts.values()} == {"none"}
