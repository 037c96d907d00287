"""claimgrid adapter for LangGraph (runs inside ``.venvs/langgraph``, never imported by the driver).

Contract (docs/CONTRACTS.md, "Adapter contract"): ``FRAMEWORK``, ``preload()``,
``versions()`` and ``run(ctl, tools, rec) -> str | None``.

The agent is LangChain 1.x's ``langchain.agents.create_agent`` (the LangGraph-built
successor of the deprecated ``langgraph.prebuilt.create_react_agent``), its model a
``langchain_openai.ChatOpenAI`` (LangChain's OpenAI integration, on the openai SDK; no
LiteLLM in this venv) pointed at the harness gateway, its tools the harness tools wrapped
as native ``StructuredTool`` objects with the harness JSON schemas.

Runtime events come from a LangChain callback handler attached to the invocation:

* ``tool_call``  on ``on_tool_start`` (the tool LangGraph's ToolNode actually dispatched);
* ``model_call`` on ``on_llm_end``, with the model name taken from the *response*
  (ChatOpenAI's ``response_metadata["model_name"]`` is the response's ``model`` field);
* ``message``    for the final assistant message;
* ``error``      on ``on_llm_error`` / ``on_tool_error`` (recorded, then re-raised by LangChain).

Agent attribution: ``create_agent(name=...)`` puts ``lc_agent_name`` into the run
metadata every child callback receives and stamps ``AIMessage.name``; the adapter
uses the metadata, then the message name, and only then the declared
``ctl["agent_name"]``, and records which one it used as ``agent_source``.

Nothing here catches an exception to turn it into a result: a model error (the openai
SDK's, after its zero retries), a tool exception or ``GraphRecursionError`` propagates
out of ``run``.
"""

from __future__ import annotations

import threading
from typing import Any

import kit

FRAMEWORK = "langgraph"

# ChatOpenAI hands max_retries to the openai SDK client (its default there is 2) and has
# no retry of its own above it: 0 is one HTTP attempt per model call (correctness rule 6).
CHAT_MAX_RETRIES = kit.HTTP_CLIENT_MAX_RETRIES
# One agent step is a model superstep plus (usually) a tools superstep; the extra
# step is LangGraph's entry. create_agent's own default is 9_999, i.e. unbounded.
STEPS_PER_MODEL_CALL = 2

# Modules LangChain/LangGraph import lazily on a first run (measured: sys.modules
# before/after one run); the openai SDK's and httpx's are in kit.SHARED_PRELOAD.
FIRST_CALL_MODULES = (
    "langchain_core.messages.block_translators.langchain_v0",
    "langchain_core.tracers.context",
    "langchain_core.tracers.run_collector",
    "langchain_core.tracers.stdout",
)


def preload() -> None:
    """Import every module a real run loads, so a forked child does no heavy import.

    Builds (but never invokes) a throwaway agent: graph compilation and pydantic schema
    building import lazily on first use; then imports FIRST_CALL_MODULES. The throwaway
    model builds the process's shared httpx clients (``_http_clients``); the openai SDK's
    first-use work (platform headers, response validators) is done here too. Opens no
    socket and starts no thread, so forking afterwards is safe.
    """
    from langchain.agents import create_agent
    from langgraph.errors import GraphRecursionError  # noqa: F401

    class _Probe:
        name = "probe"
        description = "probe"
        parameters = {"type": "object", "properties": {"x": {"type": "string"}}, "required": []}

        def __call__(self, **kwargs):
            return ""

    model = _chat_model(kit.preload_ctl())
    kit.prime_openai_client(model.root_client)
    create_agent(model, [_structured_tool(_Probe())], system_prompt="x", name="preload")
    _make_handler(None, "preload")
    kit.preload(*FIRST_CALL_MODULES)


def versions() -> dict:
    """Versions (kit) plus the retry/limit settings this adapter imposes."""
    return kit.versions(
        FRAMEWORK,
        "langgraph",
        "langchain",
        "langchain-core",
        "langchain-openai",
        retries={
            # ChatOpenAI(max_retries=0) is the openai SDK client's max_retries; nothing above it retries.
            "chat_openai_max_retries": CHAT_MAX_RETRIES,
            "http_attempts_per_model_call": 1,
        },
        model_client="langchain-openai ChatOpenAI (openai SDK, no LiteLLM)",
        streaming=False,
        api="chat completions (use_responses_api=False)",
        recursion_limit=f"{STEPS_PER_MODEL_CALL} * budgets.max_model_calls",
        unknown_tool="ToolNode answers the model with an error ToolMessage (no raise)",
        malformed_tool_args="ChatOpenAI files them as invalid_tool_calls; the agent loop ends",
    )


def recursion_limit(ctl: dict) -> int:
    """LangGraph supersteps allowed for a run with ``budgets.max_model_calls`` model calls."""
    return STEPS_PER_MODEL_CALL * int(ctl["budgets"]["max_model_calls"])


_HTTP_CLIENTS: tuple = ()


def _http_clients() -> tuple:
    """ChatOpenAI's own default httpx clients (sync, async), built once per process.

    The same builders ChatOpenAI uses when given none (langchain_openai.chat_models.
    _client_utils: its TCP keep-alive socket options and pool limits). ChatOpenAI caches
    them per base URL and timeout, and each run has a new gateway URL, so unshared every
    run would build two (two TLS contexts, each loading the CA bundle, for a
    plain-HTTP gateway). Built in ``preload()`` before a warm parent forks; no connection
    is open then. The openai client passes its own per-call timeout with every request.
    """
    global _HTTP_CLIENTS
    if not _HTTP_CLIENTS:
        from langchain_openai.chat_models import _client_utils as cu

        options = cu._resolve_socket_options(None)
        _HTTP_CLIENTS = (
            cu._build_sync_httpx_client(None, None, options),
            cu._build_async_httpx_client(None, None, options),
        )
    return _HTTP_CLIENTS


def _chat_model(ctl: dict):
    from langchain_openai import ChatOpenAI

    sync_client, async_client = _http_clients()

    # The gateway's own model name (no LiteLLM provider prefix), as the other openai-SDK
    # adapters pass it. Chat Completions pinned: ChatOpenAI would switch to the Responses
    # API for some model names or parameters, and the run's dialect is a parity fact.
    return ChatOpenAI(
        model=ctl["model"],
        base_url=ctl["gateway_url"],
        api_key=ctl["token"],
        max_retries=CHAT_MAX_RETRIES,
        timeout=kit.call_timeout(ctl),
        streaming=False,
        use_responses_api=False,
        temperature=0,
        http_client=sync_client,
        http_async_client=async_client,
    )


def _structured_tool(tool):
    """Expose one HarnessTool as a native StructuredTool with its JSON schema as args schema."""
    from langchain_core.tools import StructuredTool

    def _call(**kwargs):
        return tool(**kwargs)

    return StructuredTool.from_function(
        func=_call,
        name=tool.name,
        description=tool.description,
        args_schema=tool.parameters,
        infer_schema=False,
    )


def _text(content: Any) -> str:
    return kit.content_text(content) or ""


def _tool_messages(outputs: Any) -> list:
    """ToolMessages in a graph node's output (a state dict, a list of updates or Commands)."""
    from langchain_core.messages import ToolMessage

    found = []
    stack = [outputs]
    while stack:
        item = stack.pop()
        if isinstance(item, ToolMessage):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.get("messages", []) if isinstance(item.get("messages"), list) else [])
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif hasattr(item, "update"):  # langgraph.types.Command
            stack.append(item.update)
    return found


def _make_handler(rec, declared_agent: str):
    from langchain_core.callbacks import BaseCallbackHandler

    class RuntimeEvents(BaseCallbackHandler):
        """Turns LangChain callbacks into claimgrid ``runtime`` events on ``rec``."""

        # A recorder failure must surface, not be logged and skipped by LangChain.
        raise_error = True
        run_inline = True

        def __init__(self):
            self._lock = threading.Lock()
            self._agent_by_run: dict = {}
            self._seen_errors: set = set()

        def _agent(self, metadata, message=None, run_id=None, parent_run_id=None):
            name = (metadata or {}).get("lc_agent_name")
            if name:
                return name, "metadata.lc_agent_name"
            name = getattr(message, "name", None)
            if name:
                return name, "message.name"
            for rid in (run_id, parent_run_id):
                if rid in self._agent_by_run:
                    return self._agent_by_run[rid]
            return declared_agent, "declared"

        def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, metadata=None, **kwargs):
            with self._lock:
                self._agent_by_run[run_id] = self._agent(metadata)

        def on_llm_end(self, response, *, run_id, parent_run_id=None, **kwargs):
            with self._lock:
                agent, source = self._agent_by_run.get(run_id, (declared_agent, "declared"))
                for gens in response.generations:
                    for gen in gens:
                        msg = getattr(gen, "message", None)
                        meta = getattr(msg, "response_metadata", {}) or {}
                        # ChatOpenAI's response_metadata["model_name"] is the response's
                        # ``model`` field (LangChain's transcript keeps the same name).
                        rec.event(
                            "model_call",
                            agent=agent,
                            model=meta.get("model_name"),
                            usage=kit.usage(getattr(msg, "usage_metadata", None) or {}),
                            agent_source=source,
                            transcript_model=meta.get("model_name"),
                            tool_calls=[tc["name"] for tc in getattr(msg, "tool_calls", [])],
                            invalid_tool_calls=[
                                {"name": tc.get("name"), "args": tc.get("args")}
                                for tc in getattr(msg, "invalid_tool_calls", [])
                            ],
                        )

        def on_llm_error(self, error, *, run_id, parent_run_id=None, **kwargs):
            with self._lock:
                agent, source = self._agent_by_run.get(run_id, (declared_agent, "declared"))
                rec.event("error", agent=agent, type=type(error).__name__, message=str(error), agent_source=source)

        def on_tool_start(
            self, serialized, input_str, *, run_id, parent_run_id=None, metadata=None, inputs=None, **kwargs
        ):
            with self._lock:
                agent, source = self._agent(metadata)
                self._agent_by_run[run_id] = (agent, source)
                name = (serialized or {}).get("name") or kwargs.get("name")
                rec.event(
                    "tool_call",
                    agent=agent,
                    tool=name,
                    args=inputs if inputs is not None else input_str,
                    agent_source=source,
                )

        def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, metadata=None, **kwargs):
            with self._lock:
                self._agent_by_run[run_id] = self._agent(metadata)

        def on_chain_end(self, outputs, *, run_id, parent_run_id=None, **kwargs):
            # LangGraph's ToolNode answers a call it cannot dispatch (unknown tool name,
            # arguments its schema rejects) with an error ToolMessage and never starts a
            # tool, so no on_tool_start fires: the node's output is the only trace.
            with self._lock:
                for msg in _tool_messages(outputs):
                    if getattr(msg, "status", None) != "error" or msg.tool_call_id in self._seen_errors:
                        continue
                    self._seen_errors.add(msg.tool_call_id)
                    agent, source = self._agent_by_run.get(run_id, (declared_agent, "declared"))
                    rec.event(
                        "error",
                        agent=agent,
                        type="ToolMessageError",
                        message=_text(msg.content),
                        agent_source=source,
                        tool=msg.name,
                        tool_call_id=msg.tool_call_id,
                    )

        def on_tool_error(self, error, *, run_id, parent_run_id=None, **kwargs):
            with self._lock:
                agent, source = self._agent_by_run.get(run_id, (declared_agent, "declared"))
                rec.event("error", agent=agent, type=type(error).__name__, message=str(error), agent_source=source)

    return RuntimeEvents()


def run(ctl: dict, tools: list, rec) -> str | None:
    """Run one LangGraph agent on ``ctl["prompt"]``; return its final assistant text.

    Exceptions (model errors after retries, ``GraphRecursionError`` when the budget
    of supersteps is spent, recorder failures) propagate unchanged.
    """
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage

    kit.start_run(
        rec,
        ctl,
        recursion_limit(ctl) // STEPS_PER_MODEL_CALL,
        "model calls (recursion_limit / 2 supersteps)",
        "framework",
    )
    agent_name = ctl["agent_name"]
    graph = create_agent(
        _chat_model(ctl),
        [_structured_tool(t) for t in tools],
        system_prompt=kit.system_prompt(ctl),
        name=agent_name,
    )
    state = graph.invoke(
        {"messages": [HumanMessage(content=ctl["prompt"])]},
        config={"recursion_limit": recursion_limit(ctl), "callbacks": [_make_handler(rec, agent_name)]},
    )
    final = next((m for m in reversed(state["messages"]) if isinstance(m, AIMessage)), None)
    if final is None:
        return None
    name, source = (final.name, "message.name") if final.name else (agent_name, "declared")
    return kit.final_message(rec, name, _text(final.content), agent_source=source)
