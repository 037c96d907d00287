"""The Agno adapter, run for real: its venv, the harness launcher, the gateway's reference models.

Each run goes through ``claimgrid.launch.Launcher`` (a child forked from the Agno warm
parent) against ``claimgrid.gateway.Gateway``. Agno's ``Agent.run`` catches the run's
exception itself and returns ``RunStatus.error`` with the error's text as the content; these
tests pin that the adapter raises that status as the run's error instead of returning the
text as the agent's answer, and what Agno 3.1 itself does with bad tool-call JSON (a
finding: a version that behaves differently fails here on purpose).
"""

from __future__ import annotations

import pytest

from tests.framework_support import gateway, make_run_cell, warm_launcher  # noqa: F401

pytestmark = pytest.mark.frameworks

TIMEOUT_S = 120


@pytest.fixture(scope="module")
def launcher():
    yield from warm_launcher("agno")


@pytest.fixture
def run_cell(tmp_path, tasks, gateway, launcher):  # noqa: F811
    return make_run_cell("agno", tmp_path, tasks, gateway, launcher, TIMEOUT_S)


@pytest.mark.parametrize("model", ["transient-500", "looper"])
def test_a_refused_model_call_is_the_runs_error_never_its_answer(run_cell, model):
    """An HTTP 500 (Agno does not retry it: ``Model.retries`` 0) and the gateway's budget
    refusal of a run Agno never stops (it has no model-call limit) both end the run as
    ``AgnoRunError`` naming the model call's exception, with the gateway's own error text."""
    r = run_cell("fix-float-add", model, max_model_calls=6)
    statuses = [e["status"] for e in r["gateway"]]
    assert statuses[:-1] == [200] * (len(statuses) - 1) and statuses[-1] >= 400, statuses  # one refusal, no retry
    refusal = r["gateway"][-1]["error"]
    error = r["outcome"]["error"]
    assert error["type"] == "AgnoRunError" and error["message"] == f"ModelProviderError: {refusal}", error
    assert r["outcome"]["final_text"] is None and r["runtime_messages"] == []
    assert [e["type"] for e in r["runtime_errors"]] == ["AgnoRunError"]
    # Every served call is a runtime model call, attributed to the Agno agent.
    assert len(r["runtime_models"]) == len(statuses) - 1
    assert {e["agent"] for e in r["runtime_models"]} == {r["agent_name"]}


def test_bad_tool_call_json_goes_back_to_the_model_as_agnos_decode_error(run_cell):
    """Agno parses the arguments itself (``agno.utils.functions.get_function_call``); an
    unparseable string never reaches the tool, and the model gets Agno's error text."""
    r = run_cell("fix-float-add", "malformed")
    assert r["tools"] == [] and r["runtime_tools"] == []
    assert r["gateway"][1]["tool_results"][0].startswith("Error while decoding function arguments")
    assert r["outcome"]["error"] is None and r["outcome"]["final_text"]
