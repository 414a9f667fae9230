"""How large the largest R-hat is when the chains are perfect (independent draws).

The convergence rule (max R-hat <= 1.01 over every checked parameter) gets
stricter as the number of parameters grows: even independent standard-normal
draws give a largest R-hat above 1.01 when the chains are short and the
parameters many. This prints, for the sizes of mtlirt's fits, the largest
rank-normalised split R-hat (mtlirt's implementation, the same as ArviZ's)
and the smallest bulk ESS of independent draws, so the draws a fit needs
can be read off.

Usage::

    .venv/bin/python benchmarks/rhat_noise.py
"""

from __future__ import annotations

import numpy as np

from mtlirt.numerics.mcmc_stats import summary_stats

# (chains, draws per chain, parameters): the calibration design (about 2,200
# checked scalars), the demo / 1,000-LLM fixed-items size (57,000) and the
# flagship (about 250,000)
SIZES = [(4, 1000, 2_200), (2, 500, 57_000), (4, 1000, 57_000), (2, 500, 250_000),
         (2, 1000, 250_000), (4, 500, 250_000), (4, 1000, 250_000)]


def largest_rhat(chains: int, draws: int, n_params: int, seed: int = 0, chunk: int = 10_000) -> dict:
    rng = np.random.default_rng(seed)
    r_max, ess_min, above = 1.0, np.inf, 0
    for start in range(0, n_params, chunk):
        m = min(chunk, n_params - start)
        x = rng.standard_normal((chains, draws, m))
        r, b, _ = summary_stats(x)
        r_max = max(r_max, float(r.max()))
        ess_min = min(ess_min, float(b.min()))
        above += int((r > 1.01).sum())
    return {"chains": chains, "draws": draws, "parameters": n_params, "max_rhat": round(r_max, 4),
            "share_above_1.01": round(above / n_params, 5), "min_ess_bulk": round(ess_min)}


if __name__ == "__main__":
    print("| chains x draws | parameters | largest R-hat | share above 1.01 | smallest bulk ESS |")
    print("| --- | --- | --- | --- | --- |")
    for c, d, p in SIZES:
        row = largest_rhat(c, d, p)
        print(f"| {c} x {d} | {p:,} | {row['max_rhat']:.4f} | {row['share_above_1.01']:.2%} | "
              f"{row['min_ess_bulk']:,} |", flush=True)
