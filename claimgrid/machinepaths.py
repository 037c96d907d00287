"""Paths of the publishing machine, out of what a ledger publishes (design §7: a published
ledger "holds no path of the publisher's machine").

Contract: :func:`scrub` rewrites every absolute path of *this* machine that a string (or a
JSON value, recursively) holds into a name that says the same thing on any machine: a path
inside the checkout becomes relative to it (``tasks/x``, ``.venvs/tasks/x/bin/python``,
the checkout itself ``.``), the home folder ``~``, a run's scratch folder ``$RUN_DIR`` and any
other temporary folder ``$TMPDIR``. The harness applies it where it builds what it stores
(run records' facts, meta.json, the harness-written evidence files), so two honest runs of
the same grid from two folders store the same text.

:func:`find` is the reader's side, for a ledger made elsewhere (``grid.py check-ledger``):
it cannot know the publisher's folder names, so it looks for the shapes that only a
machine's own paths have (a home folder, a temporary folder, a checkout's ``.venv``, a
user-site interpreter) as well as this machine's own checkout and home.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Scratch folders of one run (claimgrid.execute's node folder), named by their role.
_RUN_SCRATCH = re.compile(r"/(?:dev/shm|tmp|var/tmp)(?:/[^/\s\"',;:]+)*?/claimgrid-node-[^/\s\"',;:]+/runs/[0-9a-f]+")


def _variants(path: str | Path) -> list[str]:
    """``path`` as given and resolved (a symlinked checkout or venv folder has both)."""
    out = {os.path.abspath(path)}
    try:
        out.add(str(Path(path).resolve()))
    except OSError:
        pass
    return [p for p in out if p not in ("/", "")]


@lru_cache(maxsize=1)
def _roots() -> tuple[tuple[re.Pattern[str], str], ...]:
    """(pattern, replacement) pairs, the longest prefix first so the most specific role wins."""
    pairs: dict[str, str] = {}
    for name in (".venvs", ".venv"):  # the framework and task venvs: often a symlink elsewhere
        for p in _variants(ROOT / name):
            pairs[p] = name
            if os.path.dirname(p) != str(ROOT):  # the sandbox binds each folder above them
                pairs.setdefault(os.path.dirname(p), "$VENVS_HOME" if name == ".venvs" else "$VENV_HOME")
    for p in _variants(ROOT):
        pairs[p] = "."
    home = os.path.expanduser("~")
    if home not in ("/", "~", ""):
        for p in _variants(home):
            pairs.setdefault(p, "~")
    for tmp in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}:
        for p in _variants(tmp):
            pairs.setdefault(p, "$TMPDIR")
    ordered = sorted(pairs.items(), key=lambda kv: -len(kv[0]))
    # A prefix matches a whole path component: /root never matches /rootfs.
    return tuple((re.compile(re.escape(p) + r"(?![\w.-])(/?)"), r) for p, r in ordered)


def scrub_text(text: str) -> str:
    """``text`` with this machine's paths rewritten (module docstring)."""
    if "/" not in text:
        return text
    text = _RUN_SCRATCH.sub("$RUN_DIR", text)
    for pattern, repl in _roots():
        text = pattern.sub(functools.partial(_replace, repl), text)
    return text


def _replace(repl: str, m: re.Match[str]) -> str:
    # "<checkout>/tasks/x" -> "tasks/x"; the checkout alone -> "."
    return "" if repl == "." and m.group(1) else repl + m.group(1)


def scrub(value):
    """``value`` (a string, or a JSON value: dicts and lists recursively, keys included) with
    this machine's paths rewritten; other values as they are."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub(v) for v in value)
    return value


# Shapes of a machine's own absolute paths, whoever's machine it was.
_FOREIGN = re.compile(
    r"(?<![\w.~<>-])/(?!workspace/)(?:"
    r"home/[^/\s\"'`|)]+|root|Users/[^/\s\"'`|)]+|tmp|var/tmp|var/folders|dev/shm|private/var"
    r"|(?:[^/\s\"'`|)]+/)+\.venvs?(?=/)"
    r")(?=/)[^\s\"'`|)<>\\]*"
)


def find(text: str) -> list[str]:
    """The machine paths in ``text``: this machine's checkout, home and temporary folders, and
    the shapes of any machine's (a home or temporary folder, a folder holding ``.venv``)."""
    hits = [m.group(0) for m in _FOREIGN.finditer(text)]
    for pattern, repl in _roots():
        if repl != "$TMPDIR":  # a temporary folder counts with something in it (the pattern above)
            hits += [m.group(0).rstrip("/") for m in pattern.finditer(text)]
    return hits


_HOME_SHAPE = re.compile(r"(?<![\w.~<>-])/(?:home/[^/\s\"'`|)]+|root|Users/[^/\s\"'`|)]+)(?=/|\s|$)")
_TMP_SHAPE = re.compile(r"(?<![\w.~<>-])/(?:tmp|var/tmp|dev/shm|var/folders/[^\s\"'`|)]+?/T)(?=/)")
_VENV_SHAPE = re.compile(r"(?<![\w.~<>-])/(?!workspace/)(?:[^/\s\"'`|)]+/)+(?=\.venvs?/)")


def redact(text: str) -> str:
    """``text`` from a ledger made on any machine, with the shapes :func:`find` looks for named by
    their role (a checkout's venv folder from where it starts, a home ``~``, a temporary folder
    ``$TMPDIR``): for rendering a harness-written field of an older ledger (its command line,
    a guard's binary), never for evidence of what an agent did."""
    text = scrub_text(text)
    text = _VENV_SHAPE.sub("", text)
    text = _TMP_SHAPE.sub("$TMPDIR", text)
    return _HOME_SHAPE.sub("~", text)
