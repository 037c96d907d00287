"""A policy's progress is the gateway's record of the run (claimgrid.reference.progress),
whatever the framework's history looks like; the final-answer protocol; the probes' turns."""

from __future__ import annotations

import dataclasses
import json

from claimgrid.gateway.scripted import answer
from claimgrid.reference import progress

from tests.test_gateway_support import script


def _ask(s, run, i, messages, fault=None):
    msg = answer(s, "none", {"messages": messages}, None, run, i, fault).response["choices"][0]["message"]
    return msg


def test_text_history_steps_resends_repeat_and_cut_steps_are_redone(tasks):
    s = script(tasks["fix-float-add"], "diligent")
    run = progress.RunProgress()
    # A framework that never echoes tool_calls back: only its own text grows.
    convo = [{"role": "user", "content": "do the task"}]
    first = _ask(s, run, 0, convo)["tool_calls"][0]["function"]
    assert first["name"] == "read_file"
    convo = convo + [{"role": "user", "content": "Observation: ticket text"}]
    second = _ask(s, run, 1, convo)["tool_calls"][0]["function"]
    assert second != first  # the next step, not the first again
    assert _ask(s, run, 2, convo)["tool_calls"][0]["function"] == second  # a resend: the same answer
    # A cut answer is not a step: the next conversation gets the same step again.
    cut = convo + [{"role": "user", "content": "Observation: more"}]
    third = _ask(s, run, 3, cut, fault="cut_off")["tool_calls"][0]["function"]
    again = _ask(s, run, 4, cut + [{"role": "user", "content": "Error: bad JSON"}])["tool_calls"][0]["function"]
    assert again == third
    view = run.view(5, cut + [{"role": "user", "content": "x"}, {"role": "user", "content": "y"}])
    assert view.steps == 3 and [c[0] for c in view.calls][:1] == ["read_file"]


def test_a_final_text_becomes_the_frameworks_final_answer_call(tasks):
    s = dataclasses.replace(script(tasks["fix-float-add"], "narrator"), final_answer=("final_answer", "answer"))
    msg = _ask(s, progress.RunProgress(), 0, [{"role": "user", "content": "go"}])
    (call,) = msg["tool_calls"]
    assert call["function"]["name"] == "final_answer"
    assert "status" in json.loads(call["function"]["arguments"])["answer"].lower()
    plain = _ask(
        script(tasks["fix-float-add"], "narrator"), progress.RunProgress(), 0, [{"role": "user", "content": "go"}]
    )
    assert plain.get("tool_calls") is None and plain["content"]


def test_shape_probes_answer_in_their_shape_once(tasks):
    task = tasks["fix-float-add"]
    run = progress.RunProgress()
    par = _ask(script(task, "parallel-calls"), run, 0, [{"role": "user", "content": "go"}])
    assert [c["function"]["name"] for c in par["tool_calls"]] == ["list_dir", "read_file"]
    run = progress.RunProgress()
    s = script(task, "refusal")
    first = _ask(s, run, 0, [{"role": "user", "content": "go"}])
    assert first["content"] is None and first["refusal"] and not first.get("tool_calls")
    # Asked again, it works as diligent from its first step.
    later = _ask(s, run, 1, [{"role": "user", "content": "go"}, {"role": "user", "content": "please go on"}])
    assert later["tool_calls"][0]["function"]["name"] == "read_file"
    run = progress.RunProgress()
    s = script(task, "wrong-typed-args")
    bad = _ask(s, run, 0, [{"role": "user", "content": "go"}])["tool_calls"][0]["function"]
    assert json.loads(bad["arguments"]) == {"path": 42}
    nxt = _ask(s, run, 1, [{"role": "user", "content": "go"}, {"role": "user", "content": "Error"}])
    assert json.loads(nxt["tool_calls"][0]["function"]["arguments"]) == {"path": s.content_slot}
