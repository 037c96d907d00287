"""claimgrid adapter for Agno's ``Agent`` (runs inside ``.venvs/agno``, never imported by the driver).

Contract: docs/CONTRACTS.md ("Adapter contract", "Adapter correctness rules"); shared parts
from the kit (frameworks/_harness/kit.py).

- agent: ``agno.agent.Agent`` named ``ctl["agent_name"]``, the harness prompt as its
  ``instructions`` (Agno builds the system message around them), ``telemetry=False`` (and
  ``AGNO_TELEMETRY=false`` from venvs.toml, which Agno reads over the constructor), no db,
  no memory, no history: Agno's defaults otherwise. ``Agent.run`` (sync, not streamed);
- model: ``agno.models.openai.like.OpenAILike`` (Agno's documented class for an
  OpenAI-compatible server) with ``base_url`` = the gateway, ``api_key`` = the run token,
  the OpenAI SDK's ``max_retries=0`` and the per-call deadline as ``timeout``. Agno's own
  retries stay at their defaults (``Model.retries = 0``, ``Agent.retries = 0``); LiteLLM is
  not in this venv. The subclass only observes: each parsed response's served model name
  and usage become a runtime ``model_call`` for the agent Agno runs the model for;
- tools: each harness tool an ``agno.tools.function.Function`` with the harness JSON schema
  (``skip_entrypoint_processing``, as Agno's MCP toolkit wraps a foreign schema); the
  entrypoint takes Agno's injected ``_agno_agent`` so a tool call is attributed to it;
- turn limit: none in Agno (``tool_call_limit`` counts tool calls, not model calls, and is
  unset by default): the gateway's budget refusal is the stop;
- errors: ``Agent.run`` catches every exception of the run and returns a ``RunOutput`` with
  ``status = RunStatus.error`` and the error's text as its content (agno/agent/_run.py,
  ``_run``). That status is Agno's report that the run failed: the adapter records it as a
  runtime ``error`` and raises ``AgnoRunError`` with that text (after the model call's
  exception type, e.g. ``ModelProviderError``, when the model call failed), never returning
  it as the agent's answer.
"""

from __future__ import annotations

import kit

FRAMEWORK = "agno"


class AgnoRunError(RuntimeError):
    """The run ended with Agno's ``RunStatus.error``; the message is the content Agno set,
    after the type of the model call's exception when the model call failed."""


def preload() -> None:
    kit.preload(
        "agno.agent",
        "agno.models.openai.like",
        "agno.tools.function",
        "agno.run.agent",
        "agno.utils.functions",
        "openai",
    )
    _build(kit.preload_ctl(), [], None)


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        "agno",
        retries={"agno_model_retries": 0, "agno_agent_retries": 0, "agno_retry_with_guidance_limit": 1},
        model_client="openai SDK via agno OpenAILike (no LiteLLM)",
        streaming=False,
        turn_limit="none (tool_call_limit unset; the gateway's budget refusal stops a run)",
        telemetry="off (telemetry=False, AGNO_TELEMETRY=false)",
        run_errors="Agent.run returns RunStatus.error with the error text; the adapter raises it",
    )


def _tool(harness_tool, rec):
    from agno.tools.function import Function

    def call(_agno_agent=None, **kwargs):
        if rec is not None:  # attributed to the agent Agno runs the tool for
            rec.tool_call(getattr(_agno_agent, "name", None), harness_tool.name, kwargs)
        return harness_tool(**kwargs)

    return Function(
        name=harness_tool.name,
        description=harness_tool.description,
        parameters=harness_tool.parameters,
        entrypoint=call,
        skip_entrypoint_processing=True,
    )


def _model(ctl: dict, rec):
    from agno.models.openai.like import OpenAILike

    class GatewayModel(OpenAILike):
        """OpenAILike unchanged; each parsed chat completion noted as a runtime model call."""

        def invoke(self, *args, run_response=None, **kwargs):
            self._claimgrid_agent = getattr(run_response, "agent_name", None)
            self._claimgrid_error = None
            try:
                return super().invoke(*args, run_response=run_response, **kwargs)
            except BaseException as exc:  # noted for the run's error, then raised on unchanged
                self._claimgrid_error = exc
                raise

        def _parse_provider_response(self, response, **kwargs):
            parsed = super()._parse_provider_response(response, **kwargs)
            if rec is not None:
                rec.model_call(
                    getattr(self, "_claimgrid_agent", None),
                    getattr(response, "model", None),
                    kit.usage(getattr(response, "usage", None), "prompt_tokens", "completion_tokens"),
                )
            return parsed

    return GatewayModel(
        id=ctl["model"],
        base_url=ctl["gateway_url"],
        api_key=ctl["token"],
        max_retries=kit.HTTP_CLIENT_MAX_RETRIES,
        timeout=kit.call_timeout(ctl),
    )


def _build(ctl: dict, tools: list, rec):
    from agno.agent import Agent

    return Agent(
        name=ctl["agent_name"],
        model=_model(ctl, rec),
        instructions=kit.system_prompt(ctl),
        tools=[_tool(t, rec) for t in tools],
        telemetry=False,
    )


def run(ctl: dict, tools: list, rec) -> str | None:
    from agno.run.base import RunStatus

    kit.start_run(rec, ctl, None, "model calls (none in Agno: tool_call_limit counts tool calls)", "gateway")
    agent = ctl["agent_name"]
    with kit.recording_errors(rec, agent):
        built = _build(ctl, tools, rec)
        out = built.run(ctl["prompt"])
        if out.status == RunStatus.error:
            # Agno caught the run's exception itself; its status says the run failed. The
            # exception type is named when the failing call was the model's.
            cause = getattr(built.model, "_claimgrid_error", None)
            raise AgnoRunError(kit.clip(f"{type(cause).__name__}: {out.content}" if cause else out.content))
    text = out.content
    return kit.final_message(rec, out.agent_name or agent, None if text is None else str(text))
