"""Benchmark: the same seed gives the same Bayesian draws with an empty and with a warm PyTensor compile cache.

``draws`` (default): a tiny fixed-items fit (``simulate(40, [8, 8, 8], seed=3)``, NUTS 1 chain x 30 draws
after 30 tuning steps, seed 1) run twice in fresh processes that share a new, empty PyTensor
``base_compiledir``: the first compiles everything, the second loads it from the cache. Prints the sum of
every posterior variable's draws of each run and whether they agree to the bit. ``--fastmath`` runs the
fit with PyTensor's fast-math flags as they were before ``fit_bayes`` turned them off (the defect:
the two sums differed).

``cost``: one log density and gradient of the factor-2pl model on 1,000 LLMs x MMLU x 0.1 (items fixed
and joint), compiled to numba with and without fast-math; minimum over 5 rounds of 20 calls, ms.

    .venv/bin/python benchmarks/bench_reproducible.py [draws [--fastmath] | cost]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

_CHILD = """
import time, numpy as np
import mtlirt
from mtlirt import simulate
import mtlirt.bayes
from mtlirt.data.responses import Responses
if {fastmath}:  # the state before fit_bayes compiled without fast-math (mtlirt.fit calls mtlirt.bayes.fit_bayes)
    mtlirt.bayes.fit_bayes = mtlirt.bayes.fit_bayes.__wrapped__
t = time.process_time()
resp = Responses.from_frame(simulate(40, [8, 8, 8], seed=3).responses)
est = mtlirt.fit(resp, "bayes", items="fixed", draws=30, tune=30, chains=1, seed=1, progress=False)
post = est.posterior
print(repr(sum(float(post[v].values.astype(np.float64).sum()) for v in sorted(post.data_vars))),
      round(time.process_time() - t, 1))
"""


def draws(fastmath: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="mtlirt-ptc-") as cache:
        env = dict(os.environ, PYTENSOR_FLAGS=f"base_compiledir={cache}", PYTHONWARNINGS="ignore")
        sums = []
        for state in ("empty cache", "warm cache"):
            out = subprocess.run([sys.executable, "-c", _CHILD.format(fastmath=fastmath)], env=env, check=True,
                                 capture_output=True, text=True).stdout.split()
            sums.append(out[0])
            print(f"{state}: sum of the draws {out[0]}, {out[1]} s CPU")
    print("same to the bit" if sums[0] == sums[1] else "DIFFERENT")


def cost() -> None:
    import pytensor

    from mtlirt import simulate
    from mtlirt.bayes.sample import build
    from mtlirt.data.responses import Responses

    resp = Responses.from_frame(simulate(1000, preset="mmlu", scale=0.1, seed=7).responses)
    for items in ("fixed", "joint"):
        m = build(resp, "factor-2pl", items=items).model
        fns = {}
        for fm in (True, False):
            with pytensor.config.change_flags(numba__fastmath=fm):
                fns[fm] = (m.compile_logp(mode="NUMBA"), m.compile_dlogp(mode="NUMBA"))
        rng = np.random.default_rng(0)
        pts = [{k: v + 0.01 * rng.standard_normal(np.shape(v)) for k, v in m.initial_point().items()}
               for _ in range(20)]
        best = {True: np.inf, False: np.inf}
        for _ in range(5):
            for fm, (f, g) in fns.items():
                t = time.perf_counter()
                for p in pts:
                    f(p)
                    g(p)
                best[fm] = min(best[fm], (time.perf_counter() - t) / len(pts))
        print(f"items {items}: one log density + gradient {1e3 * best[True]:.2f} ms with fast-math, "
              f"{1e3 * best[False]:.2f} ms without")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", nargs="?", default="draws", choices=["draws", "cost"])
    p.add_argument("--fastmath", action="store_true", help="draws: with fast-math, as before the fix")
    args = p.parse_args()
    draws(args.fastmath) if args.what == "draws" else cost()


if __name__ == "__main__":
    main()
