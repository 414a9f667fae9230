"""Benchmark: nutpie's own numba callbacks against mtlirt's (``mtlirt.bayes._callbacks``).

Each route compiles the joint factor-2pl model (``--llms`` LLMs x domains of ``--sizes`` items, the
toy data of ``tests/test_bayes.py``) in a new process, then samples 2 chains x 150 draws after 150
tuning steps at seed 1. Run with a PyTensor compile cache that already holds the model's functions
(run it twice: the first run fills it), the figure is what every later fit in a new process pays.
Prints, per route, the compile's wall and CPU seconds and the sampling's, and whether the two routes
drew the same numbers to the bit.

    .venv/bin/python benchmarks/bench_callbacks.py [--llms 40] [--sizes 8 10 12]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import json, sys, time, warnings
import numpy as np, pytensor
sys.path.insert(0, {tests!r})
from test_bayes import toy
from mtlirt.bayes import _callbacks
from mtlirt.bayes.sample import build
import nutpie

arr, _ = toy({llms}, {sizes}, seed=22, loading=0.8)
with warnings.catch_warnings(), pytensor.config.change_flags(numba__fastmath=False):
    warnings.simplefilter("ignore")
    built = build(arr, "factor-2pl")
    w, c = time.perf_counter(), time.process_time()
    if {route!r} == "nutpie":
        compiled = nutpie.compile_pymc_model(built.model, backend="numba", initial_points=built.initvals)
    else:
        compiled = _callbacks.compile_pymc(built.model, built.initvals)
    compile_s = (time.perf_counter() - w, time.process_time() - c)
    w = time.perf_counter()
    trace = nutpie.sample(compiled, draws=150, tune=150, chains=2, seed=1, progress_bar=False)
    sample_s = time.perf_counter() - w
post = trace.posterior.to_dataset()
np.savez({out!r}, **{{v: post[v].values for v in post.data_vars}})
print(json.dumps({{"compile_wall": compile_s[0], "compile_cpu": compile_s[1], "sample_wall": sample_s}}))
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llms", type=int, default=40)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 10, 12])
    args = ap.parse_args(argv)
    import numpy as np

    tests = str(Path(__file__).resolve().parents[1] / "tests")
    draws = {}
    with tempfile.TemporaryDirectory() as tmp:
        for route in ("nutpie", "mtlirt"):
            out = str(Path(tmp) / f"{route}.npz")
            code = _CHILD.format(tests=tests, llms=args.llms, sizes=tuple(args.sizes), route=route, out=out)
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            fig = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{route:>7}: compile {fig['compile_wall']:6.1f} s wall, {fig['compile_cpu']:6.1f} CPU-s;"
                  f" sampling {fig['sample_wall']:5.1f} s")
            with np.load(out) as f:
                draws[route] = {k: f[k] for k in f.files}
    same = draws["nutpie"].keys() == draws["mtlirt"].keys() and all(
        np.array_equal(draws["nutpie"][k], draws["mtlirt"][k]) for k in draws["nutpie"])
    print(f"same draws to the bit: {same}")


if __name__ == "__main__":
    main()
