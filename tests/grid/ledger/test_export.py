"""``grid.py export``: a real grid's ledger as Inspect eval logs and OpenTelemetry traces,
read back with the tools' own libraries; the export is a pure function of the folder."""

from __future__ import annotations

import hashlib

from claimgrid.commands.cli import main

from tests.export_support import check_export_agrees, need


def _digest(folder):
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_both_exports_read_back_and_agree_with_the_evidence(ledger_grid, tmp_path):
    counts = check_export_agrees(ledger_grid, tmp_path)
    assert counts["runs"] > 100 and counts["frameworks"] == 2


def test_re_export_is_byte_identical(ledger_grid, tmp_path):
    need("inspect_ai")
    need("opentelemetry.sdk")
    for fmt in ("inspect", "otel"):
        a, b = tmp_path / f"{fmt}-a", tmp_path / f"{fmt}-b"
        assert main(["export", str(ledger_grid), "--format", fmt, "--out", str(a)]) == 0
        assert main(["export", str(ledger_grid), "--format", fmt, "--out", str(b)]) == 0
        assert _digest(a) == _digest(b) and _digest(a)


def test_bad_input_is_one_line_and_writes_nothing(ledger_grid, tmp_path, capsys):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("x")
    assert main(["export", str(ledger_grid), "--format", "otel", "--out", str(busy)]) == 2
    assert main(["export", str(tmp_path / "missing"), "--format", "otel", "--out", str(tmp_path / "o")]) == 2
    assert (
        main(
            [
                "export",
                str(ledger_grid),
                "--format",
                "inspect",
                "--otlp-endpoint",
                "http://127.0.0.1:1",
                "--out",
                str(tmp_path / "o2"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("grid.py: error: ") for line in err), err
    assert "--out" in err[0] and "missing" in err[1] and "--otlp-endpoint" in err[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"] and [p.name for p in busy.iterdir()] == ["keep.txt"]


def test_otel_export_holds_every_run_whatever_the_sdks_environment_says(ledger_grid, tmp_path, monkeypatch):
    # OTEL_SDK_DISABLED is what every adapter gets (and what importing the adapter kit in a
    # process sets); a sampler from the environment could drop traces. Neither may thin a file
    # written from recorded evidence.
    need("opentelemetry.sdk")
    from tests.export_support import ledger_runs, read_otlp, spans_by_run

    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    out = tmp_path / "otel"
    assert main(["export", str(ledger_grid), "--format", "otel", "--out", str(out)]) == 0
    assert set(spans_by_run(read_otlp(out / "traces.otlp.json"))) == set(ledger_runs(ledger_grid))
    assert __import__("os").environ["OTEL_SDK_DISABLED"] == "true"  # set aside only while building
