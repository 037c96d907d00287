"""An agent with its own tools (venvs.toml ``kind = "cli"``) run unguarded (``--guard off``: its
tools as the driver's user) is driven by reference models only: a real model on it is one line
naming the flag, exit 2, before anything is written or any model is reached. Under the guard
the whole agent is in the harness's sandbox, and the same selection passes the check."""

from __future__ import annotations

import pytest

from claimgrid.commands.cli import main
from claimgrid.inputs.venvs import load_venvs
from claimgrid.reference import registry

CLI_AGENTS = [name for name, e in load_venvs().items() if e.is_cli]
PYTHON = next(name for name, e in load_venvs().items() if not e.is_cli)
# A LiteLLM model string: never reached (the refusal comes first; no key is set).
REAL = "openai/claimgrid-test-not-a-reference-model"


@pytest.mark.skipif(not CLI_AGENTS, reason="venvs.toml has no kind = 'cli' entry")
@pytest.mark.parametrize("agent", CLI_AGENTS)
@pytest.mark.parametrize("flag", ["--models", "--substitute"])
def test_a_real_model_on_an_unguarded_agent_is_refused(agent, flag, tmp_path, capsys):
    assert not registry.is_reference(REAL)
    out = tmp_path / "grid"
    args = [
        "run",
        "--frameworks",
        f"{PYTHON},{agent}",
        "--out",
        str(out),
        "--no-progress",
        "--guard",
        "off",
        flag,
        REAL,
    ]
    if flag == "--substitute":
        args += ["--models", next(m for m in registry.default_models())]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--frameworks" in err[0] and agent in err[0] and REAL in err[0], err
    assert "unguarded" in err[0] and "guard on" in err[0] and "outside the harness's guard" not in err[0], err
    assert not out.exists()


@pytest.mark.skipif(not CLI_AGENTS, reason="venvs.toml has no kind = 'cli' entry")
def test_under_the_guard_a_real_model_may_drive_a_coding_agent():
    from claimgrid.commands.validate import check_unguarded_agents
    from claimgrid.sandbox.guard import Guard

    sel = type("Sel", (), {"frameworks": CLI_AGENTS, "all_models": [REAL]})()
    check_unguarded_agents(sel, load_venvs(), Guard(enabled=True, bwrap="/bwrap"))  # no refusal
    with pytest.raises(Exception, match="unguarded"):
        check_unguarded_agents(sel, load_venvs(), Guard(enabled=False, reason="--guard off"))
