"""OpenAI Chat Completions: the gateway's internal form, served as it is.

Its request body is checked by claimgrid.gateway.request (the same checks as before any
other dialect existed); nothing is translated.
"""

from __future__ import annotations

from collections.abc import Iterator

from claimgrid.gateway.dialects.wire import CHAT_COMPLETIONS, Dialect, bearer
from claimgrid.gateway.exchanges import openai_error
from claimgrid.gateway.sse import stream_events


def _same(body: dict) -> dict:
    return body


def _reply(response: dict, body: dict) -> dict:
    return response


def _stream(response: dict, reply: dict, body: dict) -> Iterator[str]:
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return stream_events(response, include_usage)


DIALECT = Dialect(
    name=CHAT_COMPLETIONS,
    paths=("/v1/chat/completions", "/chat/completions"),
    to_chat=_same,
    from_chat=_reply,
    stream=_stream,
    error=openai_error,
    token=bearer,
)
