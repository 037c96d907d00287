"""Any bytes are data: encoding text that may hold anything, and removing any tree.

Text the harness handles comes from agents, models and commands, so it may hold lone
surrogates (a model's JSON ``"\\ud800"``, a file name that is not UTF-8 decoded with
``surrogateescape``), NUL and control characters. Every point that turns it into bytes
goes through this module, and none of these functions raises on content:

* :func:`json_text` is ``json.dumps`` whose output is always encodable: a lone surrogate
  is written as its ``\\uXXXX`` escape, which every JSON reader turns back into the same
  string. Lossless.
* :func:`utf8` encodes text for a plain-text file: a surrogate that stands for an
  undecodable byte (``\\udc80``-``\\udcff``, what ``surrogateescape`` made) becomes that
  byte again (lossless); any other lone surrogate becomes the visible text ``\\udXXX``.
  :func:`substitutions` counts what the second rule replaced, for the record.
* :func:`remove_tree` removes a folder of any depth (a 1,200-level tree, a path past
  PATH_MAX) without recursion and without building long paths; it never raises.
"""

from __future__ import annotations

import json
import os
import re
import stat

_SURROGATE = re.compile("[\ud800-\udfff]")
_NOT_ESCAPE = re.compile("[\ud800-\udc7f\udd00-\udfff]")  # surrogates surrogateescape did not make


def _escape(match: re.Match) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(obj, **kwargs) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kwargs)`` with every lone surrogate escaped, so
    the text always encodes as UTF-8 and ``json.loads`` gives ``obj`` back unchanged."""
    kwargs.setdefault("ensure_ascii", False)
    text = json.dumps(obj, **kwargs)
    # Outside strings JSON holds only ASCII, so every surrogate found is inside a string,
    # where its escape means exactly the same character.
    return _SURROGATE.sub(_escape, text) if not kwargs["ensure_ascii"] else text


def json_bytes(obj, **kwargs) -> bytes:
    """:func:`json_text` as UTF-8."""
    return json_text(obj, **kwargs).encode("utf-8")


def substitutions(text: str) -> int:
    """How many characters :func:`utf8` writes as visible ``\\udXXX`` text (0: lossless)."""
    return len(_NOT_ESCAPE.findall(text)) if isinstance(text, str) else 0


def utf8(text: str) -> bytes:
    """``text`` as UTF-8 for a plain-text file, never raising (see the module docstring)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        pass
    text = _NOT_ESCAPE.sub(_escape, text)
    return text.encode("utf-8", "surrogateescape")


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate written as visible ``\\udXXX`` text: a string any
    encoder, renderer or browser takes (for rendered pages, not for evidence)."""
    return _SURROGATE.sub(_escape, text) if isinstance(text, str) else text


# Characters a Markdown page shows as visible escapes: C0 controls but newline and tab (NUL, the
# ESC that starts an ANSI sequence), DEL, C1 controls, and the bidi controls that reorder what a
# reader sees (U+200E/F, U+202A-E, U+2066-9).
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match) -> str:
    c = ord(match.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def terminal_text(text: str) -> str:
    """``text`` for a terminal: lone surrogates, control characters (an ANSI escape's ESC
    included) and bidi controls as visible escapes, newlines and tabs kept."""
    return _INVISIBLE.sub(_visible, safe_text(text))


def markdown_text(text: str) -> str:
    """A rendered Markdown page made inert whatever its fields held: lone surrogates as
    :func:`safe_text`, control and bidi characters as visible ``\\xNN`` / ``\\uNNNN`` text, and
    every ``<`` that would open raw HTML as ``&lt;`` (the page's own ``<a id="..."></a>``
    anchors kept). A Markdown renderer then shows a field's HTML as text, never as markup."""
    text = _INVISIBLE.sub(_visible, safe_text(text))
    return _escape_tags(text)


# The renderer's own anchors; every other "<" that opens raw HTML in Markdown (a tag, a closing
# tag, a comment, a declaration: "<" then a letter, "/", "!" or "?") is escaped.
_ANCHOR = re.compile(r'<a id="[\w-]+"></a>')


def _escape_tags(text: str) -> str:
    out, last = [], 0
    for m in _ANCHOR.finditer(text):
        out.append(re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text[last : m.start()]))
        out.append(m.group())
        last = m.end()
    out.append(re.sub(r"<(?=[A-Za-z/!?])", "&lt;", text[last:]))
    return "".join(out)


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path) -> bool:
    """Remove ``path`` (a folder of any depth, a file or a symlink); True when it is gone.

    Walks down with one open descriptor at a time, by names relative to it (no full path
    is ever built, so depth and PATH_MAX do not matter), and climbs back through ``..``
    checked against the folder it came from. Folders it cannot enter are made
    traversable first (an agent may leave a 0o000 folder). Never raises; what could not be
    removed stays and the result is False.
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    try:
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(path)
            return True
        cur = os.open(path, _DIR)
    except OSError:
        return False
    ids = [(st.st_dev, st.st_ino)]  # the folders walked, outermost first
    names: list[str] = []  # the name each folder below the top was entered by
    stuck: set[tuple[int, int]] = set()
    try:
        while True:
            child = _next_subfolder(cur, stuck)
            if child is not None:
                name, child_id = child
                sub = _enter(cur, name)
                if sub is None:
                    stuck.add(child_id)
                    continue
                os.close(cur)
                cur = sub
                ids.append(child_id)
                names.append(name)
                continue
            # cur holds no subfolder left to enter: climb, then remove it from its parent.
            done_id = ids.pop()
            if not ids:
                break
            done_name = names.pop()
            try:
                up = os.open("..", _DIR, dir_fd=cur)
            except OSError:
                return False
            os.close(cur)
            cur = up
            up_st = os.fstat(cur)
            if (up_st.st_dev, up_st.st_ino) != ids[-1]:
                return False  # the tree was moved meanwhile: stop rather than delete elsewhere
            if not _rmdir_named(cur, done_name, done_id) and not _rmdir_by_id(cur, done_id):
                stuck.add(done_id)
    finally:
        os.close(cur)
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


def _next_subfolder(dir_fd: int, stuck: set) -> tuple[str, tuple[int, int]] | None:
    """Unlink every non-folder in ``dir_fd`` and remove empty subfolders; the first
    subfolder left to enter (name, id), or None."""
    try:
        with os.scandir(dir_fd) as it:
            entries = list(it)
    except OSError:
        return None
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(entry.name, dir_fd=dir_fd)
            except OSError:
                pass
            continue
        key = (st.st_dev, st.st_ino)
        if key in stuck:
            continue
        try:
            os.rmdir(entry.name, dir_fd=dir_fd)
            continue
        except OSError:
            pass
        return entry.name, key
    return None


def _enter(dir_fd: int, name: str) -> int | None:
    """A descriptor for the subfolder ``name``, made ours to empty (``0o700``) when it was not
    (an agent may leave a 0o000 or 0o500 folder)."""
    try:
        fd = os.open(name, _DIR, dir_fd=dir_fd)
    except PermissionError:
        fd = None
    except OSError:
        return None
    if fd is not None:
        try:
            if os.fstat(fd).st_mode & 0o700 != 0o700:
                os.fchmod(fd, 0o700)
        except OSError:
            pass
        return fd
    try:
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError:
        return None


def _rmdir_named(dir_fd: int, name: str, child_id: tuple[int, int]) -> bool:
    """Remove the empty subfolder ``name`` when it is still the folder walked (``child_id``);
    a name now held by something else leaves the search by id (:func:`_rmdir_by_id`)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (st.st_dev, st.st_ino) != child_id or not stat.S_ISDIR(st.st_mode):
            return False
        os.rmdir(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False


def _rmdir_by_id(dir_fd: int, child_id: tuple[int, int]) -> bool:
    try:
        with os.scandir(dir_fd) as it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == child_id:
                    os.rmdir(entry.name, dir_fd=dir_fd)
                    return True
    except OSError:
        return False
    return False
