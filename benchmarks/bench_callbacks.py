"""Benchmark: the compile of nutpie's C callbacks for a model, on empty and on filled compile caches.

Two routes, each compiling the joint factor-2pl model (``--llms`` LLMs x domains of ``--sizes`` items,
the toy data of ``tests/test_bayes.py``) in a new process: ``nutpie`` calls
``nutpie.compile_pymc_model(model, backend="numba")``; ``mtlirt`` calls what ``fit_bayes`` calls,
``mtlirt.bayes._nutpie.compile_model``. Each route runs twice on compile caches of its own (PyTensor's
``base_compiledir``, numba's ``NUMBA_CACHE_DIR``): first empty (``cold``: what a fresh machine pays),
then filled by that first run (``warm``: what every later fit in a new process pays). In each process the
model is compiled, sampled (2 chains x 150 draws after 150 tuning steps at seed 1), and a second model
of the same shapes (another leaderboard) is compiled after it (``refit``: what a later fit in the same
process pays). Prints each compile's wall and CPU seconds and the sampling's wall seconds, and whether
every run drew the same numbers to the bit; ``--save DIR`` keeps the draws (``ROUTE-CACHE.npz``) to
compare with another version of the package.

    .venv/bin/python benchmarks/bench_callbacks.py [--llms 40] [--sizes 8 10 12] [--save DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import json, sys, time, warnings
import numpy as np, pytensor
sys.path.insert(0, {tests!r})
from test_bayes import toy
from mtlirt.bayes import _nutpie
from mtlirt.bayes.sample import build
import nutpie

def compile_(built):
    w, c = time.perf_counter(), time.process_time()
    if {route!r} == "nutpie":
        compiled = nutpie.compile_pymc_model(built.model, backend="numba", initial_points=built.initvals)
    else:
        compiled = _nutpie.compile_model(built.model, built.initvals)
    return compiled, time.perf_counter() - w, time.process_time() - c

arr, _ = toy({llms}, {sizes}, seed=22, loading=0.8)
other, _ = toy({llms}, {sizes}, seed=23, loading=0.6)
with warnings.catch_warnings(), pytensor.config.change_flags(numba__fastmath=False):
    warnings.simplefilter("ignore")
    compiled, compile_wall, compile_cpu = compile_(build(arr, "factor-2pl"))
    w = time.perf_counter()
    trace = nutpie.sample(compiled, draws=150, tune=150, chains=2, seed=1, progress_bar=False)
    sample_wall = time.perf_counter() - w
    _, refit_wall, refit_cpu = compile_(build(other, "factor-2pl"))
post = trace.posterior.to_dataset()
np.savez({out!r}, **{{v: post[v].values for v in post.data_vars}})
print(json.dumps(dict(compile_wall=compile_wall, compile_cpu=compile_cpu, sample_wall=sample_wall,
                      refit_wall=refit_wall, refit_cpu=refit_cpu)))
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llms", type=int, default=40)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 10, 12])
    ap.add_argument("--routes", nargs="+", default=["nutpie", "mtlirt"], choices=["nutpie", "mtlirt"])
    ap.add_argument("--save", type=Path, default=None, help="folder to keep the draws in")
    args = ap.parse_args(argv)
    import numpy as np

    tests = str(Path(__file__).resolve().parents[1] / "tests")
    draws = {}
    print(f"{'route':>7} {'cache':>5} | {'compile wall':>12} {'CPU':>6} | {'refit wall':>10} {'CPU':>6} | sampling")
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.save or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        for route in args.routes:
            caches = Path(tmp) / f"caches-{route}"
            env = dict(os.environ, PYTENSOR_FLAGS=f"base_compiledir={caches / 'pytensor'}",
                       NUMBA_CACHE_DIR=str(caches / "numba"), PYTHONWARNINGS="ignore")
            for cache in ("cold", "warm"):
                out = str(out_dir / f"{route}-{cache}.npz")
                code = _CHILD.format(tests=tests, llms=args.llms, sizes=tuple(args.sizes), route=route, out=out)
                res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
                if res.returncode:
                    sys.exit(res.stderr[-3000:])
                fig = json.loads(res.stdout.strip().splitlines()[-1])
                print(f"{route:>7} {cache:>5} | {fig['compile_wall']:10.1f} s {fig['compile_cpu']:6.1f} |"
                      f" {fig['refit_wall']:8.1f} s {fig['refit_cpu']:6.1f} | {fig['sample_wall']:5.1f} s")
                with np.load(out) as f:
                    draws[(route, cache)] = {k: f[k] for k in f.files}
    first, *rest = draws.values()
    same = all(d.keys() == first.keys() and all(np.array_equal(d[k], first[k]) for k in first) for d in rest)
    print(f"(CPU: CPU seconds of the compiling process) same draws to the bit in every run: {same}")


if __name__ == "__main__":
    main()
