"""One run of a ledger as the exporters read it: its record, its events and its gateway
exchanges (request and response as the gateway stored them), with the model calls and tool
calls in the order the harness observed them.

Everything here is read from the ledger folder alone (no checkout, no task data), so an
export is a pure function of the folder. Nothing in the folder is imported or executed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from claimgrid.errors import DataError
from claimgrid.store.lines import EVENTS_NAME, parse_json, read_events
from claimgrid.store.reader import LedgerFolder
from claimgrid.store.record import RunRecord

GATEWAY_LOG = "gateway.jsonl"


@dataclass(frozen=True)
class ModelCall:
    """One gateway exchange: what the agent sent and what it was answered."""

    index: int
    t: float  # seconds since the run started, as the gateway stamped it
    latency_s: float
    status: int | None
    request: dict
    response: dict | None
    event: dict  # the run's ``gateway``/``exchange`` event (served model, swap, usage)


@dataclass(frozen=True)
class ToolRun:
    """One tool execution as the harness tool layer recorded it."""

    seq: int
    t: float
    tool: str
    category: str | None
    args: object
    ok: bool | None
    error: object
    result: str


@dataclass(frozen=True)
class RunView:
    record: RunRecord  # typed, read by the store's one reader (claimgrid.store.reader)
    events: list[dict]
    calls: list[ModelCall]
    tools: list[ToolRun]
    evidence_dir: Path

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def started_unix(self) -> float:
        return float(self.record.timings.get("started_unix") or 0.0)  # timings: a free-form object

    @property
    def wall_s(self) -> float:
        return float(self.record.timings.get("wall_s") or 0.0)

    def report(self) -> dict | None:
        reports = [e for e in self.events if e.get("source") == "agent" and e.get("kind") == "report"]
        return reports[-1] if reports else None


def _gateway_lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        obj, why = parse_json(line)  # the store's bounded parser
        if why:
            raise DataError(f"{path}:{n}", None, why)
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _calls(events: list[dict], gateway: list[dict]) -> list[ModelCall]:
    by_index = {g.get("call_index"): g for g in gateway}
    out = []
    for e in events:
        if e.get("source") != "gateway" or e.get("kind") != "exchange":
            continue
        g = by_index.get(e.get("call_index"), {})
        out.append(
            ModelCall(
                index=int(e.get("call_index") or 0),
                t=float(e.get("t") or 0.0),
                latency_s=float(e.get("latency_ms") or 0.0) / 1000.0,
                status=e.get("status"),
                request=g.get("request") or {},
                response=g.get("response"),
                event=e,
            )
        )
    return sorted(out, key=lambda c: (c.index, c.t))


def _tools(events: list[dict]) -> list[ToolRun]:
    out = []
    for e in events:
        if e.get("source") != "tools" or e.get("kind") != "tool_call":
            continue
        out.append(
            ToolRun(
                seq=int(e.get("seq") or 0),
                t=float(e.get("t") or 0.0),
                tool=str(e.get("tool")),
                category=e.get("category"),
                args=e.get("args"),
                ok=e.get("ok"),
                error=e.get("error"),
                result=str(e.get("result") or ""),
            )
        )
    return sorted(out, key=lambda r: r.seq)


def runs(folder: Path) -> Iterator[RunView]:
    """The ledger's runs in ``run_id`` order (the last record of a run wins, as the store
    reads it). A run whose evidence folder is missing is exported from its record alone."""
    store = LedgerFolder(folder)
    if not store.has_runs():
        raise DataError(store.runs_path, None, "not a ledger folder")
    for rec in sorted(store.runs(), key=lambda r: r.run_id):
        evidence = folder / (rec.evidence_dir or f"runs/{rec.run_id}")
        events = read_events(evidence / EVENTS_NAME) if (evidence / EVENTS_NAME).is_file() else []
        gateway = _gateway_lines(evidence / GATEWAY_LOG)
        yield RunView(rec, events, _calls(events, gateway), _tools(events), evidence)


def text_of(content) -> str:
    """An OpenAI message's content as plain text (parts joined; anything else as JSON)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text") if "text" in part else json.dumps(part, sort_keys=True)))
            else:
                parts.append(str(part))
        return "".join(parts)
    return json.dumps(content, sort_keys=True)


def arguments(raw) -> dict:
    """A tool call's arguments as a dict: parsed JSON where it is an object, else the raw
    text under ``_raw`` (a model may send anything)."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return {"_raw": raw}
        return parsed if isinstance(parsed, dict) else {"_raw": raw}
    return {"_raw": json.dumps(raw, sort_keys=True)}
