"""Benchmark: simulate the flagship leaderboard shape, write it to Parquet, load it back.

Flagship shape: 4,272 LLMs x MMLU's 57 subjects (14,042 items), 6.0e7
responses. Each stage prints its wall time and the process's peak resident
memory so far (``ru_maxrss``).

Usage::

    .venv/bin/python benchmarks/simulate_flagship.py [--out DIR] [--n-llms N]
        [--scale S] [--missing P] [--seed S]

To add a stage (e.g. loading the written file into ``Responses``), append a
``(name, callable)`` pair in :func:`stages`; every callable takes the shared
``ctx`` dict (``args``, ``out``, and what earlier stages stored in it).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mtlirt.data.simulate import simulate

FLAGSHIP_LLMS = 4272

Stage = Callable[[dict[str, Any]], Any]


def _simulate(ctx: dict[str, Any]) -> str:
    a = ctx["args"]
    sim = simulate(a.n_llms, preset="mmlu", scale=a.scale, missing=a.missing, seed=a.seed)
    ctx["sim"] = sim
    return f"{sim.correct.shape[0]} LLMs x {sim.correct.shape[1]} items, {len(sim.responses):,} responses"


def _write(ctx: dict[str, Any]) -> str:
    path = ctx["sim"].write(ctx["out"] / "responses.parquet")
    ctx["parquet"] = path
    return f"{path} ({path.stat().st_size / 2**20:.1f} MiB)"


_LOAD = """
import json, resource, sys, time
t0 = time.perf_counter()
from mtlirt.data.responses import Responses
r = Responses.read(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0,
                  "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "held_gib": r.nbytes / 2**30, "repr": repr(r)}))
"""


def _load(ctx: dict[str, Any]) -> str:
    """Load the Parquet file into Responses in a fresh process (its own peak memory)."""
    del ctx["sim"]
    proc = subprocess.run([sys.executable, "-c", _LOAD, str(ctx["parquet"])], capture_output=True, text=True,
                          check=True)
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    return (f"in a fresh process: {res['seconds']:.2f} s, peak {res['peak_gib']:.2f} GiB, "
            f"Responses holds {res['held_gib']:.2f} GiB; {res['repr']}")


# ---------------------------------------------------------------------------
# STAGES: append (name, callable) pairs here to time more steps.
# ---------------------------------------------------------------------------
def stages() -> list[tuple[str, Stage]]:
    """The benchmark's stages, run in order on a shared context dict."""
    return [
        ("simulate", _simulate),
        ("write", _write),
        ("load", _load),
    ]


def _peak_gib() -> float:
    # ru_maxrss is in KiB on Linux, in bytes on macOS
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (2**30 if sys.platform == "darwin" else 2**20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: a temporary one)")
    parser.add_argument("--n-llms", type=int, default=FLAGSHIP_LLMS)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--missing", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="mtlirt-bench-") as tmp:
        out = args.out if args.out is not None else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        ctx: dict[str, Any] = {"args": args, "out": out}
        print(f"{'stage':<12} {'wall s':>8} {'peak RSS GiB':>13}  detail")
        total = 0.0
        for name, fn in stages():
            t0 = time.perf_counter()
            detail = fn(ctx)
            dt = time.perf_counter() - t0
            total += dt
            print(f"{name:<12} {dt:8.2f} {_peak_gib():13.2f}  {detail or ''}", flush=True)
        print(f"{'total':<12} {total:8.2f} {_peak_gib():13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
