"""The run store: one ledger folder per grid run, append-only ``runs.jsonl``, write-once evidence.

Crash safety: a run's evidence folder is written completely (into a temporary name, then
renamed) *before* its line is appended to ``runs.jsonl`` and fsynced. A line in
``runs.jsonl`` therefore always has its evidence; a kill at any moment loses at most the
runs in flight, and ``--resume`` re-runs exactly the cells without a line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from pathlib import Path


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False, default=str)


class RunStore:
    """A ledger folder: ``meta.json``, ``runs.jsonl``, ``runs/<run_id>/``."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.runs_dir = self.folder / "runs"
        self.runs_path = self.folder / "runs.jsonl"
        self.meta_path = self.folder / "meta.json"
        self._lock = threading.Lock()

    # ---- meta
    def create(self, meta: dict) -> None:
        self.folder.mkdir(parents=True, exist_ok=False)
        self.runs_dir.mkdir()
        self.write_meta(meta)
        self.runs_path.touch()

    def read_meta(self) -> dict:
        return json.loads(self.meta_path.read_text())

    def write_meta(self, meta: dict) -> None:
        tmp = self.meta_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n")
        os.replace(tmp, self.meta_path)

    # ---- records
    def repair(self) -> None:
        """Drop a torn last line (a kill mid-write) and evidence folders that never got a line."""
        if self.runs_path.exists():
            data = self.runs_path.read_bytes()
            if data and not data.endswith(b"\n"):
                self.runs_path.write_bytes(data[: data.rfind(b"\n") + 1])
        done = self.completed_ids()
        for child in self.runs_dir.iterdir() if self.runs_dir.exists() else ():
            if child.name not in done:
                shutil.rmtree(child, ignore_errors=True)

    def records(self) -> list[dict]:
        out = []
        if not self.runs_path.exists():
            return out
        for line in self.runs_path.read_text().splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn line; repair() removes it before appending
        return out

    def completed_ids(self) -> set[str]:
        return {r["run_id"] for r in self.records()}

    def append(self, record: dict) -> None:
        line = (_dump(record) + "\n").encode()
        with self._lock:
            fd = os.open(self.runs_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    def rewrite(self, records: list[dict]) -> None:
        tmp = self.runs_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(_dump(r) + "\n" for r in records))
        os.replace(tmp, self.runs_path)

    # ---- evidence
    def write_evidence(self, run_id: str, files: dict[str, str | bytes | dict | list]) -> Path:
        """Write one run's evidence folder once, with a sha256 manifest; files end read-only."""
        final = self.runs_dir / run_id
        tmp = self.runs_dir / f".{run_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        manifest = {}
        for name, content in files.items():
            if isinstance(content, (dict, list)) and name.endswith(".jsonl"):
                data = "".join(_dump(e) + "\n" for e in content).encode()
            elif isinstance(content, (dict, list)):
                data = (json.dumps(content, indent=2, default=str) + "\n").encode()
            elif isinstance(content, str):
                data = content.encode()
            else:
                data = content or b""
            (tmp / name).write_bytes(data)
            manifest[name] = hashlib.sha256(data).hexdigest()
        (tmp / "manifest.json").write_text(json.dumps({"sha256": manifest}, indent=2) + "\n")
        for p in tmp.iterdir():
            p.chmod(0o444)
        if final.exists():  # a previous attempt of this cell died before its line was written
            shutil.rmtree(final)
        os.replace(tmp, final)
        return final

    def load_events(self, run_id: str) -> list[dict]:
        path = self.runs_dir / run_id / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def verify_manifest(self, run_id: str) -> list[str]:
        """Names of evidence files whose content no longer matches the manifest."""
        folder = self.runs_dir / run_id
        manifest = json.loads((folder / "manifest.json").read_text())["sha256"]
        return [n for n, h in manifest.items()
                if not (folder / n).exists() or hashlib.sha256((folder / n).read_bytes()).hexdigest() != h]
