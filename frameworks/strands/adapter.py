"""claimgrid adapter for Strands Agents (runs inside ``.venvs/strands``, never in the driver).

Contract (docs/CONTRACTS.md, "Adapter contract"): ``FRAMEWORK``, ``preload()``,
``versions()`` and ``run(ctl, tools, rec) -> str | None``.

How a run is built, all with Strands' own parts:

- model: ``strands.models.litellm.LiteLLMModel`` pointed at the harness gateway
  (``api_base`` = ``ctl["gateway_url"]``, ``api_key`` = the run token, model id
  ``"openai/" + ctl["model"]``), streaming as Strands does by default (SSE with usage
  chunks, ``stream_options.include_usage``);
- tools: each harness tool becomes a ``strands.tools.PythonAgentTool`` whose spec is the
  harness tool's JSON schema and whose function calls the harness tool with the JSON
  arguments the model sent;
- agent: ``strands.Agent`` with ``callback_handler=None`` (no console printing);
- runtime events: a Strands ``HookProvider`` (``BeforeToolCallEvent``,
  ``AfterModelCallEvent``, ``AfterInvocationEvent``), attributed to ``event.agent.name``.

What Strands does not expose, and what is recorded instead:

- Strands drops the ``model`` field of LiteLLM's responses (neither its stream events
  nor ``AfterModelCallEvent`` carry it). The kit's probe wraps ``litellm.acompletion``
  (the call ``LiteLLMModel`` makes) to note the model name on the response/chunks LiteLLM hands
  to Strands (for streams, LiteLLM's ``provider_response_model`` hidden param: it rewrites
  each chunk's ``model`` to the requested name), and ``model_call`` events carry that
  name: a "reported" swap is visible in the runtime channel, a "silent" one is not. Only
  if no response carried a name does the event fall back to the configured model.
- Strands has no limit on event-loop cycles. The budget ``max_model_calls`` is enforced
  by the gateway (it refuses with HTTP 429 once spent); what Strands does with that
  refusal is the framework's own behaviour and is part of the result.

Retries are fixed, not left to defaults, because they change what a run sends to the
gateway: LiteLLM ``num_retries=0`` (which also sets the OpenAI client's ``max_retries``
to 0; LiteLLM's default would be 2 silent client retries). Strands' own
``ModelRetryStrategy`` is left at its default (6 attempts, 4 s initial delay, 240 s
cap); it only retries ``ModelThrottledException``, which ``LiteLLMModel`` never raises
(a 429 surfaces as ``litellm.RateLimitError``), so in practice it does not retry.
Tools run with ``SequentialToolExecutor`` (Strands' default runs a response's tool calls
concurrently in threads), so that the harness tool layer's before/after workspace
snapshots of one call are not interleaved with another's.
"""

from __future__ import annotations

import kit

FRAMEWORK = "strands"

TOOL_EXECUTOR = "sequential"


def preload() -> None:
    """Import every module a run loads (kit's shared list + Strands'), so a child forked
    from a warm parent imports nothing heavy; then build one throwaway agent (no model
    call): Strands and LiteLLM import further modules lazily on first construction."""
    kit.preload("strands", "strands.hooks", "strands.models.litellm", "strands.tools", "strands.tools.executors")
    _build_agent(ctl=kit.preload_ctl(), tools=[], rec=None)


def versions() -> dict:
    """Parity facts: versions (kit), and the retry/executor settings used."""
    from strands.event_loop.event_loop import INITIAL_DELAY, MAX_ATTEMPTS, MAX_DELAY

    return kit.versions(
        FRAMEWORK, "strands-agents",
        retries={"strands_model_retry": {
            "strategy": "ModelRetryStrategy (default)", "max_attempts": MAX_ATTEMPTS,
            "initial_delay_s": INITIAL_DELAY, "max_delay_s": MAX_DELAY,
            "retries_on": "ModelThrottledException (not raised by LiteLLMModel)"}},
        streaming=True, tool_executor=TOOL_EXECUTOR, max_model_calls_enforced_by="gateway",
        runtime_model_name="litellm response (Strands drops it; kit probe at litellm.acompletion)",
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


def _build_agent(ctl: dict, tools: list, rec):
    from strands import Agent
    from strands.models.litellm import LiteLLMModel
    from strands.tools.executors import SequentialToolExecutor

    model = LiteLLMModel(
        client_args={"api_key": ctl["token"], "api_base": ctl["gateway_url"]},
        model_id=kit.gateway_model(ctl),
        params={"num_retries": kit.LITELLM_NUM_RETRIES, "timeout": kit.call_timeout(ctl)},
    )
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
