"""What a shell command an agent ran does to files: the one parser for every agent's shell.

A coding agent that brings its own shell (mini-swe-agent's ``bash``, Codex's ``exec_command`` /
``shell``, Claude Code's ``Bash``, Gemini CLI's ``run_shell_command``, a SWE-agent or OpenHands
command, Terminus' keystrokes) is read by what its command runs, never by the tool's name:

* **reads** (:func:`shell_effects` ``.reads``): ``cat`` (any flags: ``-n``, ``-A``), ``nl``,
  ``less`` / ``more``, ``grep -n '' FILE`` / ``grep -n . FILE`` and ``tail -n +1`` print a whole
  file; ``head -n N``, ``tail -n +K``, ``sed -n 'A,Bp'``, ``awk 'NR<=B'`` / ``'NR>=A && NR<=B'``
  / ``'NR==A,NR==B'`` print a line range (a pipe from a whole-file print into ``sed -n``,
  ``head`` or ``awk`` narrows it: ``nl -ba f | sed -n '1,80p'``); ``grep -n PATTERN FILE``,
  ``git diff [REV] -- PATH`` and ``git show REV -- PATH`` print some of a file (a partial read),
  ``git show REV:PATH`` the whole of that version.
* **changes** (``.changes``): an output redirection (``>``, ``>>``, ``&>``, not to ``/dev/*``),
  ``sed -i``, ``tee``, ``rm``, ``mv`` (both paths), ``cp`` / ``touch`` / ``truncate`` (the
  target), ``git checkout`` / ``git restore`` of paths, ``git apply`` / ``patch`` / ``git am`` /
  an ``apply_patch`` body (its ``*** Update File:`` / ``Add File`` / ``Delete File`` paths; a
  patch whose paths are not on the command line changes ``?``).
* **category**: ``edit`` when it changes a file that may have existed (``sed -i``, ``rm``,
  ``mv``, a patch, ``>>``, a checkout), ``write`` when it only creates or overwrites (``>``,
  ``tee``, ``cp``, ``touch``), ``read`` when every command of it only reads or lists (``ls``,
  ``find``, ``wc``, ``git status`` and the reads above), else ``bash``.

This parser is what a transcript read without the workspace says (``grid.py check``, the native
readers): the grid's own runs measure reads by the lines a command's output returned (the
coverage rule, :mod:`claimgrid.classify.evidence`, whose output is unwrapped by
:func:`command_output` first) and changes by the workspace snapshots, which outrank any parse.
A command it cannot split (an unclosed quote) is ``bash`` with no reads or changes: unknown,
never guessed.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Collection
from dataclasses import dataclass, field

_SEPARATORS = {"&&", "||", ";", "|", "&", "\n", ";;", "(", ")", "|&"}
_REDIRECTS = {">", ">>", "&>", "&>>", ">|", "1>", "2>", "1>>", "2>>"}
# Commands that only read or list (no file content printed, or content the rules above count).
_READ_ONLY = {
    "ls",
    "find",
    "wc",
    "stat",
    "file",
    "pwd",
    "echo",
    "printf",
    "tree",
    "du",
    "which",
    "type",
    "cat",
    "nl",
    "less",
    "more",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "sed",
    "awk",
    "sort",
    "uniq",
    "cut",
    "tr",
    "diff",
    "cmp",
    "true",
    "cd",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "column",
    "fold",
    "xxd",
    "od",
    "hexdump",
    "md5sum",
    "sha256sum",
    "date",
    "env",
}
_GIT_READ_ONLY = {"status", "diff", "show", "log", "blame", "ls-files", "rev-parse", "branch", "grep"}
_SED_RANGE = re.compile(r"^\s*(\d+)\s*(?:,\s*(\d+|\$)\s*)?p\s*;?\s*$")
_AWK_RANGES = (
    (re.compile(r"^\s*NR\s*<=?\s*(\d+)\s*$"), lambda m, lt: (1, int(m.group(1)) - (1 if lt else 0))),
    (re.compile(r"^\s*NR\s*>=\s*(\d+)\s*&&\s*NR\s*<=\s*(\d+)\s*$"), lambda m, lt: (int(m.group(1)), int(m.group(2)))),
    (re.compile(r"^\s*NR\s*==\s*(\d+)\s*,\s*NR\s*==\s*(\d+)\s*$"), lambda m, lt: (int(m.group(1)), int(m.group(2)))),
)
_AWK_WHOLE = re.compile(r"^\s*(?:1|\{\s*print\s*(?:\$0)?\s*;?\s*\}|NR\s*>=?\s*[01]\s*)\s*$")
# The keys of a shell tool's JSON-wrapped result: mini-swe-agent's observation, Codex's output.
_WRAPPER_KEYS = {
    "returncode",
    "output",
    "output_head",
    "output_tail",
    "elided_chars",
    "warning",
    "exception_info",
    "metadata",
}
_PATCH_PATH = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$|^\+\+\+ b/(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class FileRead:
    """A file a command printed: ``first``..``last`` (1-based, inclusive; ``last`` None: to the
    end), ``whole`` when the command prints all of it, ``partial`` when it prints some lines
    (search hits, a diff) whose places the command does not say."""

    path: str
    first: int = 1
    last: int | None = None
    partial: bool = False

    @property
    def whole(self) -> bool:
        return not self.partial and self.first <= 1 and self.last is None


@dataclass(frozen=True)
class ShellEffects:
    """What one command line does to files (module docstring)."""

    category: str = "bash"
    reads: tuple[FileRead, ...] = ()
    changes: tuple[str, ...] = ()
    parsed: bool = True
    commands: tuple[str, ...] = field(default=())  # the programs it runs, in order

    def to_json(self) -> dict:
        return {
            "category": self.category,
            "reads": [
                {"path": r.path, "first": r.first, "last": r.last, "whole": r.whole, "partial": r.partial}
                for r in self.reads
            ],
            "changes": list(self.changes),
            "parsed": self.parsed,
        }


def _split(command: str) -> list[tuple[list[str], str]] | None:
    """(words, the separator after them) of each simple command, or None (unbalanced quotes)."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[tuple[list[str], str]] = []
    words: list[str] = []
    try:
        for token in lex:
            if token in _SEPARATORS:
                out.append((words, token))
                words = []
            else:
                words.append(token)
    except ValueError:
        return None
    out.append((words, ""))
    return [(w, s) for w, s in out if w]


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _files(words: list[str], takes_value: Collection[str] = frozenset()) -> list[str]:
    """The operands of one command's words: what is not an option (nor an option's value)."""
    out, skip, ended = [], False, False
    for w in words:
        if skip:
            skip = False
            continue
        if not ended and w == "--":
            ended = True
            continue
        if not ended and w.startswith("-") and w != "-":
            if w in takes_value:
                skip = True
            continue
        out.append(w)
    return out


def _head(words: list[str]) -> tuple[int, list[str]]:
    n: int | None = 10
    rest, skip = [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if w in ("-n", "--lines"):
            n = _int(words[i + 1].lstrip("+")) if i + 1 < len(words) else None
            skip = True
        elif re.fullmatch(r"-n?\d+", w):
            n = int(w.lstrip("-n"))
        elif w.startswith("--lines="):
            n = _int(w.split("=", 1)[1])
        elif w.startswith("-c") or w.startswith("--bytes"):
            return -1, []
        elif not w.startswith("-"):
            rest.append(w)
    return (n if n is not None else -1), rest


def _tail(words: list[str]) -> tuple[int | None, list[str]]:
    """(first line printed, files): ``tail -n +K`` prints from line K; ``tail -n N`` the last N,
    whose first line the command does not say (None)."""
    first: int | None = None
    rest, skip = [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        value = None
        if w in ("-n", "--lines"):
            value = words[i + 1] if i + 1 < len(words) else ""
            skip = True
        elif re.fullmatch(r"-n?\+?\d+", w):
            value = w[2:] if w.startswith("-n") else w[1:]
        elif w.startswith("--lines="):
            value = w.split("=", 1)[1]
        elif not w.startswith("-"):
            rest.append(w)
        if value is not None:
            first = _int(value[1:]) if value.startswith("+") else None
    return first, rest


def _sed(words: list[str]) -> tuple[bool, tuple[int, int | None] | None, list[str]]:
    """(in place, printed range of ``sed -n``, files)."""
    in_place = any(w == "-i" or w.startswith("-i") or w.startswith("--in-place") for w in words)
    quiet = any(
        w in ("-n", "--quiet", "--silent") or (w.startswith("-") and not w.startswith("--") and "n" in w)
        for w in words
        if w != "-i"
    )
    script, files, skip = None, [], False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        if w in ("-e", "--expression"):
            script = words[i + 1] if i + 1 < len(words) else None
            skip = True
        elif w.startswith("-"):
            continue
        elif script is None:
            script = w
        else:
            files.append(w)
    span = None
    if quiet and script is not None:
        m = _SED_RANGE.match(script)
        if m:
            end = m.group(2)
            span = (int(m.group(1)), None if end == "$" else int(end) if end else int(m.group(1)))
    return in_place, span, files


def _awk(words: list[str]) -> tuple[tuple[int, int | None] | None, list[str]]:
    ops = _files(words, {"-F", "-v", "-f"})
    if not ops:
        return None, []
    program, files = ops[0], ops[1:]
    if _AWK_WHOLE.match(program):
        return (1, None), files
    body = program.strip()
    if body.endswith("}") and "{" in body:  # a pattern followed by a print-all action
        pattern, action = body.split("{", 1)
        if not re.fullmatch(r"\s*print\s*(?:\$0)?\s*;?\s*}", action):
            return None, files
        body = pattern
    for rx, span in _AWK_RANGES:
        m = rx.match(body)
        if m:
            return span(m, "<=" not in body and "<" in body), files
    return None, files


def _narrow(reads: list[FileRead], span: tuple[int, int | None] | None) -> list[FileRead]:
    """A pipe's reads narrowed by a later ``sed -n`` / ``head`` / ``awk`` range (None: a filter
    whose lines cannot be told: a partial read)."""
    out = []
    for r in reads:
        if span is None:
            out.append(FileRead(r.path, r.first, r.last, partial=True))
            continue
        first, last = span
        lo = r.first + first - 1
        hi = None if last is None else r.first + last - 1
        if r.last is not None:
            hi = r.last if hi is None else min(hi, r.last)
        out.append(FileRead(r.path, lo, hi, partial=r.partial))
    return out


def _redirect_targets(words: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(words without redirections, [(operator, target)])."""
    rest, targets, i = [], [], 0
    while i < len(words):
        w = words[i]
        if w in _REDIRECTS or w in ("<", "<<", "<<<", "2>&1", ">&"):
            if i + 1 < len(words):
                targets.append((w, words[i + 1]))
            i += 2
            continue
        m = re.fullmatch(r"(\d?&?>>?)(.+)", w)
        if m and not w.startswith("-"):
            targets.append((m.group(1), m.group(2)))
            i += 1
            continue
        rest.append(w)
        i += 1
    return rest, targets


@dataclass
class _Walk:
    """What the simple commands of one command line have read and changed so far."""

    command: str  # the whole line: patch paths are read from it
    reads: list[FileRead] = field(default_factory=list)
    pipe: list[FileRead] = field(default_factory=list)  # what the command before ``|`` printed
    edits: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    programs: list[str] = field(default_factory=list)
    all_read: bool = True

    def changed(self, paths: list[str], *, edit: bool = True) -> None:
        (self.edits if edit else self.writes).extend(paths)
        self.all_read = False


def shell_effects(command: str) -> ShellEffects:
    """What ``command`` (one shell command line) reads and changes (module docstring)."""
    if not isinstance(command, str) or not command.strip():
        return ShellEffects(parsed=False)
    # A heredoc body is data, not commands: read the lines before it, the body for patch paths.
    head, heredoc, body = command.partition("<<")
    if heredoc and not body.startswith("<"):  # ``<<<`` is a here-string, not a heredoc
        first_line = body.split("\n", 1)[0]
        marker = re.match(r"-?\s*(?:'[^']*'|\"[^\"]*\"|\S+)", first_line)
        head += " " + first_line[marker.end() if marker else 0 :]
    else:
        head = command
    simple = _split(head)
    if simple is None:
        return ShellEffects(parsed=False)
    walk = _Walk(command)
    previous_sep = ""
    for words, sep in simple:
        words, redirects = _redirect_targets(words)
        for op, target in redirects:
            if ">" in op and not target.startswith("/dev/") and not target.startswith("&"):
                (walk.edits if ">>" in op else walk.writes).append(target)
        while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):  # VAR=value prefixes
            words = words[1:]
        if words and words[0] in ("sudo", "command", "time", "nohup", "env"):
            words = words[1:]
        if not words:
            continue
        prog, args = words[0].rsplit("/", 1)[-1], words[1:]
        if prog in ("bash", "sh", "zsh", "dash") and len(args) >= 2 and args[0] in ("-c", "-lc", "-ic"):
            inner = shell_effects(args[1])  # Codex's argv ["bash", "-lc", "..."]: the command it runs
            if not inner.parsed:
                return inner
            walk.reads += inner.reads
            walk.edits += [c for c in inner.changes if inner.category == "edit"]
            walk.writes += [c for c in inner.changes if inner.category != "edit"]
            walk.programs += inner.commands
            walk.all_read = walk.all_read and inner.category == "read"
            previous_sep = sep
            continue
        walk.programs.append(prog)
        piped = previous_sep in ("|", "|&")
        now = _program(walk, prog, args, piped)
        if piped:
            walk.reads += walk.pipe
            walk.pipe = []
        walk.pipe = now if sep in ("|", "|&") else []
        if sep not in ("|", "|&"):
            walk.reads += now
        previous_sep = sep
    walk.reads += walk.pipe
    changes = tuple(dict.fromkeys(walk.edits + walk.writes))
    if walk.edits:
        category = "edit"
    elif walk.writes:
        category = "write"
    elif walk.all_read:
        category = "read"
    else:
        category = "bash"
    return ShellEffects(category, tuple(dict.fromkeys(walk.reads)), changes, True, tuple(walk.programs))


def _program(walk: _Walk, prog: str, args: list[str], piped: bool) -> list[FileRead]:
    """One simple command: the files it prints (returned), its changes and reads of the pipe
    recorded on ``walk``."""
    if prog in ("cat", "nl", "less", "more", "bat", "batcat"):
        valued = {"-b", "-v", "-w", "-s", "-i", "-n", "-l", "-d"} if prog == "nl" else set()
        return [FileRead(p) for p in _files(args, valued)]
    if prog == "head":
        n, files = _head(args)
        if piped:
            walk.pipe = _narrow(walk.pipe, (1, n) if n > 0 else None)
        return [FileRead(p, 1, n, partial=n < 0) for p in files]
    if prog == "tail":
        first, files = _tail(args)
        if piped:
            walk.pipe = _narrow(walk.pipe, (first, None) if first else None)
        return [FileRead(p, first) if first else FileRead(p, partial=True) for p in files]
    if prog in ("sed", "awk", "gawk", "mawk"):
        if prog == "sed":
            in_place, span, files = _sed(args)
            if in_place:
                walk.changed(files)
                return []
        else:
            span, files = _awk(args)
        if piped and not files:
            walk.pipe = _narrow(walk.pipe, span)
            return []
        return [FileRead(p, span[0], span[1]) if span else FileRead(p, partial=True) for p in files]
    if prog in ("grep", "egrep", "fgrep", "rg"):
        ops = _files(args, {"-e", "-f", "-m", "-A", "-B", "-C", "--include", "--exclude", "-g", "-t"})
        pattern, files = (ops[0], ops[1:]) if ops and "-e" not in args else ("", ops)
        everything = pattern in ("", ".", "^", "$") and "-v" not in args and "-c" not in args
        if piped and not files:
            walk.pipe = _narrow(walk.pipe, (1, None) if everything else None)
        return [FileRead(p, partial=not everything or p.endswith("/")) for p in files]
    if prog == "git" and args:
        return _git(walk, args[0], args[1:])
    _changer(walk, prog, args)
    return []


def _git(walk: _Walk, sub: str, rest: list[str]) -> list[FileRead]:
    """``git SUB REST``: what it prints of the files (show, diff) or what it changes."""
    now: list[FileRead] = []
    if sub == "show":
        for w in _files(rest):
            if ":" in w:
                now.append(FileRead(w.split(":", 1)[1]))
        if "--" in rest:
            now += [FileRead(p, partial=True) for p in rest[rest.index("--") + 1 :]]
    elif sub == "diff":
        paths = rest[rest.index("--") + 1 :] if "--" in rest else [p for p in _files(rest) if "/" in p or "." in p]
        now = [FileRead(p, partial=True) for p in paths if ".." not in p]
    elif sub in ("checkout", "restore"):
        paths = rest[rest.index("--") + 1 :] if "--" in rest else _files(rest, {"-b", "-B", "--source", "-s"})[1:]
        if sub == "restore":
            paths = _files(rest, {"--source", "-s"})
        walk.changed(paths or ["?"])
    elif sub in ("apply", "am"):
        walk.changed(_patch_paths(walk.command) or ["?"])
    elif sub in ("rm", "mv"):
        walk.changed(_files(rest) or ["?"])
    elif sub not in _GIT_READ_ONLY:
        walk.all_read = False
    return now


def _changer(walk: _Walk, prog: str, args: list[str]) -> None:
    """A program that is not a reader: what it changes, or that it is not read-only."""
    if prog in ("patch", "apply_patch", "applypatch"):
        walk.changed(_patch_paths(walk.command) or ["?"])
    elif prog == "rm":
        walk.changed(_files(args))
    elif prog == "mv":
        walk.changed(_files(args, {"-t", "-S"}))
    elif prog in ("cp", "touch", "truncate", "install"):
        ops = _files(args, {"-t", "-S", "-s", "--size", "-m"})
        walk.changed(ops[-1:] if prog in ("cp", "install") else ops, edit=False)
    elif prog == "tee":
        (walk.edits if "-a" in args else walk.writes).extend(_files(args))
    elif prog not in _READ_ONLY:
        walk.all_read = False


def _patch_paths(text: str) -> list[str]:
    return list(dict.fromkeys(a or b for a, b in _PATCH_PATH.findall(text)))


def patch_paths(text: str) -> list[str]:
    """The paths a patch (an ``apply_patch`` body or a unified diff) names."""
    return _patch_paths(text)


def command_output(result: str | None) -> str:
    """A shell tool's result as the text the command printed: an agent that wraps its output in
    JSON (mini-swe-agent's observation ``{"returncode": 0, "output": "..."}``, or its long-output
    form with ``output_head`` / ``output_tail``; Codex's ``{"output": "...", "metadata": ...}``)
    is unwrapped (an object of those keys only, with ``returncode`` or ``metadata``); any other
    result is taken as it is."""
    if not result:
        return ""
    text = result.strip()
    if text.startswith("{") and text.endswith("}"):
        try:
            doc = json.loads(text)
        except ValueError:
            return result
        # Only a wrapper's own keys: a file that happens to be a JSON object with an "output"
        # field, printed by cat, is left as it is.
        if isinstance(doc, dict) and set(doc) <= _WRAPPER_KEYS and ("returncode" in doc or "metadata" in doc):
            if isinstance(doc.get("output"), str):
                return doc["output"]
            head, tail = doc.get("output_head"), doc.get("output_tail")
            if isinstance(head, str) and isinstance(tail, str):
                return head + "\n" + tail
    return result
