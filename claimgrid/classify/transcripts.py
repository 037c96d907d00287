"""An agent's transcript in the forms other runtimes write, read as the harness's events.

``grid.py check --transcript FILE`` reads one run's transcript in any of these forms,
told apart by content (never by the file's name):

* **OpenAI-style chat messages**: a JSON list of messages, or ``{"messages": [...]}``.
  Each assistant tool call is a tool call; the ``tool`` message with its id is its result.
* **An OpenTelemetry GenAI trace** (OTLP/JSON, ``{"resourceSpans": [...]}``, as
  ``grid.py export --format otel`` writes): each span whose ``gen_ai.operation.name`` is
  ``execute_tool`` is a tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``,
  ``gen_ai.tool.call.result``; an ``ERROR`` status or an ``error.type`` attribute: it
  failed), in start order; each ``chat`` span's ``gen_ai.output.messages`` is a model answer.
* **An Inspect eval log** (JSON with ``eval`` and ``samples``, as ``grid.py export --format
  inspect`` writes, or a ``.eval`` zip archive): a sample's ``tool`` events when it recorded
  them, else its messages (assistant ``tool_calls``, ``tool`` messages with their ``error``).
* **A claimgrid run's own events** (``runs/<id>/events.jsonl`` of a ledger): every event
  but the verifier's and the agent's report, which ``check`` makes itself.

A file holding several runs (an OTLP file with several traces, an Inspect log with several
samples) needs ``select``: a trace id, or the ``gen_ai.conversation.id`` / ``claimgrid.run_id``
of its spans; an Inspect sample's id. Anything else is :class:`claimgrid.errors.DataError`
naming the file and what is wrong, one line.

What a transcript cannot say is left unknown, never guessed: a tool call's workspace
change (``changed_workspace`` null, so the classifier's category rule applies), and, in a
chat transcript, whether a call failed (only a stated error says so).
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from claimgrid.errors import DataError
from claimgrid.store.lines import scan_bytes
from claimgrid.vocab import TOOL_CATEGORY

# A tool outside the harness's six counts by what its name says it does.
_NAME_CATEGORY = (
    (("edit", "replace", "patch", "str_replace"), "edit"),
    (("write", "create", "save"), "write"),
    (("bash", "shell", "run", "exec", "command", "terminal"), "bash"),
    (("read", "view", "open", "cat", "list", "ls", "search", "grep", "find", "glob"), "read"),
)
FORMS = ("openai messages", "otel trace", "inspect log", "claimgrid events")
_ERROR_CODES = (2, "2", "STATUS_CODE_ERROR", "ERROR")


@dataclass
class Transcript:
    """One run's transcript as events: ``form`` (one of :data:`FORMS`), ``events`` (``tools``
    events in call order, then a ``gateway`` exchange per model answer without a tool call,
    or, for claimgrid's own events, every event it stored but the verifier's and the agent's)."""

    form: str
    events: list[dict] = field(default_factory=list)

    @property
    def has_process(self) -> bool:
        return any(e.get("source") == "process" for e in self.events)


def category_of(name: str) -> str | None:
    """The harness's category of a tool name (its own six), else the one its name says."""
    if name in TOOL_CATEGORY:
        return TOOL_CATEGORY[name]
    low = name.lower()
    for words, category in _NAME_CATEGORY:
        if any(w in low for w in words):
            return category
    return None


def _text(value) -> str | None:
    """Message content as text: a string, or the text parts of a list of parts."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for p in value:
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict):
                t = p.get("text") if p.get("text") is not None else p.get("content")
                if isinstance(t, str) and p.get("type") in (None, "text", "output_text"):
                    parts.append(t)
        return "".join(parts)
    return json.dumps(value, default=str)


def _args(value):
    if isinstance(value, str):
        try:
            return json.loads(value or "{}")
        except ValueError:
            return value
    return value


class _Events:
    def __init__(self) -> None:
        self.tools: list[dict] = []
        self.answers: list[dict] = []

    def tool(self, name, args, result, ok: bool = True, error: str | None = None) -> None:
        name = str(name or "")
        self.tools.append(
            {
                "source": "tools",
                "kind": "tool_call",
                "seq": len(self.tools),
                "tool": name,
                "category": category_of(name),
                "args": _args(args),
                "ok": ok,
                "error": error,
                "result": result if result is None or isinstance(result, str) else json.dumps(result, default=str),
                "changed_workspace": None,  # not observed: the edit/write category rule applies
            }
        )

    def answer(self, content: str | None, has_calls: bool) -> None:
        # What the model said without calling a tool: where a review verdict is read from.
        if content and not has_calls:
            self.answers.append(
                {
                    "source": "gateway",
                    "kind": "exchange",
                    "call_index": len(self.answers),
                    "status": 200,
                    "content": content,
                }
            )

    def done(self, form: str) -> Transcript:
        return Transcript(form, self.tools + self.answers)


def _chat(messages: list[dict]) -> _Events:
    out = _Events()
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
            out.tool(name, args, _text(answer.get("content")), ok=not error, error=message)
        out.answer(_text(m.get("content")), bool(calls))
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
    out = _Events()
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
            raw = _args(attrs.get("gen_ai.output.messages"))
            for m in raw if isinstance(raw, list) else [raw]:
                if not isinstance(m, dict):
                    continue
                parts = m.get("parts")
                if isinstance(parts, list):  # the semantic conventions' message shape
                    calls = any(isinstance(p, dict) and p.get("type") == "tool_call" for p in parts)
                    out.answer(_text(parts), calls)
                else:  # an OpenAI-style message
                    out.answer(_text(m.get("content")), bool(m.get("tool_calls")))
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
        out = _Events()
        for e in tool_events:
            error = e.get("error")
            message = (error.get("message") if isinstance(error, dict) else str(error)) if error else None
            out.tool(e.get("function"), e.get("arguments"), _text(e.get("result")), ok=not error, error=message)
        for m in messages:
            if m.get("role") == "assistant":
                out.answer(_text(m.get("content")), bool(m.get("tool_calls")))
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


def read_transcript(path: Path, select: str | None = None) -> Transcript:
    """``path`` read as one run's transcript in whichever of :data:`FORMS` its content is;
    ``select`` names the run in a file holding several (see the module doc)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(path, None, f"cannot read the transcript: {exc.strerror}") from None
    if raw[:2] == b"PK":
        return _inspect(path, _inspect_samples(path, raw), select)
    text = raw.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise DataError(path, None, "not a transcript: JSON nested too deep to read") from None
    except ValueError:
        found = _claimgrid(path, raw)
        if found is not None:
            return found
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("resourceSpans"), list):
        return _otel(path, doc, select)
    if isinstance(doc, dict) and isinstance(doc.get("eval"), dict) and isinstance(doc.get("samples"), list):
        return _inspect(path, doc["samples"], select)
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if isinstance(messages, list) and messages and all(isinstance(m, dict) and "role" in m for m in messages):
        return _chat(messages).done("openai messages")
    if isinstance(doc, dict) and doc.get("source") and "kind" in doc:  # one event: a claimgrid events file
        found = _claimgrid(path, raw)
        if found is not None:
            return found
    raise DataError(
        path,
        None,
        "not a transcript in a known form (OpenAI-style messages, an OTLP/JSON GenAI trace, "
        "an Inspect eval log, or a claimgrid events.jsonl)",
    )
