"""A ledger as OpenTelemetry GenAI traces: OTLP/JSON, one trace per run.

Spans follow the GenAI semantic conventions: ``invoke_agent`` per run, ``chat`` per model
call (from the gateway's exchanges) and ``execute_tool`` per tool execution (from the
harness tool layer), each a child of the run's span; every classification field is a
``gen_ai.evaluation.result`` event on the run's span (name, label, explanation = the rule
that fired). Spans are built with the OpenTelemetry SDK and encoded with its OTLP encoder
(the optional ``otel`` extra: importing this module without it raises ImportError), then written as OTLP/JSON (ids as hex, enums as integers).

Ids and times come from the ledger (a run's ids are derived from its run id; times from
the run's own start and the events' offsets), so re-exporting a ledger gives the same bytes.
With ``endpoint`` the same spans are also sent to an OTLP/HTTP collector."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from claimgrid.anybytes import safe_text, utf8
from claimgrid.errors import ClaimgridError
from claimgrid.ledger.exports._runs import RunView, runs
from claimgrid.ledger.load import evidence_dir, stored
from claimgrid.ledger.rules import explain
from claimgrid.store.inert import write_file

TRACES_FILE = "traces.otlp.json"
PROVIDER = "claimgrid"
_MAX_ATTR = 8192  # characters per exported text attribute (tool results, messages): OTLP
# backends cap attribute sizes; the evidence folder keeps the whole text


def _ns(unix: float) -> int:
    return int(round(unix * 1e9))


def _text(value) -> str:
    # A lone surrogate (agent text may hold one) is shown as \udXXX text: OTLP strings are UTF-8.
    text = safe_text(value) if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= _MAX_ATTR else text[:_MAX_ATTR] + f"... [{len(text) - _MAX_ATTR} characters cut]"


def _attr(value):
    if isinstance(value, bool | int | float | str):
        return _text(value) if isinstance(value, str) else value
    return _text(value)


def _hexify(obj):
    """OTLP/JSON writes trace and span ids as hex, where protobuf's JSON writes base64."""
    import base64

    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str):
                out[k] = base64.b64decode(v).hex()
            else:
                out[k] = _hexify(v)
        return out
    if isinstance(obj, list):
        return [_hexify(v) for v in obj]
    return obj


def _run_spans(view: RunView, tracer, ids: RunIds) -> None:
    c = stored(view.record.classification)  # as the line held it: a field it lacks is exported as absent
    start = view.started_unix
    end = start + view.wall_s
    role = view.record.role or "agent"
    ids.seed(view.run_id)
    root = tracer.start_span(
        safe_text(f"invoke_agent {role}"),
        kind=trace.SpanKind.INTERNAL,
        start_time=_ns(start),
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.name": _text(role),
            "gen_ai.agent.id": _text((view.record.facts.delegation_id if view.record.facts else None) or view.run_id),
            "gen_ai.request.model": _text(view.record.model),
            "claimgrid.run_id": _text(view.run_id),
            **{
                f"claimgrid.{k}": _attr(getattr(view.record, k))
                for k in ("framework", "task", "content", "swap", "model", "substitute", "repeat")
            },
            "claimgrid.evidence_dir": _text(evidence_dir(view.record)),
        },
    )
    ctx = trace.set_span_in_context(root)
    for call in view.calls:
        e = call.event
        usage = e.get("usage") or {}
        t0 = start + call.t
        span = tracer.start_span(
            safe_text(f"chat {e.get('requested_model')}"),
            context=ctx,
            kind=trace.SpanKind.CLIENT,
            start_time=_ns(t0),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.request.model": _text(str(e.get("requested_model"))),
                "gen_ai.response.model": _text(str(e.get("reported_model"))),
                "gen_ai.response.finish_reasons": [_text(str(e.get("finish_reason")))],
                "gen_ai.usage.input_tokens": int(usage.get("prompt_tokens") or 0),
                "gen_ai.usage.output_tokens": int(usage.get("completion_tokens") or 0),
                "claimgrid.call_index": call.index,
                "claimgrid.served_model": _text(str(e.get("served_model"))),
                "claimgrid.swap": _text(str(e.get("swap"))),
                "claimgrid.status": int(call.status or 0),
                "gen_ai.output.messages": _text(((call.response or {}).get("choices") or [{}])[0].get("message")),
            },
        )
        span.end(end_time=_ns(t0 + call.latency_s))
    for tool in view.tools:
        t0 = start + tool.t
        span = tracer.start_span(
            safe_text(f"execute_tool {tool.tool}"),
            context=ctx,
            kind=trace.SpanKind.INTERNAL,
            start_time=_ns(t0),
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.tool.name": _text(tool.tool),
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": _text(tool.args),
                "gen_ai.tool.call.result": _text(tool.result),
                "claimgrid.tool.seq": tool.seq,
                "claimgrid.tool.category": _text(str(tool.category)),
                "claimgrid.tool.ok": bool(tool.ok),
            },
        )
        if tool.ok is False:
            span.set_status(trace.Status(trace.StatusCode.ERROR, _text(tool.error)))
        span.end(end_time=_ns(t0))
    for rule in explain(view.record, view.events or None):
        root.add_event(
            "gen_ai.evaluation.result",
            attributes={
                "gen_ai.evaluation.name": _text(str(rule["field"])),
                "gen_ai.evaluation.score.label": _attr(c.get(rule["field"])),
                "gen_ai.evaluation.explanation": _text(rule.get("rule") or ""),
            },
            timestamp=_ns(end),
        )
    root.end(end_time=_ns(end))


class RunIds(IdGenerator):
    """Ids derived from the run id: the same ledger gives the same trace."""

    def __init__(self) -> None:
        self.run_id, self.n = "", 0

    def seed(self, run_id: str) -> None:
        self.run_id, self.n = run_id, 0

    def _next(self, bits: int) -> int:
        self.n += 1
        digest = hashlib.sha256(f"{self.run_id}\x1f{self.n}".encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[: bits // 8], "big") or 1

    def generate_trace_id(self) -> int:
        return self._next(128)

    def generate_span_id(self) -> int:
        return self._next(64)


def _provider(resource: Resource, ids: IdGenerator) -> TracerProvider:
    """A tracer provider that records every span of the ledger, whatever the environment says:
    the SDK reads ``OTEL_SDK_DISABLED`` (every adapter gets it: the harness's telemetry
    switch) and ``OTEL_TRACES_SAMPLER`` when it is built, and either would make the export a
    partial or empty file without a word. This is a file written from recorded evidence, not
    telemetry, so every run is sampled and the switch is set aside while it is built."""
    saved = os.environ.pop("OTEL_SDK_DISABLED", None)
    try:
        return TracerProvider(resource=resource, id_generator=ids, sampler=ALWAYS_ON)
    finally:
        if saved is not None:
            os.environ["OTEL_SDK_DISABLED"] = saved


def export_otel(folder: Path, out: Path, meta: dict, endpoint: str | None = None) -> list[Path]:
    """Write ``out/traces.otlp.json`` (one ExportTraceServiceRequest); send it to
    ``endpoint`` (OTLP/HTTP traces URL) too when given. Returns the written path."""
    ids = RunIds()
    memory = InMemorySpanExporter()
    resource = Resource({"service.name": "claimgrid", "claimgrid.grid_id": str(meta.get("grid_id") or folder.name)})
    provider = _provider(resource, ids)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("claimgrid.export")
    for view in runs(folder):
        _run_spans(view, tracer, ids)
    spans = memory.get_finished_spans()
    request = encode_spans(spans)
    doc = _hexify(json_format.MessageToDict(request, use_integers_for_enums=True))
    path = out / TRACES_FILE
    # compact: the C encoder (an indent would run the pure-Python one, ~10x slower here)
    text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    write_file(path, utf8(text + "\n"))
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        result = OTLPSpanExporter(endpoint=endpoint, timeout=10).export(spans)
        if result.name != "SUCCESS":
            raise ClaimgridError(
                f"export --otlp-endpoint {endpoint}: the collector did not accept the spans ({result.name})"
            )
    provider.shutdown()
    return [path]
