"""The gateway's routes beside the model calls: the model list and Anthropic's token count.

* ``GET /v1/models`` (and ``GET /v1/models/{id}``): the one model the run's agent was given, by
  the name it was given (``exchanges.BLIND_MODEL``: never the assigned model's or a substitute's
  name, which the request side never shows either), in one body both clients read: OpenAI's list (``object``, ``data[].id`` / ``object`` / ``created`` /
  ``owned_by``) and Anthropic's (``data[].type`` / ``display_name`` / ``created_at``,
  ``has_more``, ``first_id``, ``last_id``). The key is taken where either dialect's clients
  send it (``x-api-key`` or a bearer token). Another id is a 404 in the asking client's shape,
  which does not quote the id (no error answer of the gateway echoes request data).
* ``POST /v1/messages/count_tokens`` (Anthropic; Claude Code asks it to size its context): the
  body is a Messages request without ``max_tokens``, translated as a model call's is, and the
  answer is ``{"input_tokens": N}``: for a run whose models are all reference models, the
  gateway's own estimate of the request (``claimgrid.gateway.scripted.estimate_tokens`` of the
  message texts: the ``input_tokens`` the same request reports when sent), else a 404 (a real
  provider's tokenizer is not called: no count is invented). A bad body is a 400 naming the
  field, one over ``caps.MAX_REQUEST_BYTES`` a 413, in Anthropic's error shape.

Neither is a model call: nothing is recorded in the run's log, no call index is used, the
model-call budget is untouched, and no turn snapshot is taken.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.routing import Route

from claimgrid import caps
from claimgrid.gateway.answer import reference_only
from claimgrid.gateway.dialects import DialectError
from claimgrid.gateway.dialects import anthropic as messages
from claimgrid.gateway.exchanges import BLIND_MODEL
from claimgrid.gateway.request import parse_object
from claimgrid.gateway.runs import Registry
from claimgrid.gateway.safejson import SafeJSONResponse
from claimgrid.gateway.scripted import estimate_tokens
from claimgrid.reference.policies import message_text

UNKNOWN_TOKEN = "unknown API key: this token is not registered with the claimgrid gateway"
# Anthropic's clients send this header on every request; OpenAI's never do.
ANTHROPIC_HEADER = "anthropic-version"


def _error(request: Request, status: int, message: str, code: str):
    if ANTHROPIC_HEADER in request.headers:
        return SafeJSONResponse(messages.error(status, message, code), status_code=status)
    body = {"error": {"message": message, "type": messages.ERROR_TYPES.get(status, "api_error"), "code": code}}
    return SafeJSONResponse(body, status_code=status)


async def _capped(request: Request) -> bytes | None:
    """The body, read no further than ``caps.MAX_REQUEST_BYTES`` (None past it), as a model call's."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > caps.MAX_REQUEST_BYTES:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > caps.MAX_REQUEST_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _model(name: str) -> dict:
    return {
        "id": name,
        "object": "model",
        "created": 0,
        "owned_by": "claimgrid",
        "type": "model",
        "display_name": name,
        "created_at": "1970-01-01T00:00:00Z",
    }


def routes(registry: Registry) -> list[Route]:
    """The side routes of one gateway app (module docstring)."""

    async def models(request: Request):
        state = registry.get(messages.token(request.headers))  # x-api-key or bearer: either client
        if state is None:
            return _error(request, 401, UNKNOWN_TOKEN, "invalid_api_key")
        name = BLIND_MODEL  # the run's assigned model under the name its agent knows
        wanted = request.path_params.get("model_id")
        if wanted is not None:
            if wanted != name:
                # The asked id is never quoted: no error answer echoes request data.
                return _error(request, 404, "not this run's model (GET /v1/models lists it)", "model_not_found")
            return SafeJSONResponse(_model(name))
        return SafeJSONResponse(
            {"object": "list", "data": [_model(name)], "has_more": False, "first_id": name, "last_id": name}
        )

    async def count_tokens(request: Request):
        state = registry.get(messages.token(request.headers))
        if state is None:
            return _error(request, 401, UNKNOWN_TOKEN, "invalid_api_key")
        if not reference_only(state.script):
            return _error(request, 404, "count_tokens is answered for reference models only", "not_found")
        raw = await _capped(request)
        if raw is None:
            return _error(request, 413, f"request body over {caps.MAX_REQUEST_BYTES} bytes", "request_too_large")
        given, bad = parse_object(raw)
        if given is None:
            return _error(request, 400, bad or "the body is not a JSON object", "invalid_request")
        try:
            # max_tokens is not part of a count request; the translation of a model call needs one.
            chat = messages.to_chat({**given, "max_tokens": 1, "stream": False})
        except DialectError as exc:
            return _error(request, 400, str(exc), "invalid_request")
        text = "".join(message_text(m) for m in chat["messages"])
        return SafeJSONResponse({"input_tokens": estimate_tokens(text)})

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", models, methods=["GET"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
