"""Compile a venv's site-packages to bytecode, each distinct source compiled once per venvs folder.

Run by the venv's own interpreter, as a script (``python -I bytecode.py VENV CACHE``), after
``uv sync`` installed it (:func:`claimgrid.inputs.venvs.build`); standard library only, since it
runs on whatever Python the venv has.

The frameworks' venvs are read-only inside the sandbox, so every module a run imports must
already have its ``.pyc`` (an uncompiled module is compiled again in every run's process).
``uv sync --compile-bytecode`` compiles every file of every venv, and the venvs share most of
their files (the same OpenAI client, pydantic, pygments... in eight of them: ~40% of the source
bytes are repeats). Here a compiled module is kept in ``CACHE`` under the sha256 of its source
and the interpreter's magic number, and every venv holding the same source gets the same code.

Each ``.pyc`` is written exactly as ``compileall`` / uv write it (timestamp-checked: the
source's mtime and size in its header, so an edited or replaced file is compiled again by the
interpreter). Only the marshalled code is shared; its file name is the first venv's, and the
import system sets every code object's file name to the module's own path when it loads the
``.pyc`` (``_imp._fix_co_filename``), so tracebacks name the right file. A file that does not
compile (Python 2 syntax in a package's test data, say) is skipped, as ``compileall`` skips it.

Prints one JSON line: files, compiled (cache misses), cached (hits), failed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import marshal
import os
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor

MAGIC = importlib.util.MAGIC_NUMBER
CHUNK = 200  # files per task: enough to make the pool's hand-off cheap


def _keep(path: str, data: bytes) -> None:
    """``data`` into the cache file ``path`` by rename: builds running at once share the cache,
    and none may read a part of another's file."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_made: set[str] = set()  # the __pycache__ folders this process made


def _write_pyc(path: str, data: bytes) -> None:
    """``data`` as a new file at the venv's ``path``: nothing reads a venv while it builds (its
    stamp is written last), and a build stopped midway leaves no stamp, so the next one writes
    every file again. A file already there is unlinked first, never written through: uv links
    a wheel's files from its cache, so one a wheel shipped may be that cache's own inode."""
    folder = os.path.dirname(path)
    if folder not in _made:
        os.makedirs(folder, exist_ok=True)
        _made.add(folder)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    with open(path, "xb") as f:
        f.write(data)


def _one(path: str, cache: str) -> str:
    """``compiled``, ``cached`` or ``failed`` for the source file ``path``."""
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            source = f.read()
    except OSError:
        return "failed"
    key = hashlib.sha256(MAGIC + source).hexdigest()
    kept = os.path.join(cache, key[:2], key)
    try:
        with open(kept, "rb") as f:
            code = f.read()
        outcome = "cached"
    except OSError:
        try:
            code = marshal.dumps(compile(source, path, "exec", dont_inherit=True))
        except (SyntaxError, ValueError, UnicodeDecodeError):
            return "failed"
        _keep(kept, code)
        outcome = "compiled"
    header = MAGIC + (0).to_bytes(4, "little")  # flags 0: checked by the source's mtime and size
    header += (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little") + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    pyc = importlib.util.cache_from_source(path)
    try:
        _write_pyc(pyc, header + code)
    except OSError:
        return "failed"
    return outcome


def _chunk(paths: list[str], cache: str) -> dict[str, int]:
    counts = {"compiled": 0, "cached": 0, "failed": 0}
    for path in paths:
        counts[_one(path, cache)] += 1
    return counts


def sources(venv: str) -> list[str]:
    """Every ``.py`` file under the venv's site-packages (what ``uv --compile-bytecode`` compiles)."""
    found = []
    lib = os.path.join(venv, "lib")
    for name in sorted(os.listdir(lib)) if os.path.isdir(lib) else []:
        site = os.path.join(lib, name, "site-packages")
        for root, dirs, files in os.walk(site):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            found += [os.path.join(root, f) for f in sorted(files) if f.endswith(".py")]
    return found


def main(argv: list[str]) -> int:
    venv, cache = argv
    cache = os.path.join(cache, MAGIC.hex())
    for shard in range(256):
        os.makedirs(os.path.join(cache, f"{shard:02x}"), exist_ok=True)
    paths = sources(venv)
    total = {"files": len(paths), "compiled": 0, "cached": 0, "failed": 0}
    chunks = [paths[i : i + CHUNK] for i in range(0, len(paths), CHUNK)]
    workers = min(len(os.sched_getaffinity(0)), len(chunks))
    if workers <= 1:
        results = [_chunk(c, cache) for c in chunks]
    else:
        with ProcessPoolExecutor(workers) as pool:
            results = list(pool.map(_chunk, chunks, [cache] * len(chunks)))
    for counts in results:
        for k, v in counts.items():
            total[k] += v
    print(json.dumps(total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
