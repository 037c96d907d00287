"""The limit flags and models/limits.toml through ``grid.py run``: a bad value is one line
naming the flag (or the file and the field), exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _file(tmp_path, text: str):
    path = tmp_path / "limits.toml"
    path.write_text(text)
    return path


def _grid(*args):
    return subprocess.run(
        [sys.executable, str(ROOT / "grid.py"), "run", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize(
    "flag,value",
    [
        ("--call-timeout", "0"),
        ("--call-timeout", "nan"),
        ("--max-output-tokens", "0"),
        ("--max-run-tokens", "-5"),
        ("--max-output-tokens", "many"),
    ],
)
def test_a_bad_limit_flag_is_one_line_naming_the_flag(tmp_path, flag, value):
    out = tmp_path / "never"
    p = _grid(flag, value, "--out", str(out))
    assert p.returncode == 2 and flag in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not out.exists()


def test_a_bad_limits_file_stops_the_grid_before_anything_is_written(tmp_path):
    path = _file(tmp_path, '[models."openai/*"]\nmax_run_tokens = 0\n')
    out = tmp_path / "never"
    p = _grid("--limits", str(path), "--models", "openai/x", "--out", str(out))
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines()[-1].count(str(path)) == 1
    assert "models.openai/*.max_run_tokens" in p.stderr and not out.exists()
