"""Errors that reach the user as one line naming the file and the field."""

from __future__ import annotations


class ClaimgridError(Exception):
    """An error meant for the user: printed as one line, never as a traceback.

    ``cli_status`` is grid.py's exit code for it: 2 for usage and data errors.
    """

    cli_status = 2


class Interrupted(ClaimgridError):
    """Ctrl-C during a grid: the runs recorded so far are kept for --resume (exit 130)."""

    cli_status = 130


class StorageError(ClaimgridError):
    """The ledger folder could not be written (disk full, read-only, permission): exit 1.

    Raised after the grid stopped cleanly; what was recorded can be finished with --resume.
    """

    cli_status = 1


class DataError(ClaimgridError):
    """A data file (task, condition, venvs.toml) failed validation.

    The message is one line: ``PATH: field 'a.b': what is wrong``.
    """

    def __init__(self, path, field: str | None, message: str):
        self.path = str(path)
        self.field = field
        self.message = message
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {message}")


class UnknownNameError(ClaimgridError):
    """A name on the command line that is not registered; lists the valid names."""

    def __init__(self, kind: str, name: str, valid):
        self.kind, self.name, self.valid = kind, name, sorted(valid)
        super().__init__(f"unknown {kind} '{name}'; valid: {', '.join(self.valid) or '(none)'}")
