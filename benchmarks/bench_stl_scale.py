"""Benchmark: STL's domain scores on the estimand's scale, and the coverage of its intervals.

``simulate(600, domain_sizes=[8] * 3 + [40] * 3, similarity=0.2, seed=13)``
(optionally ``block_missing``, the first argument), ``fit(..., "stl",
bootstrap=40, seed=1)``: per domain, over the LLMs with responses, the
spread of the scores, the slope of the standardised truth on them (1 for
posterior-mean-like scores, the package's estimand: docs/model.md "The
estimand"), the share of true scores inside the 90% intervals and their
mean width; then the coverage over every cell. docs/model.md quotes it.

Usage: ``python benchmarks/bench_stl_scale.py [block_missing]``.
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.fitting import fit

warnings.simplefilter("ignore")


def main() -> None:
    block = float(sys.argv[1]) if len(sys.argv) > 1 else None
    sim = simulate(600, [8] * 3 + [40] * 3, similarity=0.2, seed=13, block_missing=block)
    r = Responses.from_frame(sim.responses)
    truth = sim.domain_scores.to_numpy()
    truth = (truth - truth.mean(0)) / truth.std(0)
    t0 = time.perf_counter()
    est = fit(r, "stl", bootstrap=40, seed=1, n_jobs=2)
    ds = est.domain_scores(0.9)
    score, lo, hi = (ds[c].to_numpy().reshape(truth.shape) for c in ("score", "lower", "upper"))
    seen = ~ds["predicted"].to_numpy().reshape(truth.shape)
    inside = (truth >= lo) & (truth <= hi)
    print(f"{r}; block_missing {block}; {time.perf_counter() - t0:.0f} s")
    for k, name in enumerate(r.domains):
        s = seen[:, k]
        x, y = score[s, k], truth[s, k]
        slope = np.cov(x, y)[0, 1] / x.var(ddof=1)
        print(f"  {name} ({r.domain_slices[k].stop - r.domain_slices[k].start} items): spread {x.std():.3f}, "
              f"slope {slope:.3f}, coverage {inside[s, k].mean():.3f}, width {(hi - lo)[s, k].mean():.3f}")
    pred = inside[~seen].mean() if (~seen).any() else np.nan
    print(f"coverage over all cells {inside.mean():.3f} (predicted cells {pred:.3f})")


if __name__ == "__main__":
    main()
