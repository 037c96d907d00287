"""What a published ledger folder must not hold: this machine's checkout, home folder and
temporary folders (DESIGN.md §7; claimgrid.machinepaths). Read by the tests that scan a
fresh grid's whole folder (tests/grid/ledger/test_machine_paths.py, the local-model lane)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def forbidden() -> re.Pattern[str]:
    """The checkout (as given and resolved, and the folder its venvs resolve to), the home
    folder and the temporary folders, each as a whole path component followed by more path."""
    roots = {str(ROOT), str(ROOT.resolve()), os.path.expanduser("~")}
    roots |= {str((ROOT / name).resolve().parent) for name in (".venvs", ".venv") if (ROOT / name).exists()}
    roots |= {"/tmp", tempfile.gettempdir(), str(Path(tempfile.gettempdir()).resolve())}
    roots = {r for r in roots if r not in ("", "/")}
    return re.compile("|".join(re.escape(r) + r"(?=/|\b)" for r in sorted(roots, key=len, reverse=True)))


def machine_paths(folder: Path) -> dict[str, list[str]]:
    """{relative file: [hits]} over every regular file of ``folder``."""
    pattern, found = forbidden(), {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        hits = [text[max(m.start() - 40, 0) : m.end() + 60] for m in pattern.finditer(text)]
        if hits:
            found[path.relative_to(folder).as_posix()] = hits[:3]
    return found
