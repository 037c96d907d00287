"""A provider's refusal of a prompt longer than the model's context window is told apart from
any other failure (claimgrid.gateway.retry.context_window_refusal): the gateway records it as a
``context`` limit hit, a finding about the model and the harness, not the agent's failure."""

from __future__ import annotations

from claimgrid.gateway.retry import context_window_refusal

from tests.conftest import LazyModule

litellm = LazyModule("litellm")


def _litellm(cls, message: str):
    return cls(message=message, model="openai/x", llm_provider="openai")


def test_litellm_context_window_error_with_and_without_the_window():
    exc = _litellm(litellm.ContextWindowExceededError, "This model's maximum context length is 8192 tokens")
    assert context_window_refusal(exc) == 8192
    assert context_window_refusal(_litellm(litellm.ContextWindowExceededError, "prompt is too long")) == 0


def test_a_bad_request_in_a_providers_own_words():
    # a provider LiteLLM does not map: the error's own words still say it
    exc = _litellm(litellm.BadRequestError, "OpenAIException - context_length_exceeded: the prompt has 5938 tokens")
    assert context_window_refusal(exc) == 0


def test_llama_servers_own_words():
    text = (
        'OpenAIException - {"code":400,"message":"request (5938 tokens) exceeds the available context size '
        '(4096 tokens), try increasing it","type":"exceed_context_size_error"}'
    )
    assert context_window_refusal(_litellm(litellm.BadRequestError, text)) == 4096


def test_other_failures_are_not_a_context_refusal():
    assert context_window_refusal(_litellm(litellm.BadRequestError, "Invalid 'tools[0].name'")) is None
    assert context_window_refusal(_litellm(litellm.RateLimitError, "Rate limit reached")) is None
    assert context_window_refusal(TimeoutError("read timed out")) is None
