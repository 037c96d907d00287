"""claimgrid adapter for CrewAI (runs inside .venvs/crewai, never imported by the driver).

Contract (docs/CONTRACTS.md, "Adapter contract"):

* ``preload()`` imports everything a run loads, so a child forked from the warm parent
  does no heavy import, and builds one throwaway model (the openai SDK's client and its
  first-use work). It starts no thread: CrewAI's event bus creates its worker pool on
  the first emit; CrewAI's telemetry, tracking, tracing, version check and trace files
  are off by this framework's ``env`` in venvs.toml, before any import.
* ``versions()`` gives the parity facts: crewai/openai versions, the model client, and
  every retry or iteration setting that changes what a run does.
* ``run(ctl, tools, rec)`` builds one CrewAI ``Agent`` + ``Task`` + ``Crew`` with the
  harness tools exposed as native ``BaseTool`` instances, the model reached through
  CrewAI's native OpenAI provider (``crewai.llms.providers.openai.completion.
  OpenAICompletion``, on the openai SDK: what ``LLM(model="openai/<name>", base_url=...)``
  builds; LiteLLM is not in this venv) at the harness gateway, and returns the crew's
  final text. Runtime events come from CrewAI's event bus (tool calls with the agent role
  CrewAI attributes them to, LLM failures, tool errors, agent execution errors) and from
  the openai SDK response CrewAI parsed (the model name the endpoint sent, usage).
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
MAX_RETRY_LIMIT = 2  # Agent: re-executes the task on an error (model errors included)
# The model's context window CrewAI plans with (proactive summarization before a call,
# deferral of a tool result over a quarter of it). The native provider knows only
# OpenAI's own model names and gives any other 85% of 8192 tokens; the grid's models
# are stated at 128k, as the LiteLLM-era adapter passed with ``context_window_size``.
CONTEXT_WINDOW_TOKENS = 128000
TOOL_CACHE = True  # CrewAI's default; each harness tool opts out (see _crewai_tool)

_JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict, "array": list}


def preload() -> None:
    """Import crewai, its LLM/agent/tool/event modules and the native OpenAI provider;
    build one model (no call: the preload gateway is a closed port), so the openai SDK's
    clients and first-use work exist before a fork (no thread, no I/O)."""
    kit.preload(
        "crewai",
        "crewai.llm",
        "crewai.agents.agent_executor",
        "crewai.events.types.agent_events",
        "crewai.events.types.llm_events",
        "crewai.events.types.tool_usage_events",
        "crewai.tools",
        "crewai.llms.providers.openai.completion",
        "openai",
        "pydantic",
    )
    for name in _LAZY_MODULES:
        try:
            __import__(name)
        except ImportError:
            pass  # a module another crewai release does not have: the run imports less
    # The openai SDK's first-use work (CrewAI calls the raw-response wrapper kit primes).
    kit.prime_openai_client(_gateway_llm(kit.preload_ctl(), None)._get_sync_client())


# CrewAI modules a real run imports after kickoff starts (measured with sys.modules
# before and after a run); the openai SDK's and httpx's are in kit.SHARED_PRELOAD.
_LAZY_MODULES = (
    "crewai.hooks.contexts",
    "crewai.llms.cache",
    "crewai.skills.tool",
    "crewai.crews.crew_output",
    "crewai.tasks.task_output",
    "crewai.memory.storage.kickoff_task_outputs_storage",
    # on a failed attempt (CrewAI prints the error with rich, closes its trace scope)
    "rich._emoji_codes",
    "crewai.telemetry.tracing.gen_ai_shapes",
    "crewai.telemetry.tracing.grants",
    "crewai.telemetry.tracing.last_run",
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
        FRAMEWORK,
        "crewai",
        system_prompt=SYSTEM_PROMPT_FACT,
        retries={
            # OpenAICompletion(max_retries=0) is the openai SDK client's max_retries.
            "openai_client_max_retries": kit.HTTP_CLIENT_MAX_RETRIES,
            "crewai_agent_max_retry_limit": MAX_RETRY_LIMIT,
            # Agent._check_execution_error: every error but a LiteLLM one (none here),
            # ToolExecutionFailedError and HookAborted re-executes the task, so a model
            # call that fails (openai SDK error) is tried again up to this limit.
            "crewai_reexecutes_task_on": "any error but ToolExecutionFailedError / HookAborted "
            "(model errors included: no LiteLLM in this venv)",
            # CrewAI's own retry of a throttled LLM call (429 / rate-limit errors),
            # exponential backoff from 1 s; not configurable per LLM.
            "crewai_rate_limit_attempts": rate_limit_attempts,
            # The n-th identical (tool, args, result) call raises ToolExecutionFailedError.
            "crewai_repeated_tool_call_stop": repeat_stop,
            "crewai_max_iter": "budgets.max_model_calls - 1 (one forced final-answer call after it)",
        },
        model_client="crewai native OpenAI provider (OpenAICompletion on the openai SDK, no LiteLLM)",
        api="chat completions (api='completions', custom_openai: no Responses API fallback)",
        crewai_tool_cache={"agent_and_crew": TOOL_CACHE, "harness_tools_cacheable": False},
        crewai_context_window_tokens=CONTEXT_WINDOW_TOKENS,
        # On a non-OpenAI endpoint CrewAI estimates a prompt at 4 characters a token.
        crewai_token_count="CrewAI's 4-characters-a-token estimate (no tiktoken in this venv)",
        function_calling="native (OpenAICompletion.supports_function_calling for a non-o1 model)",
        stream=False,
    )


# ---------------------------------------------------------------- run


def run(ctl: dict, tools: list, rec) -> str | None:
    # Everything CrewAI writes (credentials key, sqlite task outputs, storage) lands in the
    # run's sandbox: HOME and the XDG folders are the launcher's, CREWAI_STORAGE_DIR is
    # "{sandbox}/crewai" (venvs.toml).
    os.makedirs(os.environ["CREWAI_STORAGE_DIR"], exist_ok=True)

    from crewai import Agent, Crew, Process, Task

    budgets = ctl.get("budgets") or {}
    max_calls = int(budgets.get("max_model_calls", 24))
    role = ctl["agent_name"]
    max_iter = max(1, max_calls - 1)
    kit.start_run(rec, ctl, max_iter + 1, "model calls (max_iter + one forced final answer)", "framework")

    observer = _Observer(rec, role)
    with observer.listening():
        llm = _gateway_llm(ctl, observer)
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
        crew = Crew(agents=[agent], tasks=[task], process=Process.sequential, verbose=False, cache=TOOL_CACHE)
        result = crew.kickoff()
    text = result.raw if result is not None else None
    # The role CrewAI attributes the task's output to (None if it names none).
    outputs = getattr(result, "tasks_output", None) or []
    return kit.final_message(rec, getattr(outputs[-1], "agent", None) if outputs else None, text)


_LLM_CLASS = None
_HTTP_CLIENTS: tuple = ()


def _gateway_llm(ctl: dict, observer):
    """CrewAI's native OpenAI provider at the gateway: the same ``OpenAICompletion``
    ``crewai.LLM(model="openai/<name>", base_url=...)`` builds for a model name CrewAI
    does not know with a custom endpoint (``custom_openai``: Chat Completions, no
    Responses API fallback), through the observing subclass below."""
    return _llm_class()(
        model=ctl["model"],
        provider="openai",
        custom_openai=True,
        base_url=ctl["gateway_url"],
        api_key=ctl["token"],
        stream=False,
        temperature=0,
        timeout=kit.call_timeout(ctl),
        max_retries=kit.HTTP_CLIENT_MAX_RETRIES,
        observer=observer,
    )


def _llm_class():
    """``OpenAICompletion`` with an observer: each parsed response's served model name and
    usage become a runtime ``model_call``, each failed client call a runtime ``error``,
    and the context window is the stated one. Requests are unchanged."""
    global _LLM_CLASS
    if _LLM_CLASS is not None:
        return _LLM_CLASS
    from typing import Any

    import openai
    from crewai.llms.providers.openai.completion import OpenAICompletion
    from pydantic import Field

    class GatewayCompletion(OpenAICompletion):
        observer: Any = Field(default=None, exclude=True)

        def _build_sync_client(self):
            return openai.OpenAI(**self._get_client_params(), http_client=_http_clients()[0])

        def _build_async_client(self):
            return openai.AsyncOpenAI(**self._get_client_params(), http_client=_http_clients()[1])

        def _handle_completion(self, params, *args, **kwargs):
            call_id = _current_call_id()
            try:
                return super()._handle_completion(params, *args, **kwargs)
            except Exception as exc:
                if self.observer is not None:
                    self.observer.client_error(call_id, exc)
                raise

        def _extract_openai_token_usage(self, response):
            if self.observer is not None:
                self.observer.model_response(_current_call_id(), response)
            return super()._extract_openai_token_usage(response)

        def get_context_window_size(self) -> int:
            return CONTEXT_WINDOW_TOKENS

    _LLM_CLASS = GatewayCompletion
    return _LLM_CLASS


def _http_clients() -> tuple:
    """The openai SDK's default httpx clients (sync, async), built once per process.

    ``openai.DefaultHttpxClient`` / ``DefaultAsyncHttpxClient`` are the clients the SDK
    builds when given none (its timeout, connection limits, redirects); each run has a
    new gateway URL and a new model, so unshared every run would build two (two TLS
    contexts, each loading the CA bundle, for a plain-HTTP gateway). Built in
    ``preload()`` before a warm parent forks; no connection is open then. The openai
    client passes its own per-call timeout with every request.
    """
    global _HTTP_CLIENTS
    if not _HTTP_CLIENTS:
        import openai

        _HTTP_CLIENTS = (openai.DefaultHttpxClient(), openai.DefaultAsyncHttpxClient())
    return _HTTP_CLIENTS


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
        {"__module__": __name__, "__annotations__": {"args_schema": type}, "args_schema": args_model, "_run": _run},
    )
    # The harness tools read and change the workspace: a result is only true at the
    # moment of the call. CrewAI caches every tool result by default and replays it for
    # an identical later call (a re-run test command would get the pre-fix output), so
    # each tool declares itself uncacheable, as a CrewAI user with stateful tools does.
    tool = cls(name=harness_tool.name, description=harness_tool.description, cache_function=_never_cache)
    object.__setattr__(tool, "_harness", harness_tool)
    return tool


def _never_cache(_args=None, _result=None) -> bool:
    return False


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


# ---------------------------------------------------------------- runtime events


class _Observer:
    """Turns CrewAI bus events and the openai SDK's responses into ``source: runtime`` events.

    Bus handlers run on CrewAI's worker threads; ``listening`` flushes the bus before it
    returns, so every handler has finished when ``run`` hands the recorder back.
    LLM calls are recorded from the ``ChatCompletion`` CrewAI's native provider parsed (its
    ``model`` is the name the endpoint answered with, so a reported swap shows here),
    attributed to the agent role of CrewAI's ``LLMCallStartedEvent`` with the same call
    id. An event CrewAI attributes to no agent is recorded with ``agent: None``, never
    the declared name (the driver does that fallback, visibly).
    """

    def __init__(self, rec, default_role: str):
        self.rec = rec
        self.default_role = default_role
        self._lock = threading.Lock()
        self._call_roles: dict[str, str] = {}

    def _role(self, event) -> str | None:
        return getattr(event, "agent_role", None) or None

    # -- client side (synchronous, in the agent's thread)

    def model_response(self, call_id, response) -> None:
        from crewai.events import crewai_event_bus

        usage = kit.usage(getattr(response, "usage", None), "prompt_tokens", "completion_tokens", total="total_tokens")
        self.rec.model_call(self._call_role(crewai_event_bus, call_id), getattr(response, "model", None), usage)

    def client_error(self, call_id, exc: BaseException) -> None:
        """The model call's failure as the openai SDK raised it (CrewAI re-raises a
        connection or not-found error as its own ``ConnectionError`` / ``ValueError``
        with the SDK's as the cause)."""
        import openai
        from crewai.events import crewai_event_bus

        cause = exc.__cause__ if isinstance(exc.__cause__, openai.OpenAIError) else exc
        kit.record_error(self.rec, self._call_role(crewai_event_bus, call_id), cause)

    def _call_role(self, bus, call_id):
        """The role on this call's LLMCallStartedEvent, or None if CrewAI gave none.

        Flushing the bus first makes the lookup deterministic, and it also means every
        tool event of the previous step is recorded before this model call.
        """
        bus.flush(timeout=5)
        with self._lock:
            return self._call_roles.get(call_id)

    # -- bus side

    def listening(self):
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
            with crewai_event_bus.scoped_handlers():

                @crewai_event_bus.on(LLMCallStartedEvent)
                def _llm_started(source, event):
                    with self._lock:
                        self._call_roles[event.call_id] = self._role(event)

                @crewai_event_bus.on(ToolUsageFinishedEvent)
                def _tool_finished(source, event):
                    # (event.from_cache is always False on CrewAI 1.15's native
                    # tool path, even for a cache hit: not recorded.)
                    rec.event(
                        "tool_call",
                        agent=self._role(event),
                        tool=event.tool_name,
                        args=kit.tool_args(event.tool_args),
                        failure=_failure(event.failure),
                    )

                @crewai_event_bus.on(ToolUsageErrorEvent)
                def _tool_error(source, event):
                    rec.event(
                        "tool_call",
                        agent=self._role(event),
                        tool=event.tool_name,
                        args=kit.tool_args(event.tool_args),
                        failure=kit.clip(event.error),
                    )

                for cls in (ToolSelectionErrorEvent, ToolValidateInputErrorEvent):

                    @crewai_event_bus.on(cls)
                    def _tool_refused(source, event):
                        kit.record_error(rec, self._role(event), event.error, kind=event.type)

                @crewai_event_bus.on(ToolFailureDetectedEvent)
                def _tool_failure(source, event):
                    rec.error(
                        self._role(event),
                        event.type,
                        f"{event.tool_name}: {_failure(event.failure)} (policy {event.policy})",
                    )

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
                        rec.error(
                            self.default_role,
                            "EventBusFlushTimeout",
                            "CrewAI event handlers did not finish within 30 s",
                        )

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
