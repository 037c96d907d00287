"""The local model's speed on llama-server: for each of ``--starts`` server starts (the
catalog's first model, as the CI lane serves it), the start's wall time, the grid's own warm-up
figures (prompt and generation tokens/s from the server's timings) and ``--repeats`` more
warm-ups on the running server, then the server's CPU-seconds (from /proc, before its stop).

    uv run --extra local-model python -m bench.local_model [--starts 3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import time
import tomllib

from claimgrid import localmodel
from claimgrid.localmodel import probe


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    name = next(iter(tomllib.loads(localmodel.CATALOG.read_text())["models"]))
    print("start  wall_s  prompt_tok/s  gen_tok/s  (then each repeat's)  server_cpu_s")
    for i in range(args.starts):
        t0 = time.perf_counter()
        [s] = localmodel.serve([f"local/{name}"], jobs=1)
        wall = time.perf_counter() - t0
        speeds = [s.provenance["speed"]]
        server = probe.Server(s.api_base.removesuffix("/v1"), s.api_key)
        for _ in range(args.repeats):
            speeds.append(probe.warm_up(server, name, s.provenance["temperature"], s.provenance["seed"]))
        assert s.proc is not None
        used = cpu_s(s.proc.pid)
        s.stop()
        figures = "  ".join(f"{p['prompt_tokens_per_s']:>6g} {p['generation_tokens_per_s']:>6g}" for p in speeds)
        print(f"{i + 1:>5}  {wall:>6.1f}  {figures}  {used:.2f}")


if __name__ == "__main__":
    main()
