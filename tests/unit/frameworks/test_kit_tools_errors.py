"""The adapter kit's ``tool_function`` (a harness tool as a function with a real signature) and
``RunErrors`` (each failure once, reported and/or raised), on the real kit."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def kit():
    # Importing the kit sets the harness's offline environment and adds modules: both put back.
    environ, modules = dict(os.environ), set(sys.modules)
    sys.path.insert(0, str(ROOT / "frameworks" / "_harness"))
    try:
        spec = importlib.util.spec_from_file_location("kit_under_test", ROOT / "frameworks" / "_harness" / "kit.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(ROOT / "frameworks" / "_harness"))
        os.environ.clear()
        os.environ.update(environ)
        for name in set(sys.modules) - modules:
            del sys.modules[name]


class Tool:
    """A harness tool's surface (name, description, JSON schema, keyword call)."""

    name = "search"
    description = "Search the workspace."
    parameters = {
        "type": "object",
        "required": ["pattern"],
        "properties": {
            "path": {"type": "string", "description": "Where to search"},
            "pattern": {"type": "string", "description": "A regular expression"},
            "limit": {"type": "integer", "description": "At most this many lines"},
        },
    }

    def __init__(self):
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return "ok"


class Rec:
    def __init__(self):
        self.errors = []

    def error(self, agent, kind, message):
        self.errors.append((agent, kind, message))


def test_a_tool_function_has_the_schemas_signature_and_calls_the_tool(kit):
    tool, seen = Tool(), []
    f = kit.tool_function(tool, lambda ctx, args: seen.append((ctx, args)), context="tool_context")
    sig = inspect.signature(f)
    assert list(sig.parameters) == ["tool_context", "pattern", "path", "limit"]  # required first
    assert sig.parameters["pattern"].annotation is str and sig.parameters["pattern"].default is inspect.Parameter.empty
    assert sig.parameters["limit"].annotation == (int | None) and sig.parameters["limit"].default is None
    assert f.__name__ == "search" and f.__doc__.startswith("Search the workspace.")
    assert "    pattern: A regular expression" in f.__doc__.splitlines()
    assert f(tool_context="ctx", pattern="x", limit=None) == "ok"
    assert tool.calls == [{"pattern": "x"}] and seen == [("ctx", {"pattern": "x"})]  # an unset optional is not sent
    with pytest.raises(TypeError):
        f(tool_context="ctx", pattern="x", encoding="utf-8")  # a name the signature lacks, as for any function


def test_a_failure_reported_then_raised_is_one_event(kit):
    rec = Rec()
    failure = RuntimeError("HTTP 500")
    with pytest.raises(RuntimeError), kit.recording_errors(rec, "builder") as errors:
        errors.report(str(failure), kind="RuntimeError")  # the framework's event carries the text
        raise failure
    assert rec.errors == [("builder", "RuntimeError", "HTTP 500")]


def test_a_different_failure_raised_after_a_report_is_recorded_too(kit):
    rec = Rec()
    with pytest.raises(ValueError), kit.recording_errors(rec, "builder") as errors:
        errors.report("tool refused", kind="RetryPrompt")
        raise ValueError("limit exceeded")
    assert [k for _, k, _ in rec.errors] == ["RetryPrompt", "ValueError"]


def test_a_raise_without_a_report_is_recorded(kit):
    rec = Rec()
    with pytest.raises(KeyError), kit.recording_errors(rec, "builder"):
        raise KeyError("x")
    assert [k for _, k, _ in rec.errors] == ["KeyError"]
