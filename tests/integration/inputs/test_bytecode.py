"""The venv bytecode step (claimgrid/inputs/bytecode.py), run as the build runs it: a real
interpreter, as a script, on venv-shaped folders sharing one cache."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from claimgrid.inputs.venvs import BYTECODE_SCRIPT

SITE = Path("lib") / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
SHARED = "def where():\n    raise RuntimeError('here')\n"


def _venv(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / SITE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _compile(venv: Path, cache: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, "-I", str(BYTECODE_SCRIPT), str(venv), str(cache)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _run(venv: Path, code: str) -> subprocess.CompletedProcess:
    """``code`` with the venv's site-packages on the path, never writing bytecode (as in the
    sandbox, where the venv is read-only), verbose imports on stderr."""
    return subprocess.run(
        [sys.executable, "-B", "-v", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(venv / SITE)},
    )


def test_a_source_shared_by_two_venvs_is_compiled_once_and_loads_under_its_own_path(tmp_path):
    cache = tmp_path / "cache"
    a = _venv(tmp_path / "a", {"shared/__init__.py": SHARED, "only_a.py": "X = 1\n", "py2.py": "print 'no'\n"})
    b = _venv(tmp_path / "b", {"shared/__init__.py": SHARED, "only_b.py": "Y = 2\n"})
    assert _compile(a, cache) == {"files": 3, "compiled": 2, "cached": 0, "failed": 1}  # py2.py: a SyntaxError
    assert _compile(b, cache) == {"files": 2, "compiled": 1, "cached": 1, "failed": 0}
    p = _run(
        b,
        "import traceback, shared\ntry:\n    shared.where()\nexcept RuntimeError as e:\n"
        "    print(traceback.extract_tb(e.__traceback__)[-1].filename)",
    )
    assert p.returncode == 0, p.stderr
    # Loaded from b's own .pyc (the code came from a's compile), and named as b's file.
    assert p.stdout.strip() == str(b / SITE / "shared" / "__init__.py")
    assert f"code object from '{b / SITE / 'shared' / '__pycache__'}" in p.stderr


def test_an_edited_source_is_not_served_its_old_bytecode(tmp_path):
    venv = _venv(tmp_path / "v", {"mod.py": "VALUE = 'old'\n"})
    _compile(venv, tmp_path / "cache")
    src = venv / SITE / "mod.py"
    src.write_text("VALUE = 'new, longer'\n")  # another size: the timestamp header no longer matches
    p = _run(venv, "import mod; print(mod.VALUE)")
    assert p.returncode == 0 and p.stdout.strip() == "new, longer", p.stderr


def test_a_bytecode_file_linked_from_elsewhere_is_replaced_not_written_through(tmp_path):
    """uv links a wheel's files from its cache: a ``.pyc`` a wheel shipped may share its inode
    with the cache's copy, which the step must never change."""
    venv = _venv(tmp_path / "v", {"mod.py": "VALUE = 1\n"})
    outside = tmp_path / "uv-cache-copy.pyc"
    outside.write_bytes(b"the cache's bytes")
    pyc = venv / SITE / "__pycache__" / f"mod.cpython-{sys.version_info.major}{sys.version_info.minor}.pyc"
    pyc.parent.mkdir()
    os.link(outside, pyc)
    _compile(venv, tmp_path / "cache")
    assert outside.read_bytes() == b"the cache's bytes"
    assert pyc.read_bytes() != b"the cache's bytes" and pyc.stat().st_nlink == 1


def test_the_cache_drops_what_no_build_read_for_its_keep_days_and_a_later_build_compiles_it_again(tmp_path):
    """``prune_bytecode_cache`` (run after each venv's bytecode step): an entry whose access
    time is older than the keep window goes, a recent one and a build's temporary file stay,
    and the venv that was compiled from the dropped entry still imports from its own .pyc."""
    from claimgrid.inputs.venvs import prune_bytecode_cache

    cache = tmp_path / "cache"
    old = _venv(tmp_path / "old", {"gone.py": "G = 1\n"})
    new = _venv(tmp_path / "new", {"kept.py": "K = 2\n"})
    _compile(old, cache)
    _compile(new, cache)
    entries = {p.name: p for p in cache.glob("*/*/*")}
    assert len(entries) == 2
    day = 86400
    now = max(p.stat().st_atime for p in entries.values())
    # The cache's key: sha256 of the interpreter's magic number and the source (bytecode.py).
    gone_entry = entries[hashlib.sha256(importlib.util.MAGIC_NUMBER + b"G = 1\n").hexdigest()]
    os.utime(gone_entry, (now - 31 * day, now - 31 * day))
    tmp_file = gone_entry.parent / ".tmp-abc"
    tmp_file.write_bytes(b"being written")
    os.utime(tmp_file, (now - 40 * day, now - 40 * day))

    assert prune_bytecode_cache(cache, keep_days=30, now=now) == 1
    assert not gone_entry.exists() and tmp_file.exists()
    assert {p.name for p in cache.glob("*/*/*") if not p.name.startswith(".tmp-")} == set(entries) - {gone_entry.name}
    p = _run(old, "import gone; print(gone.G)")
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    assert f"code object from '{old / SITE / '__pycache__'}" in p.stderr
    # The next build that holds the dropped source compiles it again.
    again = _venv(tmp_path / "again", {"gone.py": "G = 1\n"})
    assert _compile(again, cache) == {"files": 1, "compiled": 1, "cached": 0, "failed": 0}
    assert prune_bytecode_cache(tmp_path / "no-cache-yet") == 0
