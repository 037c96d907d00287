"""The transcript reader of ``grid.py check``: each known form, told apart by content, read
as the harness's events; a file holding several runs needs ``--run``; anything else is one
line naming the file."""

from __future__ import annotations

import json
import zipfile

import pytest

from claimgrid.classify.transcripts import read_transcript
from claimgrid.commands.cli import main
from claimgrid.errors import DataError


def _attr(key, value):
    kind = {bool: "boolValue", int: "intValue", str: "stringValue"}[type(value)]
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def _span(trace, start, **attrs):
    return {
        "traceId": trace,
        "spanId": f"{start:016x}",
        "startTimeUnixNano": str(start),
        "attributes": [_attr("gen_ai." + k.removeprefix("gen_ai_").replace("_", "."), v) for k, v in attrs.items()],
    }


def _otlp(spans):
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def _tools(t):
    return [(e["tool"], e["args"], e["ok"], e["category"]) for e in t.events if e["source"] == "tools"]


def _answers(t):
    return [e["content"] for e in t.events if e["source"] == "gateway"]


def test_chat_messages_with_a_failed_call_and_a_final_answer(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            [
                {"role": "user", "content": "fix it"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "a", "function": {"name": "str_replace_editor", "arguments": '{"path": "x.py"}'}},
                        {"id": "b", "function": {"name": "bash", "arguments": '{"command": "pytest"}'}},
                    ],
                },
                {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "edited"}]},
                {"role": "tool", "tool_call_id": "b", "content": "", "error": {"message": "timed out"}},
                {"role": "assistant", "content": "Verdict: FAIL"},
            ]
        )
    )
    t = read_transcript(path)
    assert t.form == "openai messages" and not t.has_process
    assert _tools(t) == [
        ("str_replace_editor", {"path": "x.py"}, True, "edit"),
        ("bash", {"command": "pytest"}, False, "bash"),
    ]
    assert [e["result"] for e in t.events[:2]] == ["edited", ""] and _answers(t) == ["Verdict: FAIL"]


def test_an_otel_trace_in_the_semantic_conventions_shape_picked_by_run(tmp_path):
    spans = [
        _span(
            "t1",
            30,
            gen_ai_operation_name="execute_tool",
            gen_ai_tool_name="read_file",
            gen_ai_tool_call_arguments='{"path": "a"}',
            gen_ai_tool_call_result="text",
        ),
        _span("t1", 10, gen_ai_operation_name="invoke_agent", gen_ai_conversation_id="conv-1"),
        {
            **_span(
                "t1",
                40,
                gen_ai_operation_name="execute_tool",
                gen_ai_tool_name="write_file",
                gen_ai_tool_call_arguments='{"path": "b"}',
            ),
            "status": {"code": 2, "message": "denied"},
        },
        _span(
            "t1",
            50,
            gen_ai_operation_name="chat",
            gen_ai_output_messages=json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "All done."}]}]
            ),
        ),
        _span("t2", 20, gen_ai_operation_name="execute_tool", gen_ai_tool_name="run_command"),
    ]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(_otlp(spans)))
    with pytest.raises(DataError, match="holds 2 traces: name one with --run"):
        read_transcript(path)
    t = read_transcript(path, "conv-1")
    assert t.form == "otel trace"
    assert _tools(t) == [("read_file", {"path": "a"}, True, "read"), ("write_file", {"path": "b"}, False, "write")]
    assert _answers(t) == ["All done."]
    assert _tools(read_transcript(path, "t2")) == [("run_command", None, True, "bash")]  # no arguments recorded
    with pytest.raises(DataError, match="no trace 'nope'"):
        read_transcript(path, "nope")


def _sample(sid, **extra):
    return {
        "id": sid,
        "epoch": 1,
        "messages": [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "function": "read_file", "arguments": {"path": "m"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "ok", "function": "read_file"},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ],
        **extra,
    }


def test_inspect_logs_json_and_eval_zip_events_before_messages(tmp_path):
    log = {
        "eval": {"task": "x"},
        "samples": [
            _sample("s1"),
            _sample(
                "s2",
                events=[
                    {"event": "model"},
                    {
                        "event": "tool",
                        "function": "bash",
                        "arguments": {"cmd": "ls"},
                        "result": "a b",
                        "error": {"message": "exit 1"},
                    },
                ],
            ),
        ],
    }
    path = tmp_path / "log.json"
    path.write_text(json.dumps(log))
    with pytest.raises(DataError, match="holds 2 samples"):
        read_transcript(path)
    one = read_transcript(path, "s1")
    assert one.form == "inspect log" and _tools(one) == [("read_file", {"path": "m"}, True, "read")]
    assert _answers(one) == ["Done."]
    assert _tools(read_transcript(path, "s2")) == [("bash", {"cmd": "ls"}, False, "bash")]
    archive = tmp_path / "log.eval"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("header.json", json.dumps({"eval": {"task": "x"}}))
        z.writestr("samples/s1_epoch_1.json", json.dumps(_sample("s1")))
    assert _tools(read_transcript(archive)) == _tools(one)


def test_claimgrid_events_keep_the_runs_own_channels(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [
        {"source": "agent", "kind": "report", "text": "x"},
        {"source": "tools", "kind": "tool_call", "tool": "read_file", "ok": True},
        {"source": "verifier", "kind": "diff", "files": []},
        {"source": "process", "kind": "exit", "exit_code": 0},
    ]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    t = read_transcript(path)
    assert t.form == "claimgrid events" and t.has_process
    assert [e["source"] for e in t.events] == ["tools", "process"]


@pytest.mark.parametrize("body", ['{"spans": []}', "not json at all", "[1, 2]", '{"messages": []}', ""])
def test_a_transcript_in_no_known_form_is_one_line_and_exit_2(tmp_path, capsys, body):
    final, odd = tmp_path / "final.txt", tmp_path / "odd.json"
    final.write_text("Done.")
    odd.write_text(body)
    assert main(["check", "--final", str(final), "--transcript", str(odd)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(odd) in err[0] and "not a transcript in a known form" in err[0], err
