"""claimgrid adapter for smolagents' ToolCallingAgent (runs inside ``.venvs/smolagents``).

Contract: docs/CONTRACTS.md ("Adapter contract", "Adapter correctness rules"); shared parts
from the kit (frameworks/_harness/kit.py).

- agent: ``smolagents.ToolCallingAgent`` with ``max_steps`` = the run's model-call budget - 1
  (at the step limit smolagents makes one more call, for a final answer:
  ``MultiStepAgent._handle_max_steps_reached``; so the run's calls are the budget) and
  the harness prompt as its ``instructions`` (smolagents' own system-prompt template, with
  its tool list and its ``final_answer`` rule, stays: it is how the framework talks to its
  model). It keeps past steps as text ("Calling tools: ... / Observation: ...") and ends a
  run only on a ``final_answer`` tool call: venvs.toml ``final_answer``;
- model: ``smolagents.LiteLLMModel`` (``openai/<model>`` at the gateway), LiteLLM
  ``num_retries=0``; smolagents' own rate-limit retry (``ApiModel.retryer``: 3 attempts,
  60 s base back-off) is the framework's and is kept;
- tools: each harness tool a ``smolagents.Tool`` whose inputs are the harness schema's
  (optional ones ``nullable``), run by the harness tool layer;
- runtime events: a step callback per ``ActionStep`` (model call with its usage and the
  served model from the response probe, its tool calls, its error).
"""

from __future__ import annotations

import kit

FRAMEWORK = "smolagents"
# Model calls smolagents makes past max_steps: one, asking for a final answer
# (MultiStepAgent._handle_max_steps_reached, smolagents/agents.py).
FINAL_ANSWER_CALLS = 1


def preload() -> None:
    kit.preload("smolagents", "smolagents.agents", "smolagents.models", "smolagents.tools")
    _build(kit.preload_ctl(), [], None)


def versions() -> dict:
    return kit.versions(
        FRAMEWORK, "smolagents",
        retries={"litellm_num_retries": kit.LITELLM_NUM_RETRIES, "smolagents_rate_limit_attempts": 3,
                 "smolagents_rate_limit_wait_s": 60},
        system_prompt="framework: ToolCallingAgent's template (tool list, final_answer rule); harness prompt as instructions",
        turn_limit="max_steps = budgets.max_model_calls - 1 (+ one final-answer call at the limit)",
        history="steps sent back as text; a run ends on a final_answer tool call",
    )


def _tool(harness_tool, rec, agent_name):
    from smolagents import Tool

    required = set(harness_tool.parameters.get("required") or [])
    spec = {k: {"type": "string", "description": v.get("description", ""), **({} if k in required else {"nullable": True})}
            for k, v in harness_tool.parameters["properties"].items()}

    class HarnessTool(Tool):
        name = harness_tool.name
        description = harness_tool.description
        inputs = spec
        output_type = "string"
        skip_forward_signature_validation = True

        def forward(self, **kwargs):
            args = {k: v for k, v in kwargs.items() if v is not None}
            if rec is not None:
                rec.tool_call(agent_name, harness_tool.name, args)
            return harness_tool(**args)

    return HarnessTool()


def _build(ctl: dict, tools: list, rec):
    from smolagents import LiteLLMModel, ToolCallingAgent
    from smolagents.monitoring import LogLevel

    model = LiteLLMModel(model_id=kit.gateway_model(ctl), api_base=ctl["gateway_url"], api_key=ctl["token"],
                         num_retries=kit.LITELLM_NUM_RETRIES, timeout=kit.call_timeout(ctl))
    agent_name = ctl["agent_name"]
    steps = []

    def on_step(step, agent=None):
        from smolagents.memory import ActionStep

        if rec is None or not isinstance(step, ActionStep):
            return
        usage = step.token_usage
        rec.model_call(agent_name, kit.probe.served(ctl["model"]),
                       {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens} if usage else None)
        if step.error is not None:
            kit.record_error(rec, agent_name, str(step.error), kind=type(step.error).__name__)
        steps.append(step)

    return ToolCallingAgent(tools=[_tool(t, rec, agent_name) for t in tools], model=model,
                            instructions=kit.system_prompt(ctl), max_steps=max_steps(ctl) if "budgets" in ctl else 20,
                            verbosity_level=LogLevel.OFF, name=None, step_callbacks=[on_step])


def max_steps(ctl: dict) -> int:
    """``max_steps`` for the run: the budget less the final-answer call smolagents makes at the
    limit, so steps + that call are the run's model calls (at least one step)."""
    return max(1, kit.turn_limit(ctl) - FINAL_ANSWER_CALLS)


def run(ctl: dict, tools: list, rec) -> str | None:
    limit = max_steps(ctl) + FINAL_ANSWER_CALLS
    kit.start_run(rec, ctl, limit, "model calls (ToolCallingAgent max_steps + one final-answer call)", "framework")
    agent = ctl["agent_name"]
    with kit.recording_errors(rec, agent):
        out = _build(ctl, tools, rec).run(ctl["prompt"])
    return kit.final_message(rec, agent, None if out is None else str(out))
