"""The API dialects the gateway serves, each translated to and from its internal chat form.

The gateway's one internal form is an OpenAI Chat Completions request and a
``chat.completion`` answer: the reference policies, the LiteLLM Router path, the swaps, the
faults, the budget and the exchange events all work on it. A dialect is the shape one kind
of client speaks on the wire; its module translates:

- ``to_chat(body)``: the dialect's parsed request body -> the internal chat request (raises
  ``DialectError`` with a one-line message naming the dialect's field for a body it cannot
  serve, answered 400);
- ``from_chat(response, body)``: the internal chat completion -> the dialect's response body;
- ``stream(response, reply, body)``: the server-sent events of that answer (``reply`` is the
  dialect body), produced from the complete answer as the chat stream is;
- ``error(status, message, code)``: the dialect's own error body;
- ``token(headers)``: the run token, where the dialect's client libraries send their key;
- ``sent_results(body)`` (optional): the tool results of a body ``to_chat`` refused, read
  leniently, so a refused request's results are in its exchange event.

A tool call id is the same string in every dialect as in the internal form (Anthropic's
``tool_use.id``, the Responses ``call_id``), so the calls a model requested and the results
a client returns match by id whatever the client spoke.

Modules:

* ``anthropic`` - Anthropic Messages (``POST /v1/messages``), the API Claude Code speaks;
* ``chat`` - OpenAI Chat Completions: the gateway's internal form, served as it is;
* ``responses`` - OpenAI Responses (``POST /v1/responses``), the API Codex CLI speaks;
* ``wire`` - What every dialect shares: the ``Dialect`` record, ``DialectError``, and the helpers
  its modules use (the package ``claimgrid.gateway.dialects`` says what a dialect is).
"""

from __future__ import annotations

# The shared parts live in ``wire``: each dialect module imports them from there, never from
# this package's namespace, so this ``__init__`` can import the dialects at its top (no cycle).
from claimgrid.gateway.dialects import anthropic, chat, responses
from claimgrid.gateway.dialects.wire import CHAT_COMPLETIONS, Dialect, DialectError, bearer, joined_text


def dialects() -> tuple[Dialect, ...]:
    """Every dialect the gateway serves, Chat Completions first."""
    return (chat.DIALECT, anthropic.DIALECT, responses.DIALECT)


__all__ = ["CHAT_COMPLETIONS", "Dialect", "DialectError", "bearer", "dialects", "joined_text"]
