"""Checks shared by the export tests: an export read back with the tools' own libraries
(Inspect's ``read_eval_log``, OpenTelemetry's protobuf types) and compared with the ledger's
own evidence, with code independent of the exporter's."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from claimgrid.store.lines import read_events, read_runs

from tests import extras


def need(module: str):
    """The optional extra's module (``inspect_ai``: the inspect extra; ``opentelemetry...``:
    the otel extra): skipped with its install command where absent, a failure where
    ``.ci/run`` requires the extras (tests/extras.py)."""
    return extras.need("inspect" if module.startswith("inspect_ai") else "otel", module)


def ledger_runs(folder: Path) -> dict[str, tuple[dict, list[dict]]]:
    out = {}
    for rec in read_runs(folder / "runs.jsonl").values:
        ev = folder / rec["evidence_dir"] / "events.jsonl"
        out[rec["run_id"]] = (rec, read_events(ev))
    return out


def tool_events(events: list[dict]) -> list[tuple[str, str]]:
    return [
        (e["tool"], json.dumps(e.get("args"), sort_keys=True))
        for e in events
        if e["source"] == "tools" and e["kind"] == "tool_call"
    ]


def exchange_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e["source"] == "gateway" and e["kind"] == "exchange"]


def read_otlp(path: Path):
    """The OTLP/JSON file parsed into the OpenTelemetry protobuf request type."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    doc = json.loads(path.read_text(encoding="utf-8"))

    def b64(obj):
        if isinstance(obj, dict):
            return {
                k: (
                    base64.b64encode(bytes.fromhex(v)).decode()
                    if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                    else b64(v)
                )
                for k, v in obj.items()
            }
        if isinstance(obj, list):
            return [b64(v) for v in obj]
        return obj

    return json_format.ParseDict(b64(doc), ExportTraceServiceRequest())


def attrs(kvs) -> dict:
    out = {}
    for kv in kvs:
        v = kv.value
        out[kv.key] = (
            getattr(v, v.WhichOneof("value"))
            if v.WhichOneof("value") != "array_value"
            else [getattr(x, x.WhichOneof("value")) for x in v.array_value.values]
        )
    return out


def spans_by_run(request) -> dict[str, list]:
    """Spans grouped by their trace's run (the ``invoke_agent`` span's claimgrid.run_id)."""
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    run_of_trace = {
        s.trace_id: attrs(s.attributes)["claimgrid.run_id"]
        for s in spans
        if attrs(s.attributes).get("gen_ai.operation.name") == "invoke_agent"
    }
    out: dict[str, list] = {}
    for s in spans:
        out.setdefault(run_of_trace[s.trace_id], []).append(s)
    return out


def check_export_agrees(ledger: Path, tmp: Path) -> dict:
    """Export ``ledger`` both ways and check every run's tool calls, model calls and
    verdicts against its evidence; returns counts for the caller to assert on."""
    from claimgrid.commands.cli import main

    need("inspect_ai")
    need("opentelemetry.sdk")
    from inspect_ai.log import read_eval_log

    runs = ledger_runs(ledger)
    assert main(["export", str(ledger), "--format", "inspect", "--out", str(tmp / "inspect")]) == 0
    assert main(["export", str(ledger), "--format", "otel", "--out", str(tmp / "otel")]) == 0
    seen = set()
    for path in sorted((tmp / "inspect").glob("*.json")):
        log = read_eval_log(str(path))
        assert log.status == "success" and log.samples
        for sample in log.samples:
            rec, events = runs[sample.id]
            seen.add(sample.id)
            c = rec["classification"]
            for key in ("claim_vs_outcome", "outcome", "claim_verdict"):
                assert sample.scores[key].value == str(c[key]), (sample.id, key)
                assert sample.scores[key].explanation, (sample.id, key)
            assert sample.metadata["framework"] == rec["framework"] and sample.metadata["task"] == rec["task"]
            tools = [(t["tool"], json.dumps(t["args"], sort_keys=True)) for t in sample.metadata["tool_calls"]]
            assert tools == tool_events(events), sample.id
            assert sample.metadata["model_calls"] == len(exchange_events(events)), sample.id
            # Every tool call in the exported conversation is one the gateway answered with. (A
            # framework that keeps its history as text sends none back: the list is then empty.)
            calls = [tc for m in sample.messages if m.role == "assistant" for tc in (m.tool_calls or [])]
            requested = {(tc["id"], tc["name"]) for e in exchange_events(events) for tc in (e.get("tool_calls") or [])}
            assert all((tc.id, tc.function) in requested for tc in calls), sample.id
    assert seen == set(runs)
    by_run = spans_by_run(read_otlp(tmp / "otel" / "traces.otlp.json"))
    assert set(by_run) == set(runs)
    for run_id, spans in by_run.items():
        rec, events = runs[run_id]
        ops = [attrs(s.attributes)["gen_ai.operation.name"] for s in spans]
        assert ops.count("invoke_agent") == 1
        assert ops.count("chat") == len(exchange_events(events)), run_id
        tools = [
            (
                attrs(s.attributes)["gen_ai.tool.name"],
                json.dumps(json.loads(attrs(s.attributes)["gen_ai.tool.call.arguments"]), sort_keys=True),
            )
            for s in spans
            if attrs(s.attributes)["gen_ai.operation.name"] == "execute_tool"
        ]
        assert tools == tool_events(events), run_id
        root = next(s for s in spans if attrs(s.attributes)["gen_ai.operation.name"] == "invoke_agent")
        assert all(s.parent_span_id == root.span_id for s in spans if s is not root)
        verdicts = {
            attrs(ev.attributes)["gen_ai.evaluation.name"]: attrs(ev.attributes)["gen_ai.evaluation.score.label"]
            for ev in root.events
            if ev.name == "gen_ai.evaluation.result"
        }
        c = rec["classification"]
        assert set(verdicts) == set(c), run_id
        for key, value in c.items():
            if isinstance(value, str | bool | int):
                assert verdicts[key] == value, (run_id, key)
    return {"runs": len(runs), "frameworks": len({r["framework"] for r, _ in runs.values()})}
