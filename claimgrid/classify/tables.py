"""The tables a classification depends on, as entries a ledger records and compares.

Contract:

* :func:`table_facts` ``() -> dict``: ``meta.json``'s ``classification_tables``, written at
  grid time: ``{name: {"source", "sha256", "entries"}}`` for every table of :data:`TABLES`.
  ``entries`` maps an entry's key (``"en.success"`` for a claim-word row, ``"outcome=PASS"``
  for a rule text, ``"ROLE_EVIDENCE.builder"`` for a vocabulary entry) to its value as JSON;
  ``sha256`` is the sha256 of the entries as canonical JSON (sorted keys, no spaces), so a
  comment or a reordering of the file does not change it, and any changed word does.
* :func:`table_changes` ``(recorded) -> list[str]``: one line per table whose entries differ
  from the recorded ones (which table, the keys added, removed and changed, with the list
  items added (+) and removed (-) for a changed list, seen from this checkout), or a line saying the ledger recorded none.
  Empty when every table is the one the ledger was made with.

The tables: the free-text claim words (:mod:`claimgrid.classify.claims` reads
``claim_words.toml``), the rule texts every classification value is explained with
(:mod:`claimgrid.rule_texts`), and the vocabulary tables the classifier decides from
(:mod:`claimgrid.vocab`: tool categories, the expected evidence of each role and its rank,
the prefix that marks a tool error).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path

from claimgrid import rule_texts, vocab

CLAIM_WORDS = Path(__file__).with_name("claim_words.toml")
SHOWN = 6  # keys or items named per change line; the rest are counted


def _claim_words() -> dict:
    with CLAIM_WORDS.open("rb") as fh:
        data = tomllib.load(fh)
    out = {}
    for lang, rows in data.items():
        if isinstance(rows, dict):
            out.update({f"{lang}.{k}": v for k, v in rows.items()})
        else:
            out[lang] = rows
    return out


def _rule_texts() -> dict:
    return {f"{field}={value}": text for field, texts in rule_texts.RULES.items() for value, text in texts.items()}


def _vocabulary() -> dict:
    out: dict = {f"TOOL_CATEGORY.{k}": v for k, v in vocab.TOOL_CATEGORY.items()}
    out |= {f"ROLE_EVIDENCE.{k}": v for k, v in vocab.ROLE_EVIDENCE.items()}
    out |= {f"EVIDENCE_RANK.{k}": v for k, v in vocab.EVIDENCE_RANK.items()}
    out["TOOL_NAMES"] = list(vocab.TOOL_NAMES)
    out["TOOL_ERROR_PREFIX"] = vocab.TOOL_ERROR_PREFIX
    return out


# name -> (source as the ledger names it, entries loader)
TABLES: dict[str, tuple[str, Callable[[], dict]]] = {
    "claim_words": ("claimgrid/classify/claim_words.toml", _claim_words),
    "rule_texts": ("claimgrid/rule_texts.py RULES", _rule_texts),
    "vocabulary": (
        "claimgrid/vocab.py TOOL_CATEGORY, ROLE_EVIDENCE, EVIDENCE_RANK, TOOL_NAMES, TOOL_ERROR_PREFIX",
        _vocabulary,
    ),
}


def digest(entries: dict) -> str:
    """sha256 of ``entries`` as canonical JSON (sorted keys, compact separators)."""
    text = json.dumps(entries, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def table_facts() -> dict:
    """Every table of :data:`TABLES` as this checkout holds it (module docstring)."""
    out = {}
    for name, (source, load) in TABLES.items():
        entries = json.loads(json.dumps(load()))  # as JSON holds it (tuples -> lists)
        out[name] = {"source": source, "sha256": digest(entries), "entries": entries}
    return out


def _named(items: list[str]) -> str:
    head = ", ".join(items[:SHOWN])
    return head + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _item_change(old, new) -> str:
    if isinstance(old, list) and isinstance(new, list):
        added = [repr(x) for x in new if x not in old]
        removed = [repr(x) for x in old if x not in new]
        parts = ([f"+{_named(added)}"] if added else []) + ([f"-{_named(removed)}"] if removed else [])
        return " ".join(parts) or "reordered"
    return f"{old!r} -> {new!r}"


def table_changes(recorded: dict | None) -> list[str]:
    """How this checkout's tables differ from ``recorded`` (``meta.json``'s ``classification_tables``)."""
    if not recorded:
        return [
            "meta.json records no classification tables (a ledger older than them): whether the claim words, "
            "rule texts or vocabulary changed since it was made is unknown"
        ]
    now = table_facts()
    out = []
    for name, cur in now.items():
        old = recorded.get(name)
        if not isinstance(old, dict):
            out.append(f"{name} ({cur['source']}): not recorded in this ledger")
            continue
        if old.get("sha256") == cur["sha256"]:
            continue
        before, after = old.get("entries"), cur["entries"]
        line = f"{name} ({cur['source']}) differs from the ledger's: sha256 {str(old.get('sha256'))[:12]} -> {cur['sha256'][:12]}"
        if isinstance(before, dict):
            added = sorted(set(after) - set(before))
            removed = sorted(set(before) - set(after))
            changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])
            parts = [f"this checkout adds {_named(added)}"] if added else []
            parts += [f"drops {_named(removed)}"] if removed else []
            parts += [f"changes {k}: {_item_change(before[k], after[k])}" for k in changed[:SHOWN]]
            if len(changed) > SHOWN:
                parts.append(f"and {len(changed) - SHOWN} more changed entries")
            line += "; " + "; ".join(parts)
        out.append(line)
    return out
