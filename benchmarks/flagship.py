"""Benchmark: MTL end to end at the flagship shape, as a user runs it.

Simulates the flagship leaderboard (4,272 LLMs x MMLU's 57 subjects, 14,042
items, 6.0e7 responses) to Parquet, then times ``mtlirt fit --method mtl`` as a
whole process (start-up, reading and validating the Parquet file, the fit,
writing the fit folder) and prints its wall seconds and peak memory.

Usage::

    .venv/bin/python benchmarks/flagship.py [--out DIR] [--repeat 2] [--missing 0.0] [-- extra fit options]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_fit(data: Path, out: Path, extra: list[str]) -> tuple[float, float]:
    """Run ``mtlirt fit`` in a child process; return (wall seconds, peak RSS GiB of the child)."""
    cmd = [sys.executable, "-m", "mtlirt.cli", "fit", str(data), "--method", "mtl", "--out", str(out), *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, _, rusage = os_wait4(proc)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if proc.returncode:
        raise SystemExit(f"fit failed ({proc.returncode}):\n{stderr}")
    print(stdout.strip())
    return wall, rusage.ru_maxrss / 2**20


def os_wait4(proc):
    import os

    pid, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return pid, status, rusage


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--n-llms", type=int, default=4272)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--missing", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=2, help="fits to time (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("extra", nargs="*", help="further options for mtlirt fit (after --)")
    args = parser.parse_args(argv)

    from mtlirt.simulate import simulate

    tmp = Path(tempfile.mkdtemp(prefix="mtlirt-flagship-")) if args.out is None else args.out
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        sim = simulate(args.n_llms, preset="mmlu", scale=args.scale, missing=args.missing, seed=args.seed)
        data = sim.write(tmp / "flagship.parquet")
        n = len(sim.responses)
        del sim
        print(f"simulated and wrote {n:,} responses in {time.perf_counter() - t0:.1f} s "
              f"(peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB)")
        rows = []
        for i in range(args.repeat):
            wall, peak = run_fit(data, tmp / f"fit{i}", args.extra)
            record = json.loads((tmp / f"fit{i}" / "fit.json").read_text())
            rows.append((wall, peak, record))
            print(f"mtlirt fit --method mtl, run {i + 1}: {wall:.1f} s wall, {peak:.2f} GiB peak; "
                  f"rank {record.get('rank')}, C {record.get('C')}, "
                  f"stages {json.dumps({k: round(v, 1) for k, v in record.get('seconds', {}).items()})}")
        best = min(r[0] for r in rows)
        print(f"\nflagship MTL end to end: best {best:.1f} s wall over {args.repeat} runs, "
              f"peak {max(r[1] for r in rows):.2f} GiB (targets: <= 45 s, <= 4 GB)")
    finally:
        if args.out is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
