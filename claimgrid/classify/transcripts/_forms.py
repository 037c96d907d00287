"""The four general forms: OpenAI-style chat messages, an OTel GenAI trace, an Inspect log,
claimgrid's own events."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from claimgrid.classify.transcripts._build import Builder, Transcript, args_of, text_of
from claimgrid.errors import DataError
from claimgrid.store.lines import scan_bytes

_ERROR_CODES = (2, "2", "STATUS_CODE_ERROR", "ERROR")


def _chat(messages: list[dict]) -> Builder:
    out = Builder()
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    for m in messages:
        if m.get("role") != "assistant":
            continue
        calls = [c for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        for call in calls:
            fn = call.get("function")
            name, args = (fn.get("name"), fn.get("arguments")) if isinstance(fn, dict) else (fn, call.get("arguments"))
            answer = results.get(call.get("id")) or {}
            error = answer.get("error")
            message = (error.get("message") if isinstance(error, dict) else str(error)) if error else None
            out.tool(name, args, text_of(answer.get("content")), ok=not error, error=message)
        out.answer(text_of(m.get("content")), bool(calls))
    return out


def _otlp_value(v: dict):
    if not isinstance(v, dict):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in v:
            return v[key]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [_otlp_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    return None


def _otel(path: Path, doc: dict, select: str | None) -> Transcript:
    spans = []
    for rs in doc.get("resourceSpans") or []:
        for ss in (rs or {}).get("scopeSpans") or []:
            for s in (ss or {}).get("spans") or []:
                if isinstance(s, dict):
                    attrs = {a.get("key"): _otlp_value(a.get("value")) for a in s.get("attributes") or []}
                    spans.append((s, attrs))
    traces: dict[str, list] = {}
    for s, attrs in spans:
        traces.setdefault(str(s.get("traceId")), []).append((s, attrs))
    if select is not None:
        traces = {
            t: ss
            for t, ss in traces.items()
            if t == select or any(select in (a.get("gen_ai.conversation.id"), a.get("claimgrid.run_id")) for _, a in ss)
        }
        if not traces:
            raise DataError(path, "--run", f"no trace {select!r} in the file (a trace id or a run id)")
    if len(traces) != 1:
        raise DataError(path, "--run", f"the file holds {len(traces)} traces: name one with --run")
    (chosen,) = traces.values()
    chosen.sort(key=lambda sa: (int(sa[0].get("startTimeUnixNano") or 0), sa[1].get("claimgrid.tool.seq") or 0))
    out = Builder()
    for s, attrs in chosen:
        op = attrs.get("gen_ai.operation.name")
        if op == "execute_tool":
            status = (s.get("status") or {}).get("code")
            failed = status in _ERROR_CODES or attrs.get("error.type") is not None
            error = (s.get("status") or {}).get("message") or attrs.get("error.type") if failed else None
            out.tool(
                attrs.get("gen_ai.tool.name"),
                attrs.get("gen_ai.tool.call.arguments"),
                attrs.get("gen_ai.tool.call.result"),
                ok=not failed,
                error=error,
            )
        elif op == "chat":
            raw = args_of(attrs.get("gen_ai.output.messages"))
            for m in raw if isinstance(raw, list) else [raw]:
                if not isinstance(m, dict):
                    continue
                parts = m.get("parts")
                if isinstance(parts, list):  # the semantic conventions' message shape
                    calls = any(isinstance(p, dict) and p.get("type") == "tool_call" for p in parts)
                    out.answer(text_of(parts), calls)
                else:  # an OpenAI-style message
                    out.answer(text_of(m.get("content")), bool(m.get("tool_calls")))
    return out.done("otel trace")


def _inspect_samples(path: Path, raw: bytes) -> list[dict]:
    if raw[:2] == b"PK":  # the .eval form: a zip of JSON files, one per sample under samples/
        try:
            with zipfile.ZipFile(path) as z:
                names = sorted(n for n in z.namelist() if n.startswith("samples/") and n.endswith(".json"))
                return [json.loads(z.read(n)) for n in names]
        except (zipfile.BadZipFile, ValueError, KeyError) as exc:
            raise DataError(path, None, f"not a readable Inspect .eval log: {exc}") from None
    return []


def _inspect(path: Path, samples: list, select: str | None) -> Transcript:
    samples = [s for s in samples if isinstance(s, dict)]
    if select is not None:
        samples = [s for s in samples if str(s.get("id")) == select]
        if not samples:
            raise DataError(path, "--run", f"no sample {select!r} in the Inspect log")
    if len(samples) != 1:
        raise DataError(path, "--run", f"the Inspect log holds {len(samples)} samples: name one with --run")
    sample = samples[0]
    tool_events = [e for e in sample.get("events") or [] if isinstance(e, dict) and e.get("event") == "tool"]
    messages = [m for m in sample.get("messages") or [] if isinstance(m, dict)]
    if tool_events:
        out = Builder()
        for e in tool_events:
            error = e.get("error")
            message = (error.get("message") if isinstance(error, dict) else str(error)) if error else None
            out.tool(e.get("function"), e.get("arguments"), text_of(e.get("result")), ok=not error, error=message)
        for m in messages:
            if m.get("role") == "assistant":
                out.answer(text_of(m.get("content")), bool(m.get("tool_calls")))
    else:
        out = _chat(messages)
    return out.done("inspect log")


def _claimgrid(path: Path, raw: bytes) -> Transcript | None:
    """A claimgrid ``events.jsonl``: None when its first line is no event (another form);
    once it is one, every other line must be one too (the store's bounded reader), else a
    DataError naming the line."""
    found = scan_bytes(path, raw, append_only=False)
    numbered: list[tuple[int, dict | None, str]] = sorted(
        [(n, e, "") for n, e in found.lines] + [(n, None, why) for n, why in found.bad], key=lambda x: x[0]
    )
    events: list[dict] = []
    for number, e, why in numbered:
        is_event = isinstance(e, dict) and isinstance(e.get("source"), str) and "kind" in e
        if not is_event:
            if not events:
                return None
            raise DataError(f"{path}:{number}", None, f"not a claimgrid event: {why or 'no source and kind'}")
        assert e is not None  # is_event
        events.append(e)
    if not events:
        return None
    return Transcript("claimgrid events", [e for e in events if e["source"] not in ("verifier", "agent")])
