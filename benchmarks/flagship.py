"""Benchmark: MTL end to end at the flagship shape, as a user runs it; memory per response at other sizes.

Simulates the flagship leaderboard (4,272 LLMs x MMLU's 57 subjects, 14,042
items, 6.0e7 responses) to Parquet, then times ``mtlirt fit --method mtl`` as a
whole process (start-up, reading and validating the Parquet file, the fit,
writing the fit folder) and prints its wall seconds, CPU seconds (user and
system, and the system seconds alone: the kernel's, mostly the first touch of new memory) and peak
memory (the child's ``ru_maxrss``).

With several ``--n-llms`` (e.g. ``712,4272,17000``: 1.0e7, 6.0e7 and 2.4e8
responses, complete) each size is simulated, fitted once and its peak
memory divided by its responses; the memory per response added from one
size to the next (the slope) is what a larger leaderboard costs, and
``(24 GiB - intercept) / slope`` is the largest leaderboard that fits in
24 GiB.

Usage::

    .venv/bin/python benchmarks/flagship.py [--out DIR] [--repeat 2] [--missing SHARE] [--n-llms 4272[,N2,...]]
        [--scenario ideal|realistic] [-- extra fit options]
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


def run_fit(data: Path, out: Path, extra: list[str]) -> tuple[float, float, float, float]:
    """Run ``mtlirt fit`` in a child process; return (wall seconds, CPU seconds, peak RSS GiB, system seconds
    of the child): the system seconds are the kernel's, mostly the first touch of new memory."""
    cmd = [sys.executable, "-m", "mtlirt.cli", "fit", str(data), "--method", "mtl", "--out", str(out), *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, _, rusage = os_wait4(proc)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if proc.returncode:
        raise SystemExit(f"fit failed ({proc.returncode}):\n{stderr}")
    print(stdout.strip())
    return wall, rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss / 2**20, rusage.ru_stime


def os_wait4(proc):
    import os

    pid, status, rusage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return pid, status, rusage


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="working folder (default: a temporary one)")
    parser.add_argument("--n-llms", default="4272", help="LLMs, or several sizes comma-separated")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--missing", type=float, default=None,
                        help="share of cells missing at random (default: the scenario's: 0 ideal, 0.05 realistic)")
    parser.add_argument("--scenario", default="ideal", help="the simulator's scenario (ideal or realistic)")
    parser.add_argument("--repeat", type=int, default=2, help="fits to time per size (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("extra", nargs="*", help="further options for mtlirt fit (after --)")
    args = parser.parse_args(argv)

    from mtlirt.data.simulate import simulate

    tmp = Path(tempfile.mkdtemp(prefix="mtlirt-flagship-")) if args.out is None else args.out
    tmp.mkdir(parents=True, exist_ok=True)
    sizes = [int(v) for v in args.n_llms.split(",")]
    series = []
    try:
        for n_llms in sizes:
            t0 = time.perf_counter()
            sim = simulate(n_llms, preset="mmlu", scale=args.scale, missing=args.missing, scenario=args.scenario,
                           seed=args.seed)
            data = sim.write(tmp / f"flagship-{n_llms}.parquet")
            n = len(sim.responses)
            del sim
            print(f"simulated and wrote {n:,} responses ({n_llms:,} LLMs) in {time.perf_counter() - t0:.1f} s "
                  f"(peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB)", flush=True)
            rows = []
            for i in range(args.repeat):
                wall, cpu, peak, system = run_fit(data, tmp / f"fit{i}", args.extra)
                record = json.loads((tmp / f"fit{i}" / "fit.json").read_text())
                rows.append((wall, cpu, peak))
                print(f"mtlirt fit --method mtl, run {i + 1}: {wall:.1f} s wall, {cpu:.1f} s CPU ({system:.1f} s of it "
                      f"system), {peak:.2f} GiB "
                      f"peak ({peak * 2**30 / n:.1f} bytes per response); rank {record.get('rank')}, "
                      f"C {record.get('C')}, stages "
                      f"{json.dumps({k: round(v, 1) for k, v in record.get('seconds', {}).items()})}", flush=True)
                shutil.rmtree(tmp / f"fit{i}", ignore_errors=True)
            data.unlink()
            best = min(r[0] for r in rows)
            print(f"\n{n_llms:,} LLMs, {n:,} responses, MTL end to end: best {best:.1f} s wall, "
                  f"{min(r[1] for r in rows):.1f} s CPU over {args.repeat} runs, peak {max(r[2] for r in rows):.2f} "
                  f"GiB (flagship targets: <= 10 s, <= 1.5 GB)\n", flush=True)
            series.append((n, max(r[2] for r in rows)))
        if len(series) > 1:
            (n0, p0), (n1, p1) = series[0], series[-1]
            slope = (p1 - p0) * 2**30 / (n1 - n0)
            base = p0 - slope * n0 / 2**30
            print("responses       peak GiB   bytes per response")
            for n, p in series:
                print(f"{n:>13,}   {p:8.2f}   {p * 2**30 / n:8.1f}")
            print(f"slope {slope:.1f} bytes per response, intercept {base:.2f} GiB: the largest leaderboard in "
                  f"24 GiB holds about {(24 - base) * 2**30 / slope:.2e} responses")
    finally:
        if args.out is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
