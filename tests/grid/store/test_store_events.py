"""The typed evidence events (claimgrid.store.events): one model per documented kind,
records of any version load, nothing is lost or coerced, one set of filters."""

import json
import warnings

import pytest
from pydantic import ValidationError

from claimgrid.classify import classifier as C
from claimgrid.classify.evidence import review_verdict
from claimgrid.inputs.conditions import load_content_conditions, load_swap_conditions
from claimgrid.inputs.tasks import in_suite, load_tasks
from claimgrid.reference import registry
from claimgrid.store import events as E
from claimgrid.store.lines import read_events, read_runs
from claimgrid.trace import format_trace

# One event of every documented (source, kind), as docs/CONTRACTS.md shows them.
DOCUMENTED = [
    (
        {
            "source": "tools",
            "kind": "tool_call",
            "seq": 0,
            "t": 0.12,
            "tool": "read_file",
            "category": "read",
            "args": {"path": "TICKET.md"},
            "ok": True,
            "error": None,
            "result": "ticket",
            "result_chars": 6,
            "changed_workspace": False,
            "changed_paths": [],
        },
        E.ToolCall,
    ),
    (
        {"source": "runtime", "kind": "tool_call", "agent": "builder", "tool": "read_file", "args": {}, "t": 0.1},
        E.RuntimeToolCall,
    ),
    (
        {
            "source": "runtime",
            "kind": "model_call",
            "agent": "builder",
            "model": "diligent",
            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            "t": 0.2,
        },
        E.RuntimeModelCall,
    ),
    (
        {"source": "runtime", "kind": "message", "agent": "builder", "role": "assistant", "text": "...", "t": 0.3},
        E.RuntimeMessage,
    ),
    (
        {
            "source": "runtime",
            "kind": "error",
            "agent": "builder",
            "type": "RateLimitError",
            "message": "...",
            "t": 0.4,
        },
        E.RuntimeErrorEvent,
    ),
    (
        {
            "source": "runtime",
            "kind": "limits",
            "turn_limit": None,
            "unit": "model calls",
            "enforced_by": "gateway",
            "max_model_calls": 40,
            "t": 0.0,
        },
        E.RuntimeLimits,
    ),
    (
        {
            "source": "runtime",
            "kind": "run_processes",
            "mechanism": "pid namespace",
            "killed": 1,
            "left": 0,
            "ended_unix": 1796418450.5,
            "took_s": 0.02,
            "t": 1.2,
        },
        E.RuntimeRunProcesses,
    ),
    (
        {
            "source": "agent",
            "kind": "report",
            "text": "Done.",
            "trace": {"status": "DONE", "tool_uses_count": 2, "tool_uses_breakdown": {"read_count": 2}},
            "trace_error": None,
        },
        E.AgentReport,
    ),
    (
        {
            "source": "gateway",
            "kind": "exchange",
            "call_index": 0,
            "t": 0.01,
            "stream": False,
            "requested_model": "agent-model",
            "assigned_model": "diligent",
            "served_model": "diligent",
            "reported_model": "agent-model",
            "swap": "none",
            "status": 200,
            "error": None,
            "latency_ms": 3.1,
            "usage": {"prompt_tokens": 120, "completion_tokens": 30},
            "cost_usd": None,
            "tool_calls": [{"id": "call_0", "name": "read_file", "arguments": '{"path": "TICKET.md"}'}],
            "content": None,
            "finish_reason": "tool_calls",
            "tool_results": [],
            "tool_result_ids": [],
            "messages_n": 2,
            "provider": {
                "model": "x",
                "attempts": 2,
                "retries": 1,
                "failed": False,
                "errors": [
                    {
                        "attempt": 1,
                        "status": 503,
                        "connection_error": False,
                        "error": "busy",
                        "transient": True,
                        "retry_after_s": None,
                        "wait_s": 0.5,
                        "latency_ms": 9.0,
                    }
                ],
            },
            "replay": {"request_sha256": "a", "recorded_sha256": "a", "match": True},
        },
        E.GatewayExchange,
    ),
    ({"source": "gateway", "kind": "in_flight", "call_index": 3, "t": 12.5, "open_s": 180.2}, E.GatewayInFlight),
    (
        {
            "source": "gateway",
            "kind": "agent_tool_call",
            "agent_side": True,
            "seq": 0,
            "tool": "read",
            "args": {"path": "TICKET.md"},
            "ok": True,
            "error": None,
            "result_chars": 6,
            "changed_workspace": False,
            "changed_paths": [],
        },
        E.AgentToolCall,
    ),
    (
        {
            "source": "verifier",
            "kind": "diff",
            "files": [{"path": "src/calculator.py", "status": "M", "added": 1, "removed": 1}],
            "empty": False,
            "error": None,
            "tree": "abc",
            "expected": "required",
        },
        E.Diff,
    ),
    ({"source": "verifier", "kind": "required_files", "missing": [], "content_mismatch": []}, E.RequiredFiles),
    (
        {
            "source": "verifier",
            "kind": "tests",
            "command": ["python", "-m", "unittest"],
            "exit_code": 0,
            "passed": True,
            "timed_out": False,
            "guard": True,
            "output_tail": "OK",
            "duration_s": 0.2,
            "cache": "hit",
            "cached": True,
            "cache_key": "k",
            "verified_by": "r0",
            "detail": "verified by the result of run r0",
        },
        E.Tests,
    ),
    ({"source": "verifier", "kind": "scope", "outside_allowed": [], "protected_touched": []}, E.Scope),
    (
        {
            "source": "verifier",
            "kind": "attacker_goal",
            "applicable": True,
            "achieved": False,
            "achieved_in_log": True,
            "detail": "...",
        },
        E.AttackerGoal,
    ),
    (
        {
            "source": "verifier",
            "kind": "legitimate_note",
            "applicable": True,
            "followed": True,
            "followed_in_log": True,
            "detail": "...",
        },
        E.LegitimateNote,
    ),
    (
        {
            "source": "verifier",
            "kind": "review",
            "applicable": True,
            "opened": ["app/auth.py"],
            "opened_by": {"app/auth.py": ["read_file"]},
            "required_opened": ["app/auth.py"],
            "verdict": "FAIL",
            "truth": "FAIL",
        },
        E.Review,
    ),
    (
        {
            "source": "verifier",
            "kind": "turn_changes",
            "after_call": 2,
            "before_call": 3,
            "t": 0.41,
            "changed": [{"path": "src/calculator.py", "change": "modified"}],
            "changed_n": 1,
            "reason": None,
        },
        E.TurnChanges,
    ),
    (
        {
            "source": "process",
            "kind": "exit",
            "isolation": "warm",
            "exit_code": 0,
            "signal": None,
            "wall_s": 1.5,
            "timed_out": False,
            "outcome_status": "ok",
            "stderr_tail": "",
            "pid": 7,
            "killed_processes": 0,
            "leftovers_killed": 0,
            "cpu_s": 0.4,
            "adapter_exception": None,
        },
        E.ProcessExit,
    ),
    ({"source": "process", "kind": "transcript_truncated", "reason": "line 7 is torn"}, E.TranscriptTruncated),
    (
        {
            "source": "external",
            "kind": "outcome",
            "outcome": "TESTS_FAIL",
            "form": "swebench-report",
            "why": "resolved: false",
            "path": "report.json",
            "reward": None,
            "passed": 3,
            "failed": 1,
        },
        E.ExternalOutcomeEvent,
    ),
    (
        {
            "source": "judge",
            "kind": "claim_reading",
            "model": "last-line-judge",
            "prompt_version": "claim-judge-1",
            "stance": "yes",
            "sentence": "Done.",
            "error": None,
            "answer": '{"stance": "yes", "sentence": "Done."}',
        },
        E.JudgeClaimReading,
    ),
]


@pytest.mark.parametrize("record, model", DOCUMENTED, ids=[m.__name__ for _, m in DOCUMENTED])
def test_every_documented_kind_has_its_model_and_round_trips(record, model):
    event = E.parse_event(record)
    assert type(event) is model
    assert event.model_dump() == record
    assert json.loads(event.model_dump_json()) == record


def test_every_model_of_a_kind_is_reached_by_its_source_and_kind():
    kinds = {(m.model_fields["source"].default, m.model_fields["kind"].default) for _, m in DOCUMENTED}
    assert kinds == set(E._KINDS), "a documented kind without a test record, or the reverse"


def test_fields_read_as_attributes_nested_records_too():
    def one(model):
        return E.parse_event(next(r for r, m in DOCUMENTED if m is model))

    gw, diff, report, review = one(E.GatewayExchange), one(E.Diff), one(E.AgentReport), one(E.Review)
    assert (gw.usage.prompt_tokens, gw.tool_calls[0].name, gw.provider.errors[0].status) == (120, "read_file", 503)
    assert diff.files[0].path == "src/calculator.py" and diff.files[0].added == 1
    assert report.trace.status == "DONE" and report.trace.tool_uses_breakdown == {"read_count": 2}
    assert report.trace.declares("tool_uses_count") and not report.trace.declares("git_evidence")
    goal, note = one(E.AttackerGoal), one(E.LegitimateNote)
    assert (goal.held, goal.held_in_log, note.held, note.held_in_log) == (False, True, True, True)
    assert review.opened_by == {"app/auth.py": ["read_file"]}


def test_an_older_record_loads_its_missing_keys_read_none_and_stay_missing():
    old = {"source": "gateway", "kind": "exchange", "call_index": 3, "status": 429}
    event = E.parse_event(old)
    assert event.served_model is None and event.provider is None and event.tool_calls is None
    assert event.model_dump() == old


def test_unknown_keys_are_kept_as_extras():
    record = {"source": "tools", "kind": "tool_call", "tool": "list_dir", "_line": 7, "added_later": {"a": [1]}}
    event = E.parse_event(record)
    assert event.model_extra == {"_line": 7, "added_later": {"a": [1]}}
    assert event.model_dump() == record


@pytest.mark.parametrize(
    "record, model",
    [
        ({"source": "runtime", "kind": "heartbeat", "agent": "builder", "beat": 3}, E.RuntimeEvent),
        ({"source": "verifier", "kind": "lint", "clean": True}, E.VerifierEvent),
        ({"source": "process", "kind": "oom"}, E.ProcessEvent),
        ({"source": "tools"}, E.ToolsEvent),
        ({"source": "telemetry", "kind": "tick", "n": 1}, E.Event),
        ({"kind": "exit"}, E.Event),
        ({}, E.Event),
        ({"source": 3, "kind": ["x"]}, E.Event),
    ],
)
def test_an_unknown_kind_is_its_sources_generic_event_never_an_error(record, model):
    event = E.parse_event(record)
    assert type(event) is model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the last case's source and kind are not strings: kept, with a warning
        assert event.model_dump() == record


def test_a_value_of_another_type_is_kept_as_written_never_coerced():
    record = {
        "source": "tools",
        "kind": "tool_call",
        "tool": "write_file",
        "ok": "yes",
        "seq": 1.5,
        "changed_paths": "a.txt",
    }
    event = E.parse_event(record)
    assert type(event) is E.ToolCall
    assert (event.ok, event.seq, event.changed_paths, event.tool) == ("yes", 1.5, "a.txt", "write_file")
    gw = E.parse_event(
        {
            "source": "gateway",
            "kind": "exchange",
            "status": "200",
            "tool_calls": [{"id": 1, "name": "read_file", "arguments": "{}"}],
            "usage": [],
        }
    )
    assert gw.status == "200" and gw.usage == []  # "200" is not 200: never coerced
    assert gw.tool_calls[0].id == 1 and gw.tool_calls[0].name == "read_file"  # only the bad field stays raw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydantic warns when it dumps a value of another type
        assert event.model_dump() == record


def test_events_are_frozen():
    event = E.parse_event(DOCUMENTED[0][0])
    with pytest.raises(ValidationError):
        event.ok = False


def test_an_empty_record_is_falsy_as_the_empty_object_is():
    gw = E.parse_event({"source": "gateway", "kind": "exchange", "usage": {}, "provider": {"failed": False}})
    assert not gw.usage and gw.provider and gw
    assert not C.provider_failed([gw])


def test_parse_events_keeps_order_and_returns_parsed_events_as_they_are():
    records = [r for r, _ in DOCUMENTED]
    parsed = E.parse_events(records)
    assert [e.model_dump() for e in parsed] == records
    assert E.parse_events(parsed) is parsed
    assert E.parse_events(list(parsed)) == parsed
    with pytest.raises(TypeError, match="JSON object"):
        E.parse_event(["not", "an", "event"])


def test_the_filters():
    parsed = E.parse_events([r for r, _ in DOCUMENTED] + [{"source": "verifier", "kind": "lint"}])
    assert [e.kind for e in E.by_source(parsed, "runtime")] == [
        "tool_call",
        "model_call",
        "message",
        "error",
        "limits",
        "run_processes",
    ]
    assert [type(e) for e in E.of_kind(parsed, E.ToolCall)] == [E.ToolCall]
    assert len(E.of_kind(parsed, E.VerifierEvent)) == 9  # every verifier event, the unknown kind too
    assert E.of_kind(parsed, E.Event) == parsed
    assert E.last(parsed, E.VerifierEvent).kind == "lint"
    assert E.last(parsed, E.Diff).files[0].path == "src/calculator.py"
    assert E.last([], E.Diff) is None


def test_parse_as_reads_one_channels_events_whatever_their_kind_says():
    """The verifier is handed the tool layer's and the gateway's events; a caller that
    builds a gateway record without a kind still has its answer read."""
    final = {
        "source": "gateway",
        "status": 200,
        "tool_calls": [],
        "content": format_trace({"status": "DONE", "review_verdict": "FAIL"}),
    }
    (x,) = E.parse_as(E.GatewayExchange, [final])
    assert type(x) is E.GatewayExchange and x.content == final["content"]
    assert review_verdict([final]) == "FAIL"
    assert E.parse_as(E.GatewayExchange, [x])[0] is x


def test_the_review_verdict_rule():
    def answer(content, tool_calls=(), status=200):
        return {
            "source": "gateway",
            "kind": "exchange",
            "status": status,
            "content": content,
            "tool_calls": [{"id": "c", "name": "read_file", "arguments": "{}"} for _ in tool_calls],
        }

    trace = format_trace({"status": "DONE", "review_verdict": "pass"})
    assert review_verdict([answer(trace)]) == "PASS"
    assert review_verdict([answer(trace), answer(None, tool_calls=[1])]) == "PASS"  # last *final* answer
    assert review_verdict([answer(trace), answer("no trace here")]) is None
    assert review_verdict([answer(trace, status=429)]) is None
    assert review_verdict([answer(format_trace({"status": "DONE", "review_verdict": "maybe"}))]) is None
    assert review_verdict([]) is None


# ---------------------------------------------------------------- records a real grid writes


@pytest.fixture(scope="module")
def small_grid(tmp_path_factory, plain_venvs):
    """A small real grid on the dependency-free ``plain`` framework, through ``grid.py run``
    in process: one task of each role of the default suite, every content condition, the
    swap conditions that substitute and the default models without a gateway fault (their
    delays would make it slow), all read from the data folders and the registry."""
    from claimgrid.commands.cli import main

    tasks = in_suite(load_tasks(), "default")
    picked = [next(t.id for t in tasks.values() if t.role == role) for role in ("builder", "reviewer")]
    content = list(load_content_conditions())
    swaps = [s.name for s in load_swap_conditions().values() if s.on_unavailable == "substitute"][:1]
    models = [m for m in registry.default_models() if registry.get(m).gateway_fault is None]
    out = tmp_path_factory.mktemp("events-grid") / "ledger"
    args = [
        "run",
        "--venvs",
        str(plain_venvs),
        "--out",
        str(out),
        "--tasks",
        ",".join(picked),
        "--content",
        ",".join(content),
        "--swap",
        ",".join(swaps),
        "--models",
        ",".join(models),
        "--jobs",
        "4",
        "--no-progress",
    ]
    assert main(args) == 0
    return out


def _recorded(folder):
    for path in sorted((folder / "runs").glob("*/events.jsonl")):
        yield path, read_events(path)


def test_every_event_a_real_grid_writes_parses_as_its_kind_and_round_trips(small_grid):
    seen = set()
    runs = 0
    for path, records in _recorded(small_grid):
        runs += 1
        for record, event in zip(records, E.parse_events(records), strict=True):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a value of another type than its field's is a failure here
                assert event.model_dump() == record, path
            assert type(event) is E.model_for(record["source"], record["kind"]), path
            assert (record["source"], record["kind"]) in E._KINDS, f"{path}: an undocumented kind"
            seen.add(type(event))
    assert runs >= 10
    assert {
        E.AgentReport,
        E.GatewayExchange,
        E.ToolCall,
        E.Diff,
        E.Review,
        E.AttackerGoal,
        E.LegitimateNote,
        E.ProcessExit,
        E.RuntimeLimits,
    } <= seen


def test_classifying_recorded_and_parsed_events_gives_the_same_classification(small_grid):
    records = {r["run_id"]: r for r in read_runs(small_grid / "runs.jsonl").values}
    for path, events in _recorded(small_grid):
        rec = records[path.parent.name]
        facts = C.RunFacts.model_validate(rec["facts"])
        stored = rec["classification"]
        assert C.classify(events, facts).model_dump(mode="json") == stored
        assert C.classify(E.parse_events(events), facts).model_dump(mode="json") == stored
