"""What every dialect shares: the ``Dialect`` record, ``DialectError``, and the helpers its modules use
(the package ``claimgrid.gateway.dialects`` says what a dialect is)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass


class DialectError(ValueError):
    """A request body the dialect cannot serve; the message is one line naming the field."""


def joined_text(value, where: str, kinds: tuple[str, ...], part: str, parts: str) -> str | list[dict]:
    """A string, or a list of text parts of a type in ``kinds``: one part as its string, several
    as chat text content parts. Anything else is a DialectError naming ``where`` (``parts`` is
    the list's name in the message, ``part`` a part's shape)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise DialectError(f"'{where}' must be a string or a list of {parts}")
    texts = []
    for j, item in enumerate(value):
        if not isinstance(item, dict) or item.get("type") not in kinds or not isinstance(item.get("text"), str):
            raise DialectError(f"'{where}[{j}]' must be {part}")
        texts.append(item["text"])
    return texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]


def bearer(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the OpenAI clients' key)."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


@dataclass(frozen=True)
class Dialect:
    """One wire dialect: its ``name`` (recorded as ``dialect`` in every exchange event and raw
    line), the ``paths`` it is served on and its translation functions (module docstring)."""

    name: str
    paths: tuple[str, ...]
    to_chat: Callable[[dict], dict]
    from_chat: Callable[[dict, dict], dict]
    stream: Callable[[dict, dict, dict], Iterator[str]]
    error: Callable[[int, str | None, str | None], dict]
    token: Callable[[Mapping[str, str]], str | None]
    # The tool results a body it cannot translate still carries, as internal ``tool`` messages
    # (read leniently): what the agent sent back is recorded even when the request is refused.
    sent_results: Callable[[dict], list[dict]] | None = None

    @property
    def internal(self) -> bool:
        """True for Chat Completions, the gateway's own form (nothing to translate)."""
        return self.name == CHAT_COMPLETIONS


CHAT_COMPLETIONS = "chat-completions"
