"""Adapter kit: the parts every framework adapter shares (runs inside a framework venv).

Import it first in ``adapter.py`` (``import kit``). The offline and telemetry-off
environment (``OFFLINE_ENV``, from ``env.toml`` beside this file, the table the launcher
gives every adapter process) is already set under the launcher; importing the kit sets what
is missing, for an adapter imported by hand. A framework's own switches are its
``venvs.toml`` ``env``.

A run, on the kit (each an adapter correctness rule of docs/CONTRACTS.md)::

    def preload():                     # imports, no thread; LiteLLM configured, probe installed
        kit.preload("myframework")       # the pinned distributions' modules
        _build(kit.preload_ctl(), [])  # a throwaway agent (no model call) imports the rest
    def run(ctl, tools, rec):
        kit.start_run(rec, ctl, kit.turn_limit(ctl), "model calls (max_turns)", "framework")
        with kit.recording_errors(rec, ctl["agent_name"]) as errors:  # errors.report(...): its own reports
            text = ...                  # the framework's agent; runtime events on ``rec``
        return kit.final_message(rec, ctl["agent_name"], text)  # or the framework's agent name

Per run:

* ``start_run(rec, ctl, turn_limit, unit, enforced_by)``: opens ``run()``. LiteLLM
  configured and the probe installed if ``preload()`` did not do it in this process (a
  warm child has it from its parent, a fresh process from its own ``preload()``), then
  ``record_limits``: the framework's own turn limit for this run, as a runtime ``limits``
  event (checked: >= the model-call budget; None: the framework has none, the gateway's
  budget refusal stops it).
* ``recording_errors(rec, agent)``: records an exception as a runtime ``error`` event
  and re-raises it unchanged (an adapter never turns a failure into a result);
  ``record_error(rec, agent, error, kind=None)`` records one the framework reported
  (type name or ``kind``, message clipped to ``ERROR_CHARS`` by ``clip``). The block yields
  the run's ``RunErrors``: a failure the framework reports, record it with
  ``errors.report(error, kind)``, and the same failure raised out of the block is not
  recorded again (each failure once, whether the framework reports it, raises it, or both).
* ``final_message(rec, agent, text, **fields)``: the runtime ``message`` event of the
  final text (none when the text is None); returns the text.
* ``SYSTEM_PROMPT`` / ``system_prompt(ctl)``: the ONE harness-owned system prompt. An
  adapter whose framework mandates its own prompt (CrewAI's role/goal/backstory
  template) says so with ``versions(..., system_prompt="framework: <why>")``; the fact is
  recorded per run (``runtime_versions.system_prompt``) so prompts are never a hidden
  confound between frameworks.
* ``gateway_model(ctl)``, ``call_timeout(ctl)``, ``turn_limit(ctl)``: the LiteLLM model
  string at the gateway, the per-call deadline every adapter gives its model client, the
  run's model-call budget.

Runtime-event helpers (the shapes of docs/CONTRACTS.md "source runtime"):

* ``content_text(content, sep="")``: the text of a message content (a string, or a list
  of string / ``{"text": ...}`` parts joined with ``sep``; None if there is none).
* ``usage(u, prompt="input_tokens", completion="output_tokens", total=None)``: a
  framework's usage (dict or object) renamed to ``{"prompt_tokens", "completion_tokens"}``
  (+ ``total_tokens`` when ``total`` names a field).
* ``tool_function(tool, before=None, context=None)``: a harness tool as a plain Python
  function with a real signature (typed parameters from its JSON schema) and docstring, for
  frameworks that build a tool's schema from a function's signature.
* ``tool_args(raw)`` / ``parse_args(raw)``: tool-call arguments as the model sent them:
  a JSON string parsed, an unparseable one kept raw (``parse_args`` also says why).

Process-wide:

* ``configure_litellm()``: retries 0, telemetry off, local cost map, no banners, no
  silent parameter dropping. Every attempt a framework makes is then a gateway call.
* ``probe``: one served-model-name probe. ``probe.install()`` wraps ``litellm.completion``
  and ``litellm.acompletion`` (the calls framework LiteLLM integrations make) and notes
  the model name the *response* carried (for streams, the name the endpoint sent, which
  LiteLLM hides in ``_hidden_params``); ``probe.served(default)`` reads it. The wrap
  replaces the module's attributes, so it sees only calls made through ``litellm.<name>``
  looked up after it: a framework that keeps its own reference to ``litellm.acompletion``
  (``from litellm import acompletion`` at import, or copied on its first call, as Google
  ADK's ``LiteLlm`` does) must take that reference after ``kit.preload`` installed the probe,
  i.e. its adapter's ``preload()`` triggers the framework's copy right after ``kit.preload``
  (frameworks/google-adk/adapter.py); the conformance suite's served-name rule fails otherwise.
* ``preload(*modules)``: imports the adapter's modules plus ``SHARED_PRELOAD`` (the
  modules LiteLLM, httpx and anyio import lazily on a first call), configures LiteLLM and
  installs the probe, then checks that no thread was started (a warm parent forks;
  forking a threaded process is unsafe). ``preload_ctl()``: a control for building a
  throwaway agent there (its gateway is a closed port; no call is made).
* ``versions(framework, *dists, **facts)``: parity facts with the installed versions of
  the framework distributions and of every package that shapes model traffic.

Agents with their own tools (venvs.toml ``kind = "cli"``), whose adapter runs a program:

* ``own_folder(path, owner_of)``: makes a folder (made if missing) the owner's of another,
  for a folder the run's uid must write in where the adapter runs as root.
* ``run_agent(ctl, argv, env, timeout)``: runs the agent's command to its end or ``timeout``
  (``subprocess.TimeoutExpired``), its output decoded with every undecodable byte replaced;
  inside the agent sandbox (``ctl["agent_sandbox"]``) its standard input is the sandbox's
  lifeline (claimgrid/sandbox/loopback.py).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import os
import subprocess
import sys
import threading
import tomllib
from importlib import metadata

import reaper  # frameworks/_harness/reaper.py
from harness_shared import readback  # frameworks/_harness/harness_shared/readback.py

# The harness's one offline / telemetry-off table (env.toml beside this file; the driver
# reads the same file into every adapter's environment, fresh or warm). Read at import time
# by LiteLLM (cost map download, telemetry), OpenTelemetry and Hugging Face clients; a
# framework's own switches are its venvs.toml ``env``. Applied here only where unset, for an
# adapter imported outside the launcher: under the launcher they are already there.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "env.toml"), "rb") as _fh:
    OFFLINE_ENV: dict[str, str] = dict(tomllib.load(_fh)["env"])
for _name, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_name, _value)

LITELLM_NUM_RETRIES = 0
HTTP_CLIENT_MAX_RETRIES = 0

SYSTEM_PROMPT = (
    "You are {agent}, a software agent working in a git repository through the tools you "
    "are given. Paths are relative to the repository root. Do the task, then reply with "
    "your final report."
)

# Distributions whose versions shape what reaches the gateway (parity facts when installed).
TRAFFIC_PACKAGES = (
    "litellm",
    "openai",
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "anthropic",
    "google-genai",
    "tenacity",
)

# Imported lazily by LiteLLM / httpx / anyio on the first completion call (measured by
# diffing sys.modules around one run in each framework). A name a given release lacks is
# skipped: the run then imports less, never more.
SHARED_PRELOAD = (
    "litellm",
    "litellm.litellm_core_utils.streaming_handler",
    "litellm.litellm_core_utils.default_encoding",  # the bundled tiktoken encoding
    "litellm.litellm_core_utils.logging_callback_manager",
    "litellm.litellm_core_utils.duration_parser",
    "litellm.litellm_core_utils.get_supported_openai_params",
    "litellm.llms.openai.openai",
    "litellm.llms.openai_like.dynamic_config",
    "litellm.llms.litellm_proxy.chat.transformation",
    "litellm.llms.github_copilot.authenticator",
    "litellm.llms.github_copilot.github_host",
    "litellm.llms.github_copilot.per_user_auth",
    "litellm.llms.openai.chat.gpt_audio_transformation",
    "litellm.llms.bedrock.chat.invoke_transformations.amazon_ai21_transformation",
    "litellm.proxy._types",
    "litellm.proxy.mcp_server.stdio_gate",
    "litellm.proxy.openai_files_endpoints.common_utils",
    "litellm.proxy.spend_tracking.savings",
    "litellm.proxy.types_utils.utils",
    "litellm.integrations.generic_api.generic_api_callback",
    "litellm.integrations.prometheus_services",
    "litellm._service_logger",
    "litellm.types.litellm_core_utils.streaming_chunk_builder_utils",
    "litellm.llms.edenai.chat.transformation",
    "litellm.llms.fal_ai.chat.transformation",
    "litellm.llms.fal_ai.image_generation",
    "litellm.proxy.common_utils.timezone_utils",
    "litellm.types.integrations.compression_interception",
    "litellm.types.integrations.slack_alerting",
    "litellm.types.proxy.control_plane_endpoints",
    "litellm.types.proxy.management_endpoints.key_requests",
    "litellm.types.proxy.management_endpoints.team_endpoints",
    "litellm.types.proxy.management_endpoints.user_requests",
    "litellm.types.proxy.request_tag_mappings",
    "litellm.types.proxy.skill_scanning",
    "litellm.types.proxy.spend_capture_rate",
    "tiktoken_ext.openai_public",
    "openai",
    "httpx",
    "httpcore._sync.connection_pool",
    "httpcore._sync.http11",
    "httpcore._async.connection_pool",
    "httpcore._async.http11",
    "httpcore._backends.sync",
    "httpcore._backends.anyio",
    "h11",
    "httpcore._sync.http2",
    "httpcore._async.http2",
    "httpcore._sync.http_proxy",
    "httpcore._backends.auto",
    "h2.connection",
    "anyio._backends._asyncio",
    "anyio.streams.memory",
    "anyio.streams.stapled",
    "anyio.streams.tls",
)


def system_prompt(ctl: dict) -> str:
    """The harness-owned system prompt for this run (same text in every framework)."""
    return SYSTEM_PROMPT.format(agent=ctl["agent_name"])


def gateway_model(ctl: dict) -> str:
    """The LiteLLM model string for the run's model at the gateway (OpenAI-compatible)."""
    return "openai/" + ctl["model"]


def configure_litellm() -> dict | None:
    """Fix LiteLLM's process-wide settings; returns them (None if LiteLLM is not installed)."""
    try:
        import litellm
    except ImportError:
        return None
    litellm.telemetry = False
    litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on errors
    litellm.drop_params = False  # never drop or rewrite a parameter silently
    litellm.num_retries = LITELLM_NUM_RETRIES
    litellm.set_verbose = False
    return {
        "num_retries": LITELLM_NUM_RETRIES,
        "telemetry": False,
        "local_cost_map": True,
        "suppress_debug_info": True,
        "drop_params": False,
    }


class _Probe:
    """The model name on the last response LiteLLM returned in this process."""

    def __init__(self):
        self.last: str | None = None

    def reset(self) -> None:
        self.last = None

    def served(self, default: str | None = None) -> str | None:
        """The name the endpoint answered with; ``default`` only if no response named one."""
        return self.last or default

    def note(self, response) -> None:
        name = getattr(response, "model", None)
        hidden = getattr(response, "_hidden_params", None) or {}
        # LiteLLM rewrites a stream chunk's ``model`` to the requested name; the name the
        # endpoint sent is in its hidden params. Within one call (``reset`` before each) a
        # name already seen is kept against a later chunk that lacks it (usage-only chunk).
        self.last = hidden.get("provider_response_model") or self.last or name

    def install(self) -> None:
        """Wrap ``litellm.completion``/``acompletion`` once per process (requests unchanged)."""
        import litellm

        if getattr(litellm.acompletion, "_claimgrid_probe", False):
            return
        sync_orig, async_orig, probe = litellm.completion, litellm.acompletion, self

        def completion(*args, **kwargs):
            probe.reset()
            response = sync_orig(*args, **kwargs)
            if kwargs.get("stream"):
                return _SyncStream(response, probe)
            probe.note(response)
            return response

        async def acompletion(*args, **kwargs):
            probe.reset()
            response = await async_orig(*args, **kwargs)
            if kwargs.get("stream"):
                return _AsyncStream(response, probe)
            probe.note(response)
            return response

        completion._claimgrid_probe = acompletion._claimgrid_probe = True
        litellm.completion, litellm.acompletion = completion, acompletion


class _AsyncStream:
    """LiteLLM's stream unchanged, noting each chunk's served name (a usage-only chunk
    without one keeps the name already seen). Its own iterator over the one stream,
    because some frameworks iterate the same stream object twice."""

    def __init__(self, stream, probe):
        self._stream, self._it, self._probe = stream, stream.__aiter__(), probe

    def __aiter__(self):
        return self

    async def __anext__(self):
        chunk = await self._it.__anext__()
        self._probe.note(chunk)
        return chunk

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _SyncStream(_AsyncStream):
    def __init__(self, stream, probe):
        self._stream, self._it, self._probe = stream, iter(stream), probe

    def __iter__(self):
        return self

    def __next__(self):
        chunk = next(self._it)
        self._probe.note(chunk)
        return chunk


probe = _Probe()


_preloaded = False  # preload() configured LiteLLM and installed the probe in this process


def preload_ctl() -> dict:
    """A control object for building a throwaway agent in ``preload()`` (never run: its
    gateway is a closed port)."""
    return {"agent_name": "preload", "model": "preload", "token": "x", "gateway_url": "http://127.0.0.1:9/v1"}


def preload(*modules: str, shared: bool = True) -> None:
    """Import ``modules`` (each must exist) and ``SHARED_PRELOAD`` (missing ones skipped);
    configure LiteLLM and install the probe if LiteLLM is present. ``shared=False`` (a coding
    agent's adapter: the agent is another program, started per run) imports neither list's
    LiteLLM, and configures LiteLLM only if ``modules`` imported it: an agent's venv may hold
    LiteLLM for the agent's own process (mini-swe-agent), and importing it here cost each
    adapter process about 6.5 CPU-s and 180 MB for nothing.

    Raises RuntimeError if a thread is running afterwards: a warm parent forks children,
    and a forked child inherits only the forking thread (a trace exporter or event-bus
    worker started here would be lost or deadlock in every run).
    """
    for name in modules:
        importlib.import_module(name)
    if shared:
        for name in SHARED_PRELOAD:
            try:
                importlib.import_module(name)
            except ImportError:
                pass
    global _preloaded
    if (shared or "litellm" in sys.modules) and configure_litellm() is not None:
        probe.install()
    _preloaded = True
    extra = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if extra:
        raise RuntimeError(f"preload started thread(s) {extra}: a forked run would lose them")


# A chat completion of the shape the gateway answers (text, one tool call, usage): parsed once
# before a warm parent forks, so the openai SDK's lazily built response validators exist then.
PRIMING_COMPLETION = {
    "id": "preload",
    "object": "chat.completion",
    "created": 0,
    "model": "preload",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": "x",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "probe", "arguments": "{}"}}],
            },
        }
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def prime_openai_client(client):
    """Do an openai SDK client's first-use work in ``preload()``, so no forked run pays it:
    its platform request headers (``platform.uname()``, whose processor field runs a
    ``uname -p`` subprocess, cached per process), the chat resource tree (``client.chat``
    imports ``openai.resources``, ~500 modules, on first access) and the response types'
    pydantic validators (built on the first completion parsed). ``client`` is an
    ``openai.OpenAI`` or ``AsyncOpenAI``; nothing is sent, no thread is started. Returns the
    parsed ``PRIMING_COMPLETION``, for an adapter that primes its own conversion of it."""
    client.default_headers  # noqa: B018
    client.chat.completions.with_raw_response  # noqa: B018
    from openai.types.chat import ChatCompletion

    return ChatCompletion.construct(**PRIMING_COMPLETION)


# ---------------------------------------------------------------- per run


def start_run(rec, ctl: dict, turn_limit: int | None, unit: str, enforced_by: str, **more) -> None:
    """Open ``run()``: LiteLLM configured and the probe installed unless ``preload()`` did
    it in this process, then the run's ``limits`` event (``record_limits``, with ``more``)."""
    if not _preloaded and configure_litellm() is not None:
        probe.install()
    record_limits(rec, ctl, turn_limit, unit, enforced_by, **more)


ERROR_CHARS = 2000  # an error message on a runtime event is clipped to this


def clip(message) -> str:
    """``str(message)``, at most ``ERROR_CHARS`` characters."""
    return str(message)[:ERROR_CHARS]


def record_error(rec, agent, error, kind: str | None = None) -> None:
    """A runtime ``error`` event: ``kind`` (default: the exception's type name) and the
    clipped message."""
    rec.error(agent, kind or type(error).__name__, clip(error))


class RunErrors:
    """One run's runtime ``error`` events, each failure once (``recording_errors`` yields it).

    A framework may report a failure (an error on its event or callback), raise it, or both:
    ADK 2.x puts an error on an event and then raises the same exception. ``report`` records
    what the framework reported; the exception leaving the ``recording_errors`` block is
    recorded unless it is the failure reported last (the same exception object, or the same
    clipped message: a reported error carries the exception's text, not the object). Only the
    last report is compared, so a failure the framework reports again after another (a retry
    refused twice) is recorded each time.
    """

    def __init__(self, rec, agent):
        self.rec, self.agent = rec, agent
        self._last: tuple[object, str] | None = None

    def report(self, error, kind: str | None = None, agent=None) -> None:
        """Record a failure the framework reported (``record_error``; ``agent`` default: the
        block's)."""
        if self.rec is not None:
            record_error(self.rec, self.agent if agent is None else agent, error, kind)
        self._last = (error, clip(error))

    def reported(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the failure ``report`` recorded last."""
        return self._last is not None and (self._last[0] is exc or self._last[1] == clip(exc))


@contextlib.contextmanager
def recording_errors(rec, agent):
    """Record an exception leaving the block as a runtime ``error`` event, then re-raise it;
    yields the run's ``RunErrors`` (``errors.report(...)`` for the failures the framework
    reports), so a failure reported and then raised is one event."""
    errors = RunErrors(rec, agent)
    try:
        yield errors
    except BaseException as exc:
        if rec is not None and not errors.reported(exc):
            record_error(rec, agent, exc)
        raise


# ---------------------------------------------------------------- tools as Python functions

# A JSON-schema type as the Python annotation a signature-reading framework turns back into it.
JSON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def tool_function(tool, before=None, context: str | None = None, context_type=inspect.Parameter.empty):
    """The harness tool ``tool`` as a plain Python function with a real signature, for a
    framework that builds a tool's schema from a function (Google ADK's ``FunctionTool``,
    smolagents' ``@tool``, Pydantic AI's ``Tool``): a ``**kwargs`` wrapper does not do there
    (ADK passes a function only the arguments its signature names: such a wrapper receives
    nothing).

    The function is named ``tool.name``; its docstring is the tool's description and an
    ``Args:`` section of the schema's parameter descriptions; its parameters are the schema's
    properties, each annotated with its JSON type (``JSON_TYPES``; ``str`` for an unknown one),
    the required ones first and without a default, the others ``T | None = None``; it returns
    ``str``. ``context`` names one more, first parameter the framework fills with its own
    context (ADK's ``tool_context``), annotated ``context_type``.

    A call binds its arguments to that signature (a name it lacks is a ``TypeError``, as for
    any function), drops an optional parameter left at None (the harness tool sees only the
    arguments given), calls ``before(context_value, args)`` if given (an adapter's runtime
    ``tool_call`` event, attributed from the framework's context) and returns
    ``tool(**args)``: the harness tool layer records and executes the call."""
    schema = tool.parameters or {}
    props = schema.get("properties") or {}
    required = [k for k in props if k in set(schema.get("required") or [])]
    optional = [k for k in props if k not in required]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(context, kind, annotation=context_type)] if context else []
    for name in required:
        params.append(inspect.Parameter(name, kind, annotation=JSON_TYPES.get(props[name].get("type"), str)))
    for name in optional:
        annotation = JSON_TYPES.get(props[name].get("type"), str)
        params.append(inspect.Parameter(name, kind, default=None, annotation=annotation | None))
    signature = inspect.Signature(params, return_annotation=str)
    wanted = set(required)

    def function(*args, **kwargs):
        values = dict(signature.bind(*args, **kwargs).arguments)
        context_value = values.pop(context, None) if context else None
        call_args = {k: v for k, v in values.items() if k in wanted or v is not None}
        if before is not None:
            before(context_value, call_args)
        return tool(**call_args)

    lines = [tool.description or tool.name, "", "Args:"]
    lines += [f"    {k}: {props[k].get('description', '')}".rstrip() for k in (*required, *optional)]
    function.__name__ = function.__qualname__ = tool.name
    function.__doc__ = "\n".join(lines if props else lines[:1])
    function.__signature__ = signature  # type: ignore[attr-defined]
    function.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty} | {
        "return": str
    }
    return function


def final_message(rec, agent, text: str | None, **fields) -> str | None:
    """The runtime ``message`` event of the agent's final ``text`` (with ``fields``, e.g.
    ``agent_source``); none when ``text`` is None. Returns ``text``."""
    if text is not None:
        rec.event("message", agent=agent, role="assistant", text=text, **fields)
    return text


# ---------------------------------------------------------------- runtime-event helpers


def content_text(content, sep: str = "") -> str | None:
    """The text of a message content: a string as it is; a list of parts: the string parts
    and the ``"text"`` of dict parts, joined with ``sep`` (None if no part has text);
    None for None."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            p if isinstance(p, str) else p["text"]
            for p in content
            if isinstance(p, str) or (isinstance(p, dict) and "text" in p)
        ]
        return sep.join(texts) if texts else None
    return str(content)


def usage(u, prompt: str = "input_tokens", completion: str = "output_tokens", total: str | None = None) -> dict | None:
    """A framework's usage (dict or object with fields ``prompt`` / ``completion`` /
    ``total``) as ``{"prompt_tokens", "completion_tokens"[, "total_tokens"]}``; None for None."""
    if u is None:
        return None
    get = u.get if isinstance(u, dict) else (lambda name: getattr(u, name, None))
    out = {"prompt_tokens": get(prompt), "completion_tokens": get(completion)}
    if total:
        out["total_tokens"] = get(total)
    return out


def parse_args(raw) -> tuple[object, str | None]:
    """``(arguments, problem)``: a JSON string parsed (problem None), an unparseable one as
    the raw string with the parser's message; anything else as it is."""
    if not isinstance(raw, str):
        return raw, None
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return raw, str(exc)


def tool_args(raw):
    """Tool-call arguments as the model sent them: parsed JSON, or the raw string."""
    return parse_args(raw)[0]


def turn_limit(ctl: dict) -> int:
    """The run's model-call budget: the turn limit every framework is given (in model calls)."""
    return int(ctl["budgets"]["max_model_calls"])


def call_timeout(ctl: dict) -> float:
    """The run's per-call deadline in seconds (``budgets.model_call_timeout_s``): the
    timeout every adapter gives its model client, so a slow call fails at the same point
    in every framework."""
    budgets = ctl.get("budgets") or {}
    return float(budgets.get("model_call_timeout_s") or ctl.get("timeout_s") or 60)


def record_limits(rec, ctl: dict, turn_limit: int | None, unit: str, enforced_by: str, **more) -> None:
    """State the framework's own turn limit for this run (None: the framework has none), with
    ``more`` facts of its limits (an agent's per-command time limit and what enforces it)."""
    rec.event(
        "limits",
        turn_limit=turn_limit,
        unit=unit,
        enforced_by=enforced_by,
        max_model_calls=int(ctl["budgets"]["max_model_calls"]),
        **more,
    )


def command_timeout(ctl: dict) -> float:
    """The wall time each shell command of the run may take (``budgets.command_timeout_s``: the
    harness tool layer's, or a coding agent's own shell limit, venvs.toml ``real_model``)."""
    return float((ctl.get("budgets") or {}).get("command_timeout_s") or 30)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions(framework: str, *dists: str, system_prompt: str = "harness", **facts) -> dict:
    """Parity facts: ``dists`` and the installed ``TRAFFIC_PACKAGES``, retry settings,
    which system prompt the run used (``harness`` or ``framework: <why>``), and ``facts``."""
    out: dict = {"framework": framework}
    for dist in (*dists, *TRAFFIC_PACKAGES):
        v = _version(dist)
        if v is not None or dist in dists:
            out[dist] = v
    retries = {
        "litellm_num_retries": LITELLM_NUM_RETRIES if "litellm" in out else None,
        "http_client_max_retries": HTTP_CLIENT_MAX_RETRIES,
    }
    retries.update(facts.pop("retries", {}))
    out["retries"] = retries
    out["system_prompt"] = system_prompt
    out.update(facts)
    return out


# ---------------------------------------------------------------- agents with their own tools


def own_folder(path: str, owner_of: str) -> None:
    """Make the folder ``path`` (made if missing) the owner's of ``owner_of``: the adapter runs
    as root where the guard drops the agent to the run's uid, which must write there."""
    os.makedirs(path, exist_ok=True)
    st = os.stat(owner_of)
    if os.geteuid() == 0 and st.st_uid != 0:
        os.lchown(path, st.st_uid, st.st_gid)


def run_agent(ctl: dict, argv: list[str], env: dict[str, str], timeout: float, rec=None) -> subprocess.CompletedProcess:
    """Run a coding agent's command to its end or ``timeout`` (TimeoutExpired), in the
    workspace, its output text with undecodable bytes replaced (an agent's output is data).
    Inside the agent sandbox its standard input is the sandbox's lifeline
    (claimgrid/sandbox/loopback.py): a pipe whose write end only this process holds, closed
    when the agent is stopped or this process dies, which ends every process of the sandbox.

    However it ends, every process of the run is gone before this returns or raises
    (reaper.end_run: the sandbox's pid namespace, this process's descendants, the run's uid
    and cgroup), so nothing the agent started can change a file the adapter then reads back;
    what was found is the runtime ``agent_processes`` event on ``rec``. A process that
    outlives the kill raises reaper.ProcessesLeft (nothing may be read back then)."""
    sandbox = ctl.get("agent_sandbox") or {}
    read_end = write_end = None
    try:
        if not sandbox:
            return subprocess.run(
                argv,
                cwd=ctl["workspace"],
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                start_new_session=True,
            )
        read_end, write_end = os.pipe()
        # The token, the lifeline's first line: only the forwarder reads it (loopback.py --inject).
        os.write(write_end, ctl["token"].encode() + b"\n")
        return subprocess.run(
            argv,
            cwd=ctl["workspace"],
            env=env,
            stdin=read_end,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    finally:
        for fd in (write_end, read_end):
            if fd is not None:
                os.close(fd)
        ended = reaper.end_run(sandbox.get("uid"), sandbox.get("cgroup_procs") or (), guarded=bool(sandbox))
        if rec is not None:
            rec.event("agent_processes", agent=ctl.get("agent_name"), **ended)


def credential(ctl: dict) -> str:
    """The API key a coding agent is given: under the guard a placeholder (the sandbox's
    forwarder puts the run token in its place on each request: ``ctl["agent_sandbox"]
    ["credential"]``, claimgrid/sandbox/loopback.py), so no process of the agent can read or
    replay the token; unguarded the token itself (no forwarder; the weaker case, recorded in
    the parity facts), which the gateway refuses once the run has ended."""
    sandbox = ctl.get("agent_sandbox") or {}
    return sandbox.get("credential") or ctl["token"]


def read_back(rec, ctl: dict, folder: str, name: str, what: str) -> str | None:
    """The text of the file ``name`` the agent left in ``folder`` (a folder the harness made),
    read by readback.read_back after the agent's processes are gone (run_agent): never
    through a link, only a regular file of one link owned by the folder's owner (the run's
    uid under the guard), at most readback.MAX_READBACK_BYTES. None when there is none; a
    refusal is the runtime ``readback_refused`` event (what was there instead) and None, so
    the run is classified from the rest of its evidence."""
    try:
        owner = os.stat(folder, follow_symlinks=False).st_uid
    except OSError:
        return None
    got = readback.read_back(folder, name, what, owner=owner)
    if isinstance(got, readback.Refusal):
        rec.event("readback_refused", agent=ctl.get("agent_name"), **got.as_event())
        return None
    return None if got is None else got.decode("utf-8", errors="replace")
