"""claimgrid adapter for smolagents' ToolCallingAgent (runs inside ``.venvs/smolagents``).

Contract: docs/CONTRACTS.md ("Adapter contract", "Adapter correctness rules"); shared parts
from the kit (frameworks/_harness/kit.py).

- agent: ``smolagents.ToolCallingAgent`` with ``max_steps`` = the run's model-call budget - 1
  (at the step limit smolagents makes one more call, for a final answer:
  ``MultiStepAgent._handle_max_steps_reached``; so the run's calls are the budget) and
  the harness prompt as its ``instructions`` (smolagents' own system-prompt template, with
  its tool list and its ``final_answer`` rule, stays: it is how the framework talks to its
  model). It keeps past steps as text ("Calling tools: ... / Observation: ...") and ends a
  run only on a ``final_answer`` tool call: venvs.toml ``final_answer``. Its prompt
  templates are its own (``_prompt_templates``), parsed once per process;
- model: ``smolagents.OpenAIModel`` (``OpenAIServerModel`` is its alias; smolagents' own
  OpenAI-compatible class, on the openai SDK; no LiteLLM in this venv) at the gateway,
  Chat Completions, the SDK client's ``max_retries=0`` and the per-call deadline as its
  ``timeout``; smolagents' own rate-limit retry (``ApiModel.retryer``: 3 attempts, 60 s base
  back-off, on any exception whose text names a 429 / rate limit: the SDK's
  ``RateLimitError`` reads "Error code: 429 - ...") is the framework's and is kept;
- tools: each harness tool a ``smolagents.Tool`` whose inputs are the harness schema's
  (optional ones ``nullable``), run by the harness tool layer;
- runtime events: a step callback per ``ActionStep`` (model call with its usage and the
  served model from the response, its tool calls, its error). The served name is the
  ``model`` field of the last response ``OpenAIModel.generate`` returned (its
  ``ChatMessage.raw`` is the SDK's ``ChatCompletion``), reset before each call: the step
  smolagents adds after its final-answer call at the step limit carries no message of its
  own, so the name is noted at ``generate``, as the kit's LiteLLM probe did.
"""

from __future__ import annotations

import copy
import functools

import kit

FRAMEWORK = "smolagents"
# Model calls smolagents makes past max_steps: one, asking for a final answer
# (MultiStepAgent._handle_max_steps_reached, smolagents/agents.py).
FINAL_ANSWER_CALLS = 1


# Imported on a first model call and not by the resource access below (measured: sys.modules
# before/after one run after preload()).
FIRST_CALL_MODULES = ("jiter",)


def preload() -> None:
    """Imports what a run loads; builds (never runs) a throwaway agent and its model, whose
    openai client is the shared one (``_http_client``); computes the SDK's platform headers
    and parses a canned completion once, so no forked run pays either. No thread, no socket."""
    kit.preload("smolagents", "smolagents.agents", "smolagents.models", "smolagents.tools", "openai")
    agent = _build(kit.preload_ctl(), [], None)
    kit.prime_openai_client(agent.model.client)
    # The response JSON is read with jiter (measured: sys.modules around one run).
    kit.preload(*FIRST_CALL_MODULES, shared=False)  # and the no-thread check after all of the above


def versions() -> dict:
    return kit.versions(
        FRAMEWORK,
        "smolagents",
        retries={
            "openai_max_retries": kit.HTTP_CLIENT_MAX_RETRIES,
            "smolagents_rate_limit_attempts": 3,
            "smolagents_rate_limit_wait_s": 60,
        },
        model_client="smolagents OpenAIModel (openai SDK, no LiteLLM)",
        streaming=False,
        api="chat completions",
        system_prompt="framework: ToolCallingAgent's template (tool list, final_answer rule); harness prompt as instructions",
        turn_limit="max_steps = budgets.max_model_calls - 1 (+ one final-answer call at the limit)",
        history="steps sent back as text; a run ends on a final_answer tool call",
    )


def _tool(harness_tool, rec, agent_name):
    from smolagents import Tool

    required = set(harness_tool.parameters.get("required") or [])
    spec = {
        k: {"type": "string", "description": v.get("description", ""), **({} if k in required else {"nullable": True})}
        for k, v in harness_tool.parameters["properties"].items()
    }

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


_HTTP_CLIENT: list = []


def _http_client():
    """The openai SDK's own default httpx client (``openai.DefaultHttpxClient``: its pool
    limits, redirects), built once per process and shared by every run's ``OpenAI`` client.
    Unshared, each run (a new gateway URL) would build one, loading the CA bundle for a
    plain-HTTP gateway. Built in ``preload()`` before a warm parent forks; no connection is
    open then. The SDK sends its own per-call ``timeout`` with every request."""
    if not _HTTP_CLIENT:
        import openai

        _HTTP_CLIENT.append(openai.DefaultHttpxClient())
    return _HTTP_CLIENT[0]


@functools.cache
def _model_class():
    """``smolagents.OpenAIModel`` noting the ``model`` field of each response it returns
    (``ChatMessage.raw``, the SDK's ``ChatCompletion``); ``served`` is None until one did."""
    from smolagents import OpenAIModel

    class ServedModel(OpenAIModel):
        served: str | None = None

        def generate(self, *args, **kwargs):
            self.served = None
            message = super().generate(*args, **kwargs)
            self.served = getattr(message.raw, "model", None)
            return message

    return ServedModel


@functools.cache
def _prompt_templates() -> dict:
    """ToolCallingAgent's own prompt templates, as its constructor loads them when given none
    (``smolagents/prompts/toolcalling_agent.yaml`` through PyYAML, ``agents.py``
    ``ToolCallingAgent.__init__``), parsed once per process (in ``preload()``) instead of once
    per run; each agent gets its own copy."""
    import importlib.resources

    import yaml

    return yaml.safe_load(
        importlib.resources.files("smolagents.prompts").joinpath("toolcalling_agent.yaml").read_text()
    )


def _build(ctl: dict, tools: list, rec):
    from smolagents import ToolCallingAgent
    from smolagents.monitoring import LogLevel

    # The gateway's own model name (no LiteLLM provider prefix), as the other openai-SDK
    # adapters pass it; smolagents' stop-parameter check reads the name after any "/".
    model = _model_class()(
        model_id=ctl["model"],
        api_base=ctl["gateway_url"],
        api_key=ctl["token"],
        client_kwargs={
            "max_retries": kit.HTTP_CLIENT_MAX_RETRIES,
            "timeout": kit.call_timeout(ctl),
            "http_client": _http_client(),
        },
    )
    agent_name = ctl["agent_name"]
    steps = []

    def on_step(step, agent=None):
        from smolagents.memory import ActionStep

        if rec is None or not isinstance(step, ActionStep):
            return
        usage = step.token_usage
        rec.model_call(
            agent_name,
            model.served or ctl["model"],
            {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens} if usage else None,
        )
        if step.error is not None:
            kit.record_error(rec, agent_name, str(step.error), kind=type(step.error).__name__)
        steps.append(step)

    return ToolCallingAgent(
        tools=[_tool(t, rec, agent_name) for t in tools],
        model=model,
        prompt_templates=copy.deepcopy(_prompt_templates()),
        instructions=kit.system_prompt(ctl),
        max_steps=max_steps(ctl) if "budgets" in ctl else 20,
        verbosity_level=LogLevel.OFF,
        name=None,
        step_callbacks=[on_step],
    )


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
