"""Strict data models: a file with one bad field is rejected whole, naming the field."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from claimgrid.errors import DataError


class Strict(BaseModel):
    """Base for every data file model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


M = TypeVar("M", bound=BaseModel)


def _first_error(exc: ValidationError) -> tuple[str | None, str]:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err.get("loc", ())) or None
    msg = err.get("msg", "invalid")
    if err.get("type") == "extra_forbidden":
        msg = "unknown field"
    elif err.get("type") == "missing":
        msg = "required field is missing"
    elif err.get("type") == "value_error":
        msg = msg.removeprefix("Value error, ")
    return field, msg


def validate(model: type[M], data: dict, path: Path | str) -> M:
    """Validate ``data`` against ``model``; raise one-line DataError naming path and field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        field, msg = _first_error(exc)
        more = len(exc.errors()) - 1
        if more:
            msg += f" (and {more} more error{'s' if more > 1 else ''})"
        raise DataError(path, field, msg) from None


def read_text(path: Path, field: str | None = None) -> str:
    """A data file's text, which must be UTF-8; anything else is a DataError naming the file."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise DataError(path, field, "file not found") from None
    except IsADirectoryError:
        raise DataError(path, field, "is a folder, not a file") from None
    except OSError as exc:
        raise DataError(path, field, f"cannot be read ({exc.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(
            path, field, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None


def load_toml(path: Path) -> dict:
    """Read a TOML file; bad encoding or syntax becomes a DataError with the file's path."""
    text = read_text(path)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DataError(path, None, f"not valid TOML: {exc}") from None
