"""How the grid tells llama-server what to serve, and how ``--model-server URL`` and
``server/<model id>`` are checked before anything starts: one line each, naming the flag."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from claimgrid import localmodel
from claimgrid.commands import validate as V
from claimgrid.errors import ClaimgridError
from claimgrid.localmodel import probe
from claimgrid.localmodel.catalog import LocalModel
from claimgrid.localmodel.lifecycle import _argv


def _entry(template: str) -> LocalModel:
    return LocalModel.model_validate(
        {
            "weights": {"path": "m.gguf"},
            "template": template,
            "context": 2048,
            "threads": 1,
            "seed": 7,
            "temperature": 0.5,
            "max_output_tokens": 64,
        }
    )


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_entry_becomes_llama_servers_flags():
    argv = _argv(Path("/bin/llama-server"), Path("/w/m.gguf"), _entry("gguf"), 3, Path("/k/key"))
    assert (
        _flag(argv, "--ctx-size") == str(2048 * 3) and _flag(argv, "--parallel") == "3"
    )  # each slot: the whole context
    assert _flag(argv, "--host") == "127.0.0.1" and _flag(argv, "--port") == "0"
    assert (_flag(argv, "--seed"), _flag(argv, "--temp"), _flag(argv, "--threads")) == ("7", "0.5", "1")
    assert _flag(argv, "--api-key-file") == "/k/key" and "--api-key" not in argv  # the key is in no argv
    assert "--jinja" in argv and "--chat-template" not in argv  # the GGUF's own template, tool calls parsed
    builtin = _argv(Path("/bin/llama-server"), Path("/w/m.gguf"), _entry("gemma"), 1, Path("/k/key"))
    assert _flag(builtin, "--chat-template") == "gemma" and "--no-jinja" in builtin and "--jinja" not in builtin


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080", "https://models.example:443/v1", "http://host/"])
def test_model_server_url_accepted(url):
    assert V.server_url(url) == url.rstrip("/")


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8080", "ftp://h", "http://", "http://h:0", "http://h:x", "http://h/?a=1", ""]
)
def test_model_server_url_refused_with_an_example(url):
    with pytest.raises(argparse.ArgumentTypeError, match="http://127.0.0.1:8080"):
        V.server_url(url)


def test_server_models_and_the_flag_go_together():
    with pytest.raises(ClaimgridError, match="needs --model-server URL"):
        localmodel.check_server(["server/llama3.1", "reader"], None)
    with pytest.raises(ClaimgridError, match="--models server/<model id>"):
        localmodel.check_server(["reader"], "http://127.0.0.1:8080")
    with pytest.raises(ClaimgridError, match="give the model id"):
        localmodel.check_server(["server/"], "http://127.0.0.1:8080")
    assert localmodel.check_server(["server/a", "local/x", "server/a"], "http://h") == ["server/a"]
    assert localmodel.is_local("server/a") and localmodel.is_local("local/x") and not localmodel.is_local("openai/x")
    assert localmodel.check(["server/a"]) == {}  # no catalog entry is looked up for it


def test_what_a_server_did_not_say_is_unknown_and_parity_still_reads():
    facts = {
        "name": "m",
        "engine": {"name": "ollama", "version": "0.9.0", "llama_cpp_commit": None},
        "weights": {"file": None, "sha256": None, "bytes": None},
        "template": {"name": None, "sha256": "ab" * 32, "probe_sha256": None},
        "context": 8192,
        "threads": None,
        "speed": {"prompt_tokens_per_s": 1.0},
    }
    assert probe.unknown(facts) == [
        "engine.llama_cpp_commit",
        "weights.file",
        "weights.sha256",
        "weights.bytes",
        "template.name",
        "template.probe_sha256",
        "threads",
    ]
    parity = localmodel.parity_facts(facts)
    assert parity["engine"] == "ollama 0.9.0" and parity["weights_sha256"] is None and parity["context"] == 8192
