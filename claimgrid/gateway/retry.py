"""Provider retries: a real provider's transient failure is retried inside the gateway.

Provider weather (a 429, a 5xx, a dropped connection) is not part of the experiment. The
gateway retries it with exponential backoff, honouring ``Retry-After``, before the swap
logic or the agent sees anything: the agent only notices latency. Every attempt is
recorded in the exchange's ``provider`` field (CONTRACTS, source ``gateway``). A call
that still fails after the retries is ``provider.failed``: the run is then classified
``UNKNOWN`` with reason ``provider`` (claimgrid.classify.classifier), never a ``bound`` swap or the
framework's fault.

Only real providers are retried. Reference models (every policy in the registry, the
fault policies included) are the experiment: their answers and refusals are never retried.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from dataclasses import dataclass

# Statuses a provider returns for its own trouble; a retry may succeed.
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
# Statuses caused by the request itself: the framework's request, not the provider's
# weather. Not retried, and not a provider failure.
REQUEST_STATUS = frozenset({400, 413, 422})


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` extra attempts; waits ``backoff_s * 2**k`` (or the provider's
    ``Retry-After`` when longer), each wait capped at ``max_wait_s``. An attempt that has
    no answer after ``timeout_s`` is abandoned as a transient failure (a hung provider)."""

    retries: int = 4
    backoff_s: float = 1.0
    max_wait_s: float = 60.0
    timeout_s: float = 300.0

    def as_dict(self) -> dict:
        return {
            "retries": self.retries,
            "backoff_s": self.backoff_s,
            "max_wait_s": self.max_wait_s,
            "timeout_s": self.timeout_s,
        }


class ProviderFailure(Exception):
    """The provider failed (after retries, or with a non-retryable error).

    Carries the original exception's ``status_code`` and the ``provider`` record for the
    exchange event, so the gateway answers with the provider's status and logs every attempt.
    """

    def __init__(self, original: BaseException, provider: dict):
        super().__init__(str(original))
        self.original = original
        self.status_code = getattr(original, "status_code", None)
        self.message = getattr(original, "message", None) or str(original)
        self.provider = provider


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_connection_error(exc: BaseException) -> bool:
    """A dropped / refused / reset connection or a timeout, however LiteLLM wrapped it."""
    names = {type(e).__name__ for e in _chain(exc)}
    if names & {
        "APIConnectionError",
        "Timeout",
        "APITimeoutError",
        "ConnectError",
        "ReadError",
        "RemoteProtocolError",
        "ConnectionResetError",
        "ReadTimeout",
        "ConnectTimeout",
    }:
        return True
    return "connection error" in str(exc).lower()


def transient(exc: BaseException) -> bool:
    status = status_of(exc)
    return status in TRANSIENT_STATUS or is_connection_error(exc) or (status is not None and status >= 500)


def provider_fault(exc: BaseException) -> bool:
    """True unless the request itself was refused (400/413/422): auth, quota, 5xx, resets."""
    return status_of(exc) not in REQUEST_STATUS or is_connection_error(exc)


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (``retry-after-ms`` / ``retry-after``), if any."""
    for headers in _headers(exc):
        ms = headers.get("retry-after-ms")
        if ms:
            try:
                return max(0.0, float(ms) / 1000)
            except ValueError:
                pass
        value = headers.get("retry-after")
        if not value:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value) if value else None
            if when is not None:
                return max(0.0, when.timestamp() - time.time())
    return None


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "original_exception", None)


def _headers(exc: BaseException):
    for e in _chain(exc):
        for candidate in (
            getattr(getattr(e, "response", None), "headers", None),
            getattr(e, "litellm_response_headers", None),
            getattr(e, "headers", None),
        ):
            if candidate:
                try:
                    yield {str(k).lower(): str(v) for k, v in dict(candidate).items()}
                except (TypeError, ValueError):
                    continue


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text.strip().splitlines()[0][:300]}"


async def with_retries(call, policy: RetryPolicy, model: str):
    """Await ``call()`` until it succeeds, fails non-transiently, or the retries run out.

    Returns ``(result, provider)``; raises ProviderFailure. ``provider`` is
    ``{"model", "attempts", "retries", "failed", "errors": [{"attempt", "status",
    "connection_error", "error", "transient", "retry_after_s", "wait_s", "latency_ms"}]}``
    with one entry per failed attempt (``status`` None when no HTTP answer came back).
    """
    errors: list[dict] = []
    attempt = 0
    while True:
        t0 = time.perf_counter()
        try:
            result = await call()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every provider error is recorded, then judged
            latency_ms = round((time.perf_counter() - t0) * 1000, 3)
            is_transient = transient(exc)
            hint = retry_after_s(exc)
            # status None: no HTTP answer at all (reset, refused, timeout), which LiteLLM reports as a 500.
            connection = is_connection_error(exc)
            entry = {
                "attempt": attempt,
                "status": None if connection else status_of(exc),
                "connection_error": connection,
                "error": _first_line(exc),
                "transient": is_transient,
                "retry_after_s": hint,
                "wait_s": None,
                "latency_ms": latency_ms,
            }
            errors.append(entry)
            if not is_transient or attempt >= policy.retries:
                raise ProviderFailure(
                    exc,
                    {
                        "model": model,
                        "attempts": attempt + 1,
                        "retries": attempt,
                        "failed": provider_fault(exc),
                        "errors": errors,
                    },
                ) from exc
            wait = min(policy.max_wait_s, max(policy.backoff_s * (2**attempt), hint or 0.0))
            entry["wait_s"] = round(wait, 3)
            await asyncio.sleep(wait)
            attempt += 1
            continue
        return result, {"model": model, "attempts": attempt + 1, "retries": attempt, "failed": False, "errors": errors}


# OpenAI's wording, and llama-server's ("request (N tokens) exceeds the available context size
# (M tokens)", type exceed_context_size_error), whose window is per slot.
_WINDOW = re.compile(
    r"maximum context length is (\d+)|context(?: window| length)? (?:is|of) (\d+)|available context size \((\d+) tokens",
    re.I,
)
_WINDOW_WORDS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context length exceeded",
    "exceed_context_size_error",
    "exceeds the available context size",
)


def context_window_refusal(exc: BaseException) -> int | None:
    """The provider refused the call because the prompt does not fit the model's context
    window: the window in tokens when the error names it, else 0; None for any other failure.
    Read from LiteLLM's exception class (``ContextWindowExceededError``, its mapping of every
    provider's wording) or, failing that, the error's own words."""
    named = any(c.__name__ == "ContextWindowExceededError" for c in type(exc).__mro__)
    text = str(exc)
    if not named and not any(w in text.lower() for w in _WINDOW_WORDS):
        return None
    m = _WINDOW.search(text)
    return int(next(g for g in m.groups() if g)) if m else 0
