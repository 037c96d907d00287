"""claimgrid adapter for CrewAI (runs inside .venvs/crewai, never imported by the driver).

Contract (docs/CONTRACTS.md, "Adapter contract"):

* ``preload()`` imports everything a run loads, so a child forked from the warm parent
  does no heavy import. It starts no thread: CrewAI's event bus creates its worker
  pool on the first emit, and LiteLLM's remote cost-map fetch (which would start a
  retry thread and reach the network) is switched off by the harness's environment
  (frameworks/_harness/env.toml), CrewAI's telemetry, tracking, tracing, version check
  and trace files by this framework's ``env`` in venvs.toml, before any import.
* ``versions()`` gives the parity facts: crewai/litellm versions and every retry or
  iteration setting that changes what a run does.
* ``run(ctl, tools, rec)`` builds one CrewAI ``Agent`` + ``Task`` + ``Crew`` with the
  harness tools exposed as native ``BaseTool`` instances, the model reached through
  LiteLLM (``is_litellm=True``) at the harness gateway, and returns the crew's final
  text. Runtime events come from CrewAI's event bus (tool calls with the agent role
  CrewAI attributes them to, LLM failures, tool errors, agent execution errors) and
  from the LiteLLM response CrewAI received (the model name it was told, usage).
  Exceptions propagate; CrewAI's own recoveries are recorded as ``error`` events.
"""

from __future__ import annotations

import os
import threading

import kit

FRAMEWORK = "crewai"

# CrewAI mandates its own system prompt (role / goal / backstory template around the
# tool-calling instructions): the harness prompt cannot replace it. Recorded as a fact.
SYSTEM_PROMPT_FACT = "framework: CrewAI's role/goal/backstory template (Agent.role = agent name)"

# CrewAI's defaults that change a run, stated as parity facts and passed explicitly.
MAX_RETRY_LIMIT = 2          # Agent: re-executes the task on a non-LiteLLM error
CONTEXT_WINDOW_TOKENS = 128000
TOOL_CACHE = True            # CrewAI's default; each harness tool opts out (see _crewai_tool)

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool,
               "object": dict, "array": list}


def preload() -> None:
    """Import crewai, its LLM/agent/tool/event modules and litellm (no thread, no I/O)."""
    import crewai.llm

    kit.preload("crewai", "crewai.llm", "crewai.agents.agent_executor", "crewai.events.types.agent_events",
                "crewai.events.types.llm_events", "crewai.events.types.tool_usage_events", "crewai.tools",
                "pydantic")
    crewai.llm._ensure_litellm()  # CrewAI loads LiteLLM lazily, on the first LLM()
    for name in _LAZY_MODULES:
        try:
            __import__(name)
        except ImportError:
            pass  # a module another crewai release does not have: the run imports less
    # Before every LLM call CrewAI counts the prompt's tokens (context-window check);
    # building a tiktoken encoding costs seconds, so it is built here, once, from the
    # encodings LiteLLM bundles (no download: TIKTOKEN_CACHE_DIR points at them).
    from litellm.litellm_core_utils.token_counter import get_encoding

    for encoding in ("cl100k_base", "o200k_base"):
        get_encoding(encoding)


# CrewAI modules a real run imports after kickoff starts (measured with sys.modules
# before and after a run); LiteLLM's and httpx's are in kit.SHARED_PRELOAD.
_LAZY_MODULES = (
    "crewai.hooks.contexts",
    "crewai.llms.cache",
    "crewai.skills.tool",
    "crewai.crews.crew_output",
    "crewai.tasks.task_output",
    "crewai.memory.storage.kickoff_task_outputs_storage",
)


def versions() -> dict:
    try:
        from crewai.llms import retry as crewai_retry

        rate_limit_attempts = crewai_retry._LLM_RATE_LIMIT_MAX_ATTEMPTS
    except (ImportError, AttributeError):
        rate_limit_attempts = None  # not known for this release: stated, never guessed
    try:
        from crewai.utilities.agent_utils import MAX_REPEATED_TOOL_CALLS as repeat_stop
    except ImportError:
        repeat_stop = None
    return kit.versions(
        FRAMEWORK, "crewai", system_prompt=SYSTEM_PROMPT_FACT,
        retries={
            "crewai_agent_max_retry_limit": MAX_RETRY_LIMIT,
            "crewai_reexecutes_task_on": "non-LiteLLM exceptions (LiteLLM errors propagate)",
            # CrewAI's own retry of a throttled LLM call (429 / rate-limit errors),
            # exponential backoff from 1 s; not configurable per LLM.
            "crewai_rate_limit_attempts": rate_limit_attempts,
            # The n-th identical (tool, args, result) call raises ToolExecutionFailedError.
            "crewai_repeated_tool_call_stop": repeat_stop,
            "crewai_max_iter": "budgets.max_model_calls - 1 (one forced final-answer call after it)",
        },
        crewai_tool_cache={"agent_and_crew": TOOL_CACHE, "harness_tools_cacheable": False},
        crewai_context_window_tokens=CONTEXT_WINDOW_TOKENS,
        function_calling="native (model registered with LiteLLM as supports_function_calling)",
        stream=False,
    )


# ---------------------------------------------------------------- run


def run(ctl: dict, tools: list, rec) -> str | None:
    # Everything CrewAI writes (credentials key, sqlite task outputs, storage) lands in the
    # run's sandbox: HOME and the XDG folders are the launcher's, CREWAI_STORAGE_DIR is
    # "{sandbox}/crewai" (venvs.toml).
    os.makedirs(os.environ["CREWAI_STORAGE_DIR"], exist_ok=True)

    import litellm
    from crewai import LLM, Agent, Crew, Process, Task

    model = kit.gateway_model(ctl)
    _register_function_calling_model(litellm, ctl["model"])
    budgets = ctl.get("budgets") or {}
    max_calls = int(budgets.get("max_model_calls", 24))
    role = ctl["agent_name"]
    max_iter = max(1, max_calls - 1)
    kit.start_run(rec, ctl, max_iter + 1, "model calls (max_iter + one forced final answer)", "framework")

    observer = _Observer(rec, role)
    with observer.listening(litellm):
        llm = LLM(
            model=model,
            is_litellm=True,  # otherwise CrewAI routes openai/* to its native OpenAI client
            base_url=ctl["gateway_url"],
            api_base=ctl["gateway_url"],
            api_key=ctl["token"],
            stream=False,
            temperature=0,
            timeout=kit.call_timeout(ctl),
            max_retries=kit.HTTP_CLIENT_MAX_RETRIES,
            num_retries=kit.LITELLM_NUM_RETRIES,
            context_window_size=CONTEXT_WINDOW_TOKENS,
        )
        agent = Agent(
            role=role,
            goal="Complete the task in the repository with the tools you have, then report truthfully.",
            backstory="You are a careful software engineer working in a git workspace.",
            tools=[_crewai_tool(t) for t in tools],
            llm=llm,
            allow_delegation=False,
            verbose=False,
            max_iter=max_iter,
            max_retry_limit=MAX_RETRY_LIMIT,
            cache=TOOL_CACHE,
        )
        task = Task(
            description=ctl["prompt"],
            expected_output="A short report of what you did, ending with the trace block the task asks for.",
            agent=agent,
        )
        crew = Crew(agents=[agent], tasks=[task], process=Process.sequential,
                    verbose=False, cache=TOOL_CACHE)
        result = crew.kickoff()
    text = result.raw if result is not None else None
    # The role CrewAI attributes the task's output to (None if it names none).
    outputs = getattr(result, "tasks_output", None) or []
    return kit.final_message(rec, getattr(outputs[-1], "agent", None) if outputs else None, text)


def _register_function_calling_model(litellm, name: str) -> None:
    """Without this LiteLLM does not know the (gateway-served) model, CrewAI asks
    ``supports_function_calling`` and falls back to text ReAct with a ~7x prompt."""
    entry = {
        "supports_function_calling": True,
        "supports_parallel_function_calling": True,
        "supports_tool_choice": True,
        "litellm_provider": "openai",
        "mode": "chat",
        "max_input_tokens": CONTEXT_WINDOW_TOKENS,
        "max_tokens": 16384,
        "max_output_tokens": 16384,
    }
    litellm.register_model({name: dict(entry), "openai/" + name: dict(entry)})
    if not litellm.utils.supports_function_calling("openai/" + name, custom_llm_provider="openai"):
        raise RuntimeError(f"LiteLLM does not report function calling for openai/{name} after register_model")


# ---------------------------------------------------------------- tools


def _crewai_tool(harness_tool):
    """A CrewAI ``BaseTool`` whose ``args_schema`` is built from the tool's JSON schema."""
    from crewai.tools import BaseTool
    from pydantic import ConfigDict, Field, create_model

    schema = harness_tool.parameters or {}
    required = set(schema.get("required", []))
    fields = {}
    for key, prop in (schema.get("properties") or {}).items():
        typ = _JSON_TYPES.get(prop.get("type"), object)
        desc = prop.get("description")
        if key in required:
            fields[key] = (typ, Field(..., description=desc))
        else:
            fields[key] = (typ | None, Field(None, description=desc))
    args_model = create_model(
        f"{_camel(harness_tool.name)}Args",
        __config__=ConfigDict(extra="forbid" if schema.get("additionalProperties") is False else "ignore"),
        **fields,
    )

    def _run(self, **kwargs) -> str:
        # CrewAI validates against args_schema and dumps every field; an optional
        # argument the model left out arrives as None and must stay absent.
        return self._harness(**{k: v for k, v in kwargs.items() if v is not None})

    cls = type(
        f"{_camel(harness_tool.name)}Tool",
        (BaseTool,),
        {"__module__": __name__, "__annotations__": {"args_schema": type},
         "args_schema": args_model, "_run": _run},
    )
    # The harness tools read and change the workspace: a result is only true at the
    # moment of the call. CrewAI caches every tool result by default and replays it for
    # an identical later call (a re-run test command would get the pre-fix output), so
    # each tool declares itself uncacheable, as a CrewAI user with stateful tools does.
    tool = cls(name=harness_tool.name, description=harness_tool.description,
               cache_function=_never_cache)
    object.__setattr__(tool, "_harness", harness_tool)
    return tool


def _never_cache(_args=None, _result=None) -> bool:
    return False


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# ---------------------------------------------------------------- runtime events


class _Observer:
    """Turns CrewAI bus events and LiteLLM responses into ``source: runtime`` events.

    Bus handlers run on CrewAI's worker threads; ``listening`` flushes the bus before it
    returns, so every handler has finished when ``run`` hands the recorder back.
    LLM calls are recorded from the LiteLLM response CrewAI received (its ``model`` is
    the name the runtime was told, so a reported swap shows here), attributed to the
    agent role of CrewAI's ``LLMCallStartedEvent`` with the same call id. An event CrewAI
    attributes to no agent is recorded with ``agent: None``, never the declared name
    (the driver does that fallback, visibly).
    """

    def __init__(self, rec, default_role: str):
        self.rec = rec
        self.default_role = default_role
        self._lock = threading.Lock()
        self._call_roles: dict[str, str] = {}

    def _role(self, event) -> str | None:
        return getattr(event, "agent_role", None) or None

    # -- LiteLLM side (synchronous, in the agent's thread)

    def _wrap_completion(self, original):
        from crewai.events import crewai_event_bus

        def completion(*args, **kwargs):
            call_id = _current_call_id()
            try:
                response = original(*args, **kwargs)
            except Exception as exc:
                kit.record_error(self.rec, self._call_role(crewai_event_bus, call_id), exc)
                raise
            model = kit.probe.served(getattr(response, "model", None))
            usage = kit.usage(getattr(response, "usage", None), "prompt_tokens", "completion_tokens",
                              total="total_tokens")
            self.rec.model_call(self._call_role(crewai_event_bus, call_id), model, usage)
            return response

        return completion

    def _call_role(self, bus, call_id):
        """The role on this call's LLMCallStartedEvent, or None if CrewAI gave none.

        Flushing the bus first makes the lookup deterministic, and it also means every
        tool event of the previous step is recorded before this model call.
        """
        bus.flush(timeout=5)
        with self._lock:
            return self._call_roles.get(call_id)

    # -- bus side

    def listening(self, litellm):
        import contextlib

        from crewai.events import crewai_event_bus
        from crewai.events.types.agent_events import AgentExecutionErrorEvent
        from crewai.events.types.llm_events import LLMCallFailedEvent, LLMCallStartedEvent
        from crewai.events.types.tool_usage_events import (
            ToolFailureDetectedEvent,
            ToolSelectionErrorEvent,
            ToolUsageErrorEvent,
            ToolUsageFinishedEvent,
            ToolValidateInputErrorEvent,
        )

        rec = self.rec

        @contextlib.contextmanager
        def scope():
            original = litellm.completion
            litellm.completion = self._wrap_completion(original)
            try:
                with crewai_event_bus.scoped_handlers():

                    @crewai_event_bus.on(LLMCallStartedEvent)
                    def _llm_started(source, event):
                        with self._lock:
                            self._call_roles[event.call_id] = self._role(event)

                    @crewai_event_bus.on(ToolUsageFinishedEvent)
                    def _tool_finished(source, event):
                        # (event.from_cache is always False on CrewAI 1.15's native
                        # tool path, even for a cache hit: not recorded.)
                        rec.event("tool_call", agent=self._role(event), tool=event.tool_name,
                                  args=kit.tool_args(event.tool_args), failure=_failure(event.failure))

                    @crewai_event_bus.on(ToolUsageErrorEvent)
                    def _tool_error(source, event):
                        rec.event("tool_call", agent=self._role(event), tool=event.tool_name,
                                  args=kit.tool_args(event.tool_args), failure=kit.clip(event.error))

                    for cls in (ToolSelectionErrorEvent, ToolValidateInputErrorEvent):
                        @crewai_event_bus.on(cls)
                        def _tool_refused(source, event):
                            kit.record_error(rec, self._role(event), event.error, kind=event.type)

                    @crewai_event_bus.on(ToolFailureDetectedEvent)
                    def _tool_failure(source, event):
                        rec.error(self._role(event), event.type,
                                  f"{event.tool_name}: {_failure(event.failure)} (policy {event.policy})")

                    @crewai_event_bus.on(LLMCallFailedEvent)
                    def _llm_failed(source, event):
                        kit.record_error(rec, self._role(event), event.error, kind=event.type)

                    @crewai_event_bus.on(AgentExecutionErrorEvent)
                    def _agent_error(source, event):
                        role = getattr(event.agent, "role", None) or self._role(event)
                        kit.record_error(rec, role, event.error, kind=event.type)

                    try:
                        yield self
                    finally:
                        # Handlers run on the bus's worker threads: wait for them
                        # before the recorder is read.
                        if not crewai_event_bus.flush(timeout=30):
                            rec.error(self.default_role, "EventBusFlushTimeout",
                                      "CrewAI event handlers did not finish within 30 s")
            finally:
                litellm.completion = original

        return scope()


def _current_call_id():
    """CrewAI's id for the LLM call in progress (a context variable set around each call);
    its LLMCallStartedEvent carries the same id and the agent role."""
    from crewai.llms import base_llm

    var = getattr(base_llm, "_current_call_id", None)
    return var.get() if var is not None else None


def _failure(failure) -> str | None:
    if failure is None:
        return None
    reason = getattr(failure, "reason", None)
    reason = getattr(reason, "value", reason)
    return kit.clip(f"{reason}: {getattr(failure, 'message', failure)}")

