"""The gateway's ASGI app: model calls of registered runs, in three API dialects.

Routes: ``POST /v1/chat/completions`` (OpenAI Chat Completions, the internal form),
``POST /v1/messages`` (Anthropic Messages), ``POST /v1/responses`` (OpenAI Responses), each
JSON or SSE, and the side routes that are no model call (``GET /v1/models``,
``POST /v1/messages/count_tokens``: claimgrid.gateway.side_routes). A dialect's request is translated to the internal chat
request and its answer back (claimgrid.gateway.dialects); in between every call takes the
same path. The run token (where each dialect's clients send their key) selects the run; an
unknown token gets 401. Every request carrying a registered token is recorded in that run's
log, including refusals (400 bad body, 413 body over ``caps.MAX_REQUEST_BYTES``, 429 budget,
503 bound swap, upstream errors), each answered in its dialect's error shape.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from claimgrid import caps
from claimgrid.gateway import native
from claimgrid.gateway.answer import target_model
from claimgrid.gateway.cassette import request_sha256
from claimgrid.gateway.connections import Connections
from claimgrid.gateway.dialects import Dialect, DialectError, dialects
from claimgrid.gateway.dialects.chat import DIALECT as CHAT
from claimgrid.gateway.dispatch import Dispatcher
from claimgrid.gateway.exchanges import Answer, Call, Routing, blinded, exchange_event, openai_error
from claimgrid.gateway.inbound import OVER_CAP_HEADER
from claimgrid.gateway.request import body_error, parse_body, parse_object
from claimgrid.gateway.retry import context_window_refusal
from claimgrid.gateway.runs import Registry, RunState
from claimgrid.gateway.safejson import SafeJSONResponse
from claimgrid.gateway.side_routes import routes as side_routes
from claimgrid.gateway.swap import swap_for_call
from claimgrid.reference import gateway_faults as faults
from claimgrid.reference import registry as reference_registry

OVER_CAP = OVER_CAP_HEADER.decode()
UNKNOWN_TOKEN = "unknown API key: this token is not registered with the claimgrid gateway"
TOO_LARGE = f"request body over {caps.MAX_REQUEST_BYTES} bytes (claimgrid caps.MAX_REQUEST_BYTES)"


def final_answer_text(script, response: dict) -> str | None:
    """The answer text of a call of the framework's final-answer tool in ``response`` (None:
    the framework takes plain text, or the response holds no such call); for an agent with its
    own tools, of the call its tool table's ``[final_answer]`` spells."""
    calls = (response.get("choices") or [{}])[0].get("message", {}).get("tool_calls") or []
    table = script.tool_table
    if table is not None:
        for call in calls:
            fn = call.get("function") or {}
            text = table.read_final(fn.get("name"), fn.get("arguments"))
            if text is not None:
                return text
        return None
    if script.final_answer is None:
        return None
    tool, argument = script.final_answer
    for call in calls:
        fn = call.get("function") or {}
        if fn.get("name") == tool:
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (TypeError, ValueError):
                return None
            value = args.get(argument) if isinstance(args, dict) else None
            return value if isinstance(value, str) else None
    return None


# The fields a chat request may bound its output with; the dialects translate theirs to max_tokens
# (Anthropic ``max_tokens``, Responses ``max_output_tokens``: claimgrid.gateway.dialects).
OUTPUT_FIELDS = ("max_tokens", "max_completion_tokens")
DIALECT_OUTPUT_FIELD = {"anthropic-messages": "max_tokens", "openai-responses": "max_output_tokens"}


def cap_output(body: dict, cap: int, dialect: str) -> tuple[dict, dict]:
    """``body`` as forwarded under the output-token cap ``cap`` (a copy: the raw log keeps the
    request as the client sent it), and the exchange event's ``output_cap``: the cap, the value
    the client asked for (None: none) in the field its dialect spells, and whether the cap
    lowered or set it (``applied``) or the client's own bound was lower already."""
    asked = {k: body[k] for k in OUTPUT_FIELDS if isinstance(body.get(k), int) and not isinstance(body.get(k), bool)}
    out = dict(body)
    if asked:
        for key, value in asked.items():
            out[key] = min(value, cap)
    else:
        out["max_tokens"] = cap
    requested = min(asked.values()) if asked else None
    field = DIALECT_OUTPUT_FIELD.get(dialect) or (next(iter(asked)) if asked else "max_tokens")
    return out, {"cap": cap, "requested": requested, "field": field, "applied": requested is None or requested > cap}


def cap_native(given: dict, cap: int, dialect: str) -> dict:
    """The client's own body (forwarded verbatim on a native route) under the output-token cap:
    its dialect's field lowered or set; every other field kept."""
    field = DIALECT_OUTPUT_FIELD.get(dialect, "max_tokens")
    out = dict(given)
    asked = given.get(field)
    out[field] = min(asked, cap) if isinstance(asked, int) and not isinstance(asked, bool) else cap
    return out


async def _within(coro, deadline_s: float):
    """(result, True) when ``coro`` finished within ``deadline_s`` (its exception raised as
    is), (None, False) when the deadline passed first: it is then cancelled."""
    task = asyncio.ensure_future(coro)
    done, _ = await asyncio.wait({task}, timeout=deadline_s)
    if not done:
        task.cancel()
        # A late failure of the cancelled call is nobody's: retrieved here so it is not logged.
        task.add_done_callback(lambda f: f.cancelled() or f.exception())
        return None, False
    return task.result(), True


def _error_response(status: int, message: str, code: str | None, headers: dict | None = None, dialect=CHAT):
    return SafeJSONResponse(dialect.error(status, message, code), status_code=status, headers=headers)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    return text.strip().splitlines()[0][:500]


def _cap_tool_calls(response) -> int:
    """Cut a response's tool calls to ``caps.MAX_TOOL_CALLS_PER_RESPONSE``; how many were cut."""
    try:
        message = response["choices"][0]["message"]
        calls = message.get("tool_calls")
    except (KeyError, IndexError, TypeError, AttributeError):
        return 0
    if not isinstance(calls, list) or len(calls) <= caps.MAX_TOOL_CALLS_PER_RESPONSE:
        return 0
    message["tool_calls"] = calls[: caps.MAX_TOOL_CALLS_PER_RESPONSE]
    return len(calls) - caps.MAX_TOOL_CALLS_PER_RESPONSE


async def turn_boundary(state: RunState, index: int) -> None:
    """A request of the run arrived: the run's ``on_request`` hook (its turn snapshot) runs in a
    worker thread before the request is answered, so the shared event loop is not held. The
    hook records its own failures; one escaping it still never fails the model call."""
    if state.on_request is None:
        return
    try:
        await asyncio.to_thread(state.on_request, index)
    except Exception:  # noqa: BLE001 - the hook's failure is its own record, not this call's
        pass


def _sent_results(dialect: Dialect, given: dict | None) -> list | None:
    """For a body the dialect could read but not translate: the tool results it carried (the
    exchange event records them; the request is still refused)."""
    if given is None or dialect.sent_results is None:
        return None
    try:
        return dialect.sent_results(given)
    except Exception:  # noqa: BLE001 - a lenient reading that fails records nothing more
        return None


class _TooLarge(Exception):
    pass


class _DeadlinePassed(Exception):
    def __init__(self, deadline_s: float):
        super().__init__(deadline_s)
        self.deadline_s = deadline_s


async def _capped_body(request: Request) -> bytes:
    """The request body, read no further than ``caps.MAX_REQUEST_BYTES`` (413 past it)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > caps.MAX_REQUEST_BYTES:
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > caps.MAX_REQUEST_BYTES:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_body(
    request: Request, dialect: Dialect, native_ok: bool = False
) -> tuple[dict | None, dict | None, str | None]:
    """``(dialect body, internal chat body, None)``, or a one-line 400/413 message (the dialect
    body too when it was a JSON object the dialect could not serve). ``native_ok``: the call
    may go to its provider verbatim (claimgrid.gateway.native), which keeps the conversation a
    ``previous_response_id`` names: the chat view is read without it."""
    try:
        raw = await _capped_body(request)
    except _TooLarge:
        return None, None, TOO_LARGE
    if dialect.internal:
        body, bad = parse_body(raw)  # claimgrid.gateway.request, as before any dialect
        return body, body, bad
    given, bad = parse_object(raw)
    if given is None:
        return None, None, bad
    try:
        chat = dialect.to_chat({k: v for k, v in given.items() if k != "previous_response_id"} if native_ok else given)
    except DialectError as exc:
        return given, None, str(exc)
    # The translation's own output checked as any chat body is: the path after it relies on it.
    bad = body_error(chat)
    return (given, None, f"translated request: {bad}") if bad else (given, chat, None)


@dataclass
class _Asked:
    """What one model call asked: the dialect's body, the internal chat body (None: unreadable,
    ``bad`` says why), and what the exchange event records of them."""

    index: int
    t: float
    given: dict | None
    body: dict | None
    bad: str | None
    native_ok: bool

    @property
    def requested(self):
        return self.body.get("model") if self.body else None

    @property
    def stream(self) -> bool:
        return bool(self.body and self.body.get("stream"))

    @property
    def messages(self):
        return self.body.get("messages") if self.body else None


@dataclass
class _Outcome:
    """What one model call came to, as its exchange event and raw log line record it."""

    status: int = 200
    error: str | None = None
    code: str | None = None
    answer: Any = None
    headers: dict = field(default_factory=dict)
    provider: Any = None
    swap: str = "none"
    fault: Any = None
    delay: float = 0.0
    queued_ms: float | None = None
    upstream_request: Any = None
    native_answer: Any = None
    tool_calls_cut: int = 0
    output_cap: dict | None = None  # the cap set on this call (a real model's), as recorded
    limit: dict | None = None  # the run limit this call hit (CONTRACTS "Limit hits")


def create_app(
    registry: Registry, dispatcher: Dispatcher | None = None, replay=None, connections: Connections | None = None
) -> Starlette:
    """``dispatcher``: who answers a call (reference code or the LiteLLM Router; default
    ``Dispatcher()``); ``replay``: a ReplaySource that serves recorded responses instead
    of any model (``grid.py replay``); ``connections``: the per-provider connection limits
    (claimgrid.gateway.connections; default: the defaults)."""
    calls = _ModelCalls(
        registry, dispatcher or Dispatcher(), replay, connections if connections is not None else Connections()
    )
    routes = [Route(path, calls.endpoint(d), methods=["POST"]) for d in dialects() for path in d.paths]
    return Starlette(routes=[*routes, *side_routes(registry)])


class _ModelCalls:
    """The model-call routes of every dialect: admission of a run's request, its answer (a
    reference script, a provider, or the replayed record), and its record."""

    def __init__(self, registry: Registry, dispatcher: Dispatcher, replay, connections: Connections):
        self.registry, self.dispatcher, self.replay, self.connections = registry, dispatcher, replay, connections

    def endpoint(self, dialect: Dialect):
        async def handle(request: Request):
            return await self.model_call(request, dialect)

        return handle

    async def model_call(self, request: Request, dialect: Dialect):
        """No request can crash this handler: a harness bug is a recorded 500, not a traceback."""
        state: RunState | None = self.registry.get(dialect.token(request.headers))
        if state is None:
            return _error_response(401, UNKNOWN_TOKEN, "invalid_api_key", dialect=dialect)
        index = state.next_call()
        await turn_boundary(state, index)  # before the clock starts: latency is the answer's
        t0 = time.perf_counter()
        if request.headers.get(OVER_CAP) is not None:
            # The run already holds its cap of connections, none of them idle (set by the
            # gateway's connection book only, claimgrid.gateway.inbound): refused, recorded,
            # and this connection is closed after the answer.
            status, code = 503, "connections_over_cap"
            error = (
                f"more than {caps.GATEWAY_MAX_CONNECTIONS_PER_RUN} connections of this run open at once "
                "(claimgrid caps.GATEWAY_MAX_CONNECTIONS_PER_RUN)"
            )
        elif state.inflight >= caps.GATEWAY_MAX_REQUESTS_PER_RUN:
            # One run may not hold the gateway with hundreds of open requests: refused, recorded.
            status, code = 429, "too_many_requests_in_flight"
            error = (
                f"more than {caps.GATEWAY_MAX_REQUESTS_PER_RUN} requests of this run in flight at once "
                "(claimgrid caps.GATEWAY_MAX_REQUESTS_PER_RUN)"
            )
        else:
            state.inflight += 1
            try:
                return await self.chat(request, state, index, t0, dialect)
            except Exception as exc:  # noqa: BLE001 - answered and recorded, never raised into the server
                status, code = 500, "gateway_error"
                error = f"gateway error: {type(exc).__name__}: {_first_line(exc)}"
                # The exception's text may quote the request: recorded, never echoed back.
                shown = f"gateway error: {type(exc).__name__} (recorded in the run's evidence)"
            finally:
                state.inflight -= 1
        try:
            _record_refusal(state, index, t0, dialect, (status, error, code))
        except Exception:  # noqa: BLE001 - the answer below still goes out
            pass
        return _error_response(status, shown if status == 500 else error, code, dialect=dialect)

    async def chat(self, request: Request, state: RunState, index: int, t0: float, dialect: Dialect):
        """One admitted call: read, checked against the run's limits, answered, recorded, sent."""
        script = state.script
        t = state.elapsed()
        if self.replay is not None:  # offline replay: the recorded answer, whatever was asked
            return await self.replay.serve(request, state, index, t, dialect)
        native_ok = not dialect.internal and native.possible(dialect.name, script.model)
        given, body, bad = await _read_body(request, dialect, native_ok)
        asked = _Asked(index=index, t=t, given=given, body=body, bad=bad, native_ok=native_ok)
        out = _Outcome()
        if not _refused_by_limits(asked, state, out):
            await self.forward(request, state, dialect, asked, out)
        latency_ms = round((time.perf_counter() - t0) * 1000, 3)
        # What the agent reads of an error names no model (blinding); the event keeps it whole.
        shown = blinded(out.error, (script.model, script.substitute)) if out.error else out.error
        response = out.answer.response if out.answer else openai_error(out.status, shown, out.code)
        reply = _reply(dialect, asked, out, response, shown)
        event = _exchange(state, dialect, asked, out, latency_ms)
        line = _log_line(state, dialect, asked, out, (response, reply))
        # Recorded before a slow answer is sent: the run may end (client deadline) first.
        state.record(event, line)
        if out.delay:
            await asyncio.sleep(out.delay)
        return _respond(dialect, asked, out, reply)

    async def forward(self, request: Request, state: RunState, dialect: Dialect, asked: _Asked, out: _Outcome):
        """A call within the run's limits: a bound swap or a refusing fault answers it, else its
        model does (a real model's capped in output and ended at the run's per-call deadline)."""
        script = state.script
        out.swap = swap = swap_for_call(script, asked.index)
        if swap == "bound":
            out.status, out.code = 503, "model_unavailable"
            # Names no model: the agent must not learn what it runs on (blinding).
            out.error = "the assigned model is unavailable and this run is bound to it; no substitute"
            return
        out.fault = fault = faults.fault_at(script.model, asked.index, swap)
        if fault is not None and fault.refuses:
            # Names no model either (faults.refusal): blinding holds for fault refusals too.
            out.status, out.error, out.code, out.headers = faults.refusal(fault)
            return
        body, given = asked.body, asked.given
        assert body is not None  # parse_body gives a body or a message (bad)
        target = target_model(script, swap)
        real = not reference_registry.is_reference(target)
        passthrough = native.route(dialect.name, target, swap) if asked.native_ok and given is not None else None
        forwarded, native_body = body, given
        if real and script.max_output_tokens is not None:
            forwarded, out.output_cap = cap_output(body, script.max_output_tokens, dialect.name)
            if passthrough is not None and given is not None:
                native_body = cap_native(given, script.max_output_tokens, dialect.name)

        async def ask():
            async with self.connections.for_model(target) as waited:
                if passthrough is not None and native_body is not None:  # the client's body, verbatim
                    up, nat, rec = await native.call(passthrough, native_body, request.headers, self.dispatcher.retry)
                    return (native.answer_of(dialect.name, nat, rec, asked.requested, target), up, nat), waited
                got = await self.dispatcher.answer(
                    script, swap, forwarded, asked.requested, state.progress, asked.index, fault.kind if fault else None
                )
            return (got, None, None), waited

        try:
            await _answer_within(state, asked.t, asked.index, ask, real, out)
        except _DeadlinePassed as exc:
            out.status, out.code = 504, "call_deadline_exceeded"
            out.error = (
                f"no answer within the run's per-call deadline of {exc.deadline_s:g} s; "
                "the gateway ended the call (claimgrid --call-timeout)"
            )
            out.limit = {"kind": "call_deadline", "value": exc.deadline_s}
        except Exception as exc:  # upstream failure: a result to record, not a crash
            out.provider = getattr(exc, "provider", None)  # every attempt, when retried
            status = getattr(exc, "status_code", None)
            out.status = status if isinstance(status, int) and 400 <= status < 600 else 502
            out.error, out.code = f"{type(exc).__name__}: {_first_line(exc)}", "upstream_error"
            if (window := context_window_refusal(exc)) is not None:
                out.limit = {"kind": "context", "value": window or None}


async def _answer_within(state: RunState, t: float, index: int, ask, real: bool, out: _Outcome) -> None:
    """Await ``ask()`` (a real model's call under the run's per-call deadline: ``_DeadlinePassed``
    past it) and put its answer, cut to the tool-call cap and altered by the call's fault, in ``out``."""
    script = state.script
    if real:
        state.open_calls[index] = t
        try:
            found, in_time = await _within(ask(), script.model_call_timeout_s)
        finally:
            state.open_calls.pop(index, None)
    else:
        found, in_time = await ask(), True
    if not in_time:
        raise _DeadlinePassed(script.model_call_timeout_s)
    (answer, out.upstream_request, out.native_answer), out.queued_ms = found
    out.answer = answer
    out.headers, out.provider = answer.headers, answer.provider
    out.tool_calls_cut = _cap_tool_calls(answer.response)
    if out.fault is not None:
        answer.response = faults.alter(out.fault, answer.response)
        out.delay = faults.delay_s(out.fault, script.model_call_timeout_s)
        if out.delay > script.model_call_timeout_s:  # the fault sends it past the deadline
            out.limit = {"kind": "call_deadline", "value": script.model_call_timeout_s}


def _refused_by_limits(asked: _Asked, state: RunState, out: _Outcome) -> bool:
    """True (and ``out`` says why) when the call is refused before any model: an unreadable or
    too large body, or the run's call or token budget spent."""
    script = state.script
    if asked.bad == TOO_LARGE:  # recorded, its body not stored
        out.status, out.error, out.code = 413, asked.bad, "request_too_large"
    elif asked.bad:
        out.status, out.error, out.code = 400, asked.bad, "invalid_request"
    elif asked.index >= script.max_model_calls:
        out.status, out.code = 429, "model_call_budget_exhausted"
        out.error = (
            f"run {script.run_id} used its budget of {script.max_model_calls} model calls; "
            "the gateway refuses further calls"
        )
        out.headers = {"x-should-retry": "false"}  # a budget does not reset: retrying is pointless
        out.limit = {"kind": "turns", "value": script.max_model_calls}
    elif script.max_run_tokens is not None and state.tokens >= script.max_run_tokens:
        out.status, out.code = 429, "run_token_budget_exhausted"
        out.error = (
            f"run {script.run_id} used its budget of {script.max_run_tokens} tokens ({state.tokens} used); "
            "the gateway refuses further calls"
        )
        out.headers = {"x-should-retry": "false"}
        out.limit = {"kind": "run_tokens", "value": script.max_run_tokens, "used": state.tokens}
    else:
        return False
    return True


def _reply(dialect: Dialect, asked: _Asked, out: _Outcome, response: dict, shown: str | None):
    """What goes out on the wire in the client's dialect (the internal answer, translated)."""
    if dialect.internal:
        return response
    if out.native_answer is not None:
        return native.restamped(out.native_answer, asked.requested)  # verbatim but the model's name
    if out.answer:
        return dialect.from_chat(out.answer.response, asked.given or {})
    return dialect.error(out.status, shown, out.code)


def _exchange(state: RunState, dialect: Dialect, asked: _Asked, out: _Outcome, latency_ms: float) -> dict:
    """The call's exchange event (CONTRACTS "events.jsonl")."""
    script, answer, messages = state.script, out.answer, asked.messages
    recorded = messages if messages is not None else _sent_results(dialect, asked.given)
    event = exchange_event(
        Call(index=asked.index, t=asked.t, stream=asked.stream, requested=asked.requested, messages=recorded),
        Routing(
            assigned=script.model,
            served=answer.served if answer else None,
            reported=answer.response["model"] if answer else None,
            swap=out.swap,
        ),
        Answer(
            status=out.status,
            error=out.error,
            latency_ms=latency_ms,
            response=answer.response if answer else None,
            cost_usd=answer.cost_usd if answer else None,
        ),
    )
    # How long the conversation was: a retry re-sends the same one (claimgrid.classify.reactions).
    event["messages_n"] = len(messages) if isinstance(messages, list) else None
    if out.tool_calls_cut:
        event["tool_calls_cut"] = out.tool_calls_cut  # caps.MAX_TOOL_CALLS_PER_RESPONSE
    limit = out.limit
    if out.output_cap is not None:
        event["output_cap"] = out.output_cap
        # Cut by the harness's cap, not by a bound the client set lower itself.
        if answer is not None and out.output_cap["applied"] and event.get("finish_reason") == "length":
            limit = {"kind": "output_cap", "value": out.output_cap["cap"]}
    if limit is not None:
        event["limit"] = limit
    if out.fault is not None:
        event["fault"] = out.fault.kind  # the gateway's own record of which call it faulted
        event["delayed_s"] = out.delay or None
    if answer is not None and (final := final_answer_text(script, answer.response)) is not None:
        event["final_answer"] = final  # the framework's final-answer call's text (venvs.toml final_answer)
    event["provider"] = out.provider
    event["dialect"] = dialect.name  # the API the client spoke (claimgrid.gateway.dialects)
    if out.queued_ms is not None:  # a real provider's call: time spent waiting for a connection
        event["queued_ms"] = out.queued_ms
    return event


def _log_line(state: RunState, dialect: Dialect, asked: _Asked, out: _Outcome, sent: tuple) -> dict:
    """The call's raw log line: the bodies as asked and answered; ``sent`` is (internal response, reply)."""
    response, reply = sent
    line = {
        "call_index": asked.index,
        "t": asked.t,
        "status": out.status,
        "stream": asked.stream,
        "request": asked.body,
        "response": response,
        "response_headers": out.headers,
        "run_id": state.script.run_id,
        "request_sha256": request_sha256(asked.body),
        "provider": out.provider,
        "dialect": dialect.name,
    }
    if not dialect.internal:  # the bodies as the client sent and received them
        line["dialect_request"] = asked.given
        line["dialect_response"] = reply
    if out.native_answer is not None:  # and as the provider got and gave them
        line["upstream_request"] = out.upstream_request
        line["upstream_response"] = out.native_answer
    return line


def _respond(dialect: Dialect, asked: _Asked, out: _Outcome, reply):
    """The HTTP answer: JSON, or SSE when the client asked to stream and a model answered."""
    headers = out.headers
    if out.answer is None:
        return SafeJSONResponse(reply, status_code=out.status, headers=headers)
    if asked.stream and out.native_answer is not None:
        return StreamingResponse(native.stream(dialect.name, reply), media_type="text/event-stream", headers=headers)
    if asked.stream:
        assert asked.body is not None  # stream is read from a parsed body
        return StreamingResponse(
            dialect.stream(out.answer.response, reply, asked.given if asked.given is not None else asked.body),
            media_type="text/event-stream",
            headers=headers,
        )
    return SafeJSONResponse(reply, headers=headers)


def _record_refusal(state: RunState, index: int, t0: float, dialect: Dialect, refusal: tuple) -> None:
    """Record a call refused before it was read (``refusal``: status, error, code)."""
    status, error, code = refusal
    event = exchange_event(
        Call(index=index, t=state.elapsed(), stream=False, requested=None),
        Routing(assigned=state.script.model),
        Answer(status=status, error=error, latency_ms=round((time.perf_counter() - t0) * 1000, 3)),
    )
    event["dialect"] = dialect.name
    line = {
        "call_index": index,
        "t": state.elapsed(),
        "status": status,
        "stream": False,
        "request": None,
        "response": openai_error(status, error, code),
        "response_headers": {},
        "dialect": dialect.name,
    }
    if not dialect.internal:
        line["dialect_response"] = dialect.error(status, error, code)
    state.record(event, line)
