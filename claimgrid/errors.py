"""Errors that reach the user as one line naming the file and the field."""

from __future__ import annotations


class ClaimgridError(Exception):
    """An error meant for the user: printed as one line, never as a traceback."""


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
