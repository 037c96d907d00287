"""Per-model limits: the order (flags over models/limits.toml over code overrides over the
defaults), the reference models' values kept, the data file's validation (one line naming the
file and the field) and the flags' (one line naming the flag) through ``grid.py run``."""

from __future__ import annotations

import pytest

from claimgrid import caps
from claimgrid.errors import DataError
from claimgrid.execute import model_limits as limits
from claimgrid.reference import registry

REAL = "openai/some-model"
LOCAL = "ollama/tiny"


def _file(tmp_path, text: str):
    path = tmp_path / "limits.toml"
    path.write_text(text)
    return path


def test_reference_models_keep_the_values_their_ledgers_were_recorded_under(tmp_path):
    ref = registry.default_models()[0]
    got = limits.resolve([ref], path=tmp_path / "absent.toml")[ref]
    assert (got.call_timeout_s, got.max_model_calls, got.timeout_s) == (15.0, 24, 120.0)
    assert got.max_output_tokens is None and got.max_run_tokens is None
    assert got.client_deadline_s(real=False) == 15.0


def test_real_models_get_the_real_defaults_and_a_client_deadline_past_the_gateways(tmp_path):
    got = limits.resolve([REAL], path=tmp_path / "absent.toml")[REAL]
    assert got.call_timeout_s == caps.REAL_CALL_TIMEOUT_S and got.max_output_tokens == caps.REAL_MAX_OUTPUT_TOKENS
    assert got.max_model_calls == caps.REAL_MAX_MODEL_CALLS and got.max_run_tokens == caps.REAL_MAX_RUN_TOKENS
    assert got.timeout_s == caps.REAL_TIMEOUT_S
    assert got.client_deadline_s(real=True) == caps.REAL_CALL_TIMEOUT_S + caps.CLIENT_DEADLINE_MARGIN_S


def test_flags_over_the_file_over_code_over_defaults(tmp_path):
    path = _file(
        tmp_path,
        '[models."ollama/*"]\ncall_timeout_s = 300\nmax_output_tokens = 512\n'
        '[models."ollama/tiny"]\nmax_output_tokens = 256\n',
    )
    code = {LOCAL: {"call_timeout_s": 90.0, "max_model_calls": 12}, REAL: {"timeout_s": 77.0}}
    got = limits.resolve([LOCAL, REAL], {"max_run_tokens": 5000}, path=path, overrides=code)
    tiny = got[LOCAL]
    assert tiny.call_timeout_s == 300  # the file over the code's measured deadline
    assert tiny.max_output_tokens == 256  # the later, more specific table over the earlier
    assert tiny.max_model_calls == 12  # code over the default
    assert tiny.max_run_tokens == 5000  # the flag over everything
    assert tiny.source == {
        "call_timeout_s": "limits.toml:ollama/*",
        "max_output_tokens": "limits.toml:ollama/tiny",
        "max_model_calls": "code",
        "max_run_tokens": "flag",
        "timeout_s": "default",
    }
    assert got[REAL].timeout_s == 77.0 and got[REAL].call_timeout_s == caps.REAL_CALL_TIMEOUT_S
    assert "per-call deadline 300 s (limits.toml:ollama/*)" in limits.line(LOCAL, tiny)


def test_set_override_is_what_the_grid_resolves_with(tmp_path):
    limits.set_override(LOCAL, call_timeout_s=42.0)
    try:
        assert (
            limits.resolve([LOCAL], path=tmp_path / "absent.toml", overrides=limits.code_overrides())[
                LOCAL
            ].call_timeout_s
            == 42.0
        )
        with pytest.raises(DataError, match="unknown limit"):
            limits.set_override(LOCAL, deadline=3)
    finally:
        limits.clear_overrides()


@pytest.mark.parametrize(
    "text,field",
    [
        ('[models."ollama/*"]\ncall_timeout_s = 0\n', "models.ollama/*.call_timeout_s"),
        ('[models."ollama/*"]\nmax_output_tokens = "many"\n', "models.ollama/*.max_output_tokens"),
        ('[models."ollama/*"]\ndeadline = 3\n', "models.ollama/*.deadline"),
        ('[models."x/*"]\ntimeout_s = inf\n', "models.x/*.timeout_s"),
        ("[other]\na = 1\n", "other"),
    ],
)
def test_a_bad_entry_is_one_line_naming_the_file_and_the_field(tmp_path, text, field):
    path = _file(tmp_path, text)
    with pytest.raises(DataError) as err:
        limits.resolve([REAL], path=path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and f"field '{field}'" in message


def test_the_shipped_file_is_valid_and_matches_no_reference_model():
    entries = limits.load_file()
    assert entries, "models/limits.toml ships its examples"
    import fnmatch

    for name in registry.models():
        assert not any(fnmatch.fnmatchcase(name, glob) for glob, _ in entries), name


def test_a_served_models_measured_deadline_and_server_cap_are_the_limits_in_force(tmp_path):
    # Found in the real-model ledger's pilot (docs/real-model-ledger/HAND_CHECK.md): the local
    # server cut every answer at its catalog cap (128) while the run's limits, its record and
    # the ledger's first screen said "output-token cap 1024 tokens hit".
    default = limits.resolve(["local/tiny"], path=tmp_path / "absent.toml")["local/tiny"]
    got = default.served(155.0, 128)
    assert (got.call_timeout_s, got.max_output_tokens) == (155.0, 128)
    assert got.source["call_timeout_s"] == "measured" and got.source["max_output_tokens"] == "model server"
    assert got.max_model_calls == default.max_model_calls and got.timeout_s == default.timeout_s
    # A flag wins over the measured deadline; a flag's cap below the server's stays the cap.
    flagged = limits.resolve(
        ["local/tiny"], flags={"call_timeout_s": 30.0, "max_output_tokens": 64}, path=tmp_path / "absent.toml"
    )["local/tiny"]
    kept = flagged.served(155.0, 128)
    assert (kept.call_timeout_s, kept.max_output_tokens) == (30.0, 64) and kept.source == flagged.source
    # No server facts: nothing changes.
    assert default.served(None, None) == default
