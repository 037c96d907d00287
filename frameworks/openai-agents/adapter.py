"""claimgrid adapter for the OpenAI Agents SDK (runs inside ``.venvs/openai-agents``).

Contract: docs/CONTRACTS.md, "Adapter contract"; shared parts from ``kit`` (LiteLLM
settings, served-model probe, preload list, system prompt, error recording, limits).

- model: the SDK's ``LitellmModel`` at the gateway (``openai/<model>``, LiteLLM retries 0,
  the SDK's runner retries left off: ``ModelSettings.retry`` unset);
- tools: each harness tool is a ``FunctionTool`` with the harness JSON schema
  (``strict_json_schema=False``: the harness schemas have optional fields);
- turn limit: ``max_turns`` = the run's model-call budget (``MaxTurnsExceeded`` past it);
- tracing: off (``tracing_disabled`` and ``OPENAI_AGENTS_DISABLE_TRACING``): the SDK's
  exporter would otherwise start a background thread and post traces to OpenAI;
- runtime events: ``RunHooks`` (``on_llm_end``, ``on_tool_start``, ``on_agent_end``),
  agent name = the ``Agent`` the SDK passes to the hook.
"""

from __future__ import annotations

import json

import kit

FRAMEWORK = "openai-agents"


def preload() -> None:
    kit.preload("agents", "agents.extensions.models.litellm_model", "agents.run_internal.run_loop")
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    _build(kit.preload_ctl(), [])


def versions() -> dict:
    from agents.run import DEFAULT_MAX_TURNS

    return kit.versions(
        FRAMEWORK, "openai-agents",
        retries={"sdk_runner_retry": "off (ModelSettings.retry unset)"},
        max_turns="budgets.max_model_calls (SDK default %d)" % DEFAULT_MAX_TURNS,
        tracing="disabled", streaming=False,
        malformed_tool_args="raw JSON string reaches on_invoke_tool; json.loads raises, the SDK's "
                            "FunctionTool error handling decides",
    )


def _tool(harness_tool):
    from agents import FunctionTool

    async def invoke(_ctx, raw: str) -> str:
        # The SDK hands a FunctionTool the model's raw argument string (documented: the
        # callback parses it). A parse error is raised, as the SDK's own function_tool does.
        args = json.loads(raw) if raw else {}
        return harness_tool(**args)

    return FunctionTool(name=harness_tool.name, description=harness_tool.description,
                        params_json_schema=harness_tool.parameters, on_invoke_tool=invoke,
                        strict_json_schema=False)


def _build(ctl: dict, tools: list):
    from agents import Agent, ModelSettings
    from agents.extensions.models.litellm_model import LitellmModel

    model = LitellmModel(model=kit.gateway_model(ctl), base_url=ctl["gateway_url"], api_key=ctl["token"])
    return Agent(name=ctl["agent_name"], instructions=kit.system_prompt(ctl), model=model,
                 tools=[_tool(t) for t in tools],
                 model_settings=ModelSettings(extra_args={"num_retries": kit.LITELLM_NUM_RETRIES,
                                                          "timeout": kit.call_timeout(ctl)}))


def _hooks(rec, ctl):
    from agents import RunHooks

    class Hooks(RunHooks):
        async def on_llm_end(self, context, agent, response):
            rec.model_call(agent.name, kit.probe.served(ctl["model"]), kit.usage(response.usage))

        async def on_tool_start(self, context, agent, tool):
            raw = getattr(context, "tool_arguments", None)
            rec.tool_call(agent.name, tool.name, kit.tool_args(raw) if raw else {})

        async def on_agent_end(self, context, agent, output):
            kit.final_message(rec, agent.name, str(output))

    return Hooks()


def run(ctl: dict, tools: list, rec) -> str | None:
    from agents import RunConfig, Runner

    limit = kit.turn_limit(ctl)
    kit.start_run(rec, ctl, limit, "model calls (max_turns)", "framework")
    agent = _build(ctl, tools)
    with kit.recording_errors(rec, ctl["agent_name"]):
        result = Runner.run_sync(agent, ctl["prompt"], max_turns=limit, hooks=_hooks(rec, ctl),
                                 run_config=RunConfig(tracing_disabled=True))
    out = result.final_output
    return None if out is None else str(out)
