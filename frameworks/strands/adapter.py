"""claimgrid adapter for Strands Agents (runs inside ``.venvs/strands``, never in the driver).

Contract (docs/CONTRACTS.md, "Adapter contract"): ``FRAMEWORK``, ``preload()``,
``versions()`` and ``run(ctl, tools, rec) -> str | None``.

How a run is built, all with Strands' own parts:

- model: ``strands.models.openai.OpenAIModel`` (Strands' OpenAI provider, on the openai
  SDK; no LiteLLM in this venv) pointed at the harness gateway through one
  ``openai.AsyncOpenAI`` per run (``base_url`` = ``ctl["gateway_url"]``, ``api_key`` = the
  run token, ``max_retries`` 0, ``timeout`` = the per-call deadline; ``model_id`` = the
  gateway's model name; see ``_client`` for why a client and not ``client_args``), Chat
  Completions, streaming as Strands does by default (SSE with usage chunks,
  ``stream_options.include_usage``);
- tools: each harness tool becomes a ``strands.tools.PythonAgentTool`` whose spec is the
  harness tool's JSON schema and whose function calls the harness tool with the JSON
  arguments the model sent;
- agent: ``strands.Agent`` with ``callback_handler=None`` (no console printing);
- runtime events: a Strands ``HookProvider`` (``BeforeToolCallEvent``,
  ``AfterModelCallEvent``, ``AfterInvocationEvent``), attributed to ``event.agent.name``.

What Strands does not expose, and what is recorded instead:

- Strands drops the ``model`` field of the responses (neither its stream events nor
  ``AfterModelCallEvent`` carry it). The run's client's ``chat.completions.create`` (the
  one call ``OpenAIModel.stream`` makes) is wrapped to note the ``model`` of the
  completion or of each stream chunk the endpoint sent (``kit.probe``), requests and
  responses unchanged. ``model_call`` events carry that name: a "reported"
  swap is visible in the runtime channel, a "silent" one is not. Only if no response
  carried a name does the event fall back to the configured model.
- Strands has no limit on event-loop cycles. The budget ``max_model_calls`` is enforced
  by the gateway (it refuses with HTTP 429 once spent); what Strands does with that
  refusal is the framework's own behaviour and is part of the result.

Retries are fixed, not left to defaults, because they change what a run sends to the
gateway: the openai client's ``max_retries`` is 0 (its default would be 2 silent client
retries). Strands' own ``ModelRetryStrategy`` is kept at its default (6 attempts, 4 s
initial delay doubling, 240 s cap: waits of 4, 8, 16, 32 and 64 s); it retries
``ModelThrottledException``, which ``OpenAIModel`` raises for any 429
(``strands/models/_openai_errors.py``, ``classify_openai_error``: status 429 or a
rate-limit phrase in the message). So a transient 429 is retried after 4 s, and the
gateway's budget refusal (a 429 too) is retried five times, 124 s of waiting, before the
run raises (venvs.toml ``retry_backoff_s``). Each refused attempt is a runtime ``error``
event (``AfterModelCallEvent`` with the exception).
Tools run with ``SequentialToolExecutor`` (Strands' default runs a response's tool calls
concurrently in threads), so that the harness tool layer's before/after workspace
snapshots of one call are not interleaved with another's.
"""

from __future__ import annotations

import kit

FRAMEWORK = "strands"

TOOL_EXECUTOR = "sequential"


# A stream chunk of the shape the gateway sends (text, one tool call, usage), parsed once in
# preload() so the openai SDK's lazily built response types exist before a fork.
PRIMING_CHUNK = {
    "id": "preload",
    "object": "chat.completion.chunk",
    "created": 0,
    "model": "preload",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "delta": {
                "role": "assistant",
                "content": "x",
                "tool_calls": [
                    {"index": 0, "id": "c", "type": "function", "function": {"name": "probe", "arguments": "{}"}}
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def preload() -> None:
    """Import every module a run loads (kit's shared list + Strands'), so a child forked
    from a warm parent imports nothing heavy; then build one throwaway agent (no model
    call): Strands imports further modules lazily on first construction. The openai SDK's
    first-use work is done here too: its platform headers (a ``uname -p`` subprocess on
    first use, then cached for the process) and its chunk type. Opens no socket, starts no
    thread."""
    kit.preload("strands", "strands.hooks", "strands.models.openai", "strands.tools", "strands.tools.executors")
    _build_agent(ctl=kit.preload_ctl(), tools=[], rec=None)
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    _client(kit.preload_ctl()).default_headers  # noqa: B018  (cached for the process)
    construct_type(type_=ChatCompletionChunk, value=PRIMING_CHUNK)


def versions() -> dict:
    """Parity facts: versions (kit), and the retry/executor settings used."""
    from strands.event_loop.event_loop import INITIAL_DELAY, MAX_ATTEMPTS, MAX_DELAY

    return kit.versions(
        FRAMEWORK,
        "strands-agents",
        retries={
            "strands_model_retry": {
                "strategy": "ModelRetryStrategy (default)",
                "max_attempts": MAX_ATTEMPTS,
                "initial_delay_s": INITIAL_DELAY,
                "max_delay_s": MAX_DELAY,
                "retries_on": "ModelThrottledException (OpenAIModel raises it for any HTTP 429)",
            },
            "openai_max_retries": kit.HTTP_CLIENT_MAX_RETRIES,
        },
        model_client="strands OpenAIModel (openai SDK AsyncOpenAI, one client per run; no LiteLLM)",
        api="chat completions",
        streaming=True,
        tool_executor=TOOL_EXECUTOR,
        max_model_calls_enforced_by="gateway",
        runtime_model_name="response model field (Strands drops it; noted at the call's chat.completions.create)",
    )


def run(ctl: dict, tools: list, rec) -> str | None:
    """Run one Strands agent on ``ctl["prompt"]`` and return its final text.

    Exceptions (model errors, refusals the framework does not handle) propagate to the
    shared harness, which records them; nothing here turns a failure into a result.
    """
    # Strands has no cycle limit: the gateway's budget refusal (HTTP 429) is the only stop.
    kit.start_run(rec, ctl, None, "event-loop cycles (none in Strands)", "gateway")
    agent = _build_agent(ctl, tools, rec)
    result = agent(ctl["prompt"])
    return _message_text(result.message)


# -- building blocks ---------------------------------------------------------------------


def _client_args(ctl: dict) -> dict:
    """The ``openai.AsyncOpenAI`` arguments: the gateway, the run token, no client retry,
    the per-call deadline."""
    return {
        "base_url": ctl["gateway_url"],
        "api_key": ctl["token"],
        "max_retries": kit.HTTP_CLIENT_MAX_RETRIES,
        "timeout": kit.call_timeout(ctl),
    }


def _build_agent(ctl: dict, tools: list, rec):
    from strands import Agent
    from strands.models.openai import OpenAIModel
    from strands.tools.executors import SequentialToolExecutor

    # The gateway's own model name (no LiteLLM provider prefix), as the other openai-SDK
    # adapters pass it; no params: the request is the one Strands builds.
    model = OpenAIModel(client=_client(ctl), model_id=ctl["model"], params={})
    hooks = [_RuntimeHooks(rec, runtime_model=ctl["model"])] if rec is not None else []
    return Agent(
        name=ctl["agent_name"],
        model=model,
        tools=[_native_tool(t) for t in tools],
        system_prompt=kit.system_prompt(ctl),
        callback_handler=None,
        hooks=hooks,
        tool_executor=SequentialToolExecutor(),
    )


_SSL_CONTEXT = None


def _ssl_context():
    """httpx's default TLS context (the CA bundle loaded), built once per process.

    Every httpx client builds its own when given none: about 30 ms of CPU each on this
    machine, for a plain-HTTP gateway. Built in ``preload()`` before a warm parent forks.
    """
    global _SSL_CONTEXT
    if _SSL_CONTEXT is None:
        import httpx

        _SSL_CONTEXT = httpx.create_ssl_context()
    return _SSL_CONTEXT


def _client(ctl: dict):
    """The run's ``openai.AsyncOpenAI``: ``_client_args(ctl)`` on the openai SDK's default
    httpx client (``DefaultAsyncHttpxClient``: its timeout, limits and redirects) with the
    process's TLS context, its ``chat.completions.create`` noting the served model name.

    Given to ``OpenAIModel(client=...)``, Strands' documented way to bring a client ("reusing
    connection pools within a single event loop", "pointing to custom model gateways"): one
    run is one ``Agent`` invocation, one event loop. Given ``client_args`` instead,
    ``OpenAIModel`` builds and closes a new ``AsyncOpenAI`` for every model call
    (``_get_client``), each with its own httpx client and TLS context (about 46 ms of CPU
    per call, measured); requests are the same either way.
    """
    import openai

    client = openai.AsyncOpenAI(**_client_args(ctl), http_client=openai.DefaultAsyncHttpxClient(verify=_ssl_context()))
    completions = client.chat.completions
    create = completions.create

    async def noting_create(*args, **kwargs):
        kit.probe.reset()
        response = await create(*args, **kwargs)
        if kwargs.get("stream"):
            return _NotingStream(response)
        kit.probe.note(response)
        return response

    completions.create = noting_create
    return client


class _NotingStream:
    """The openai SDK's stream unchanged, noting each chunk's ``model`` (a usage-only chunk
    without one keeps the name already seen). One iterator over the one stream: Strands
    iterates it twice (to the finish reason, then to the usage chunk)."""

    def __init__(self, stream):
        self._stream, self._it = stream, stream.__aiter__()

    def __aiter__(self):
        return self

    async def __anext__(self):
        chunk = await self._it.__anext__()
        kit.probe.note(chunk)
        return chunk

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _native_tool(harness_tool):
    """Expose one harness tool as a Strands ``PythonAgentTool`` (spec = the tool's JSON schema)."""
    from strands.tools import PythonAgentTool

    spec = {
        "name": harness_tool.name,
        "description": harness_tool.description,
        "inputSchema": {"json": harness_tool.parameters},
    }

    def call(tool_use, **_invocation_state) -> dict:
        args = tool_use.get("input")
        # Strands turns unparseable argument JSON into {}: pass on exactly what it hands us.
        if not isinstance(args, dict):
            args = {}
        text = harness_tool(**args)
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": str(text)}]}

    call.__name__ = harness_tool.name
    return PythonAgentTool(harness_tool.name, spec, call)


def _message_text(message: dict | None) -> str | None:
    """The text blocks of a Strands message, one per line (None if it has none)."""
    return kit.content_text((message or {}).get("content", []), sep="\n")


def _usage(message: dict) -> dict:
    return kit.usage((message.get("metadata") or {}).get("usage") or {}, "inputTokens", "outputTokens")


class _RuntimeHooks:
    """Strands hook provider that writes ``source: runtime`` events on the recorder.

    Agent names come from ``event.agent.name``: the name Strands itself attributes the
    call to, not the name the adapter configured.
    """

    def __init__(self, rec, runtime_model: str):
        self.rec = rec
        self.runtime_model = runtime_model

    def register_hooks(self, registry, **_kwargs) -> None:
        from strands.hooks import AfterInvocationEvent, AfterModelCallEvent, BeforeToolCallEvent

        registry.add_callback(BeforeToolCallEvent, self._tool_call)
        registry.add_callback(AfterModelCallEvent, self._model_call)
        registry.add_callback(AfterInvocationEvent, self._final_message)

    def _tool_call(self, event) -> None:
        tool_use = event.tool_use
        args = tool_use.get("input")
        self.rec.tool_call(event.agent.name, tool_use.get("name"), args if isinstance(args, dict) else {})

    def _model_call(self, event) -> None:
        if event.stop_response is not None:
            seen = kit.probe.served(self.runtime_model)
            self.rec.model_call(event.agent.name, seen, _usage(event.stop_response.message))
        elif event.exception is not None and hasattr(self.rec, "error"):
            # Recorded as the runtime saw it; the exception itself still propagates.
            self.rec.error(event.agent.name, type(event.exception).__name__, str(event.exception))

    def _final_message(self, event) -> None:
        result = getattr(event, "result", None)
        if result is None:
            return
        kit.final_message(self.rec, event.agent.name, _message_text(result.message))
