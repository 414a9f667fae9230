"""Benchmark: held-out log-loss of STL, pooled and MTL on the real leaderboards of the shared real-data folder.

For each data set, a random 20% of the observed responses is held out (seeded),
every method is fitted on the rest, and the mean log-loss of the held-out
responses is printed (lower is better), with MTL's ratio to the better of
STL and pooled, MTL's selected rank and ``C``, and the CPU seconds of MTL's fit.

Usage::

    .venv/bin/python benchmarks/real_data.py [--shared ../shared] [--seeds 0,1,2] [--sets mmlu_pro,chembench,oll_v1]
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

from mtlirt.data.responses import Responses
from mtlirt.data.validate import DataWarning
from mtlirt.estimators.heldout import heldout_loglik
from mtlirt.fitting import fit

SETS = {  # name: (data set, file, read options)
    "MMLU-Pro, 14 categories": ("mmlu_pro", "mmlu_pro/responses.csv.gz", dict(ignore_columns=["subject"])),
    "MMLU-Pro, 56 MMLU subjects": ("mmlu_pro", "mmlu_pro/responses.csv.gz",
                                   dict(domain_column="subject", drop_unassigned=True)),
    "ChemBench, 9 topics": ("chembench", "chembench/responses.csv.gz", {}),
    "Open LLM Leaderboard v1, 4 benchmarks": ("oll_v1", "oll_v1/responses.csv.gz", {}),
}
METHODS = ("stl", "pooled", "accuracy", "mtl")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--sets", default="mmlu_pro,chembench,oll_v1")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    sets = args.sets.split(",")
    print(f"| data | seed | {' | '.join(METHODS)} | MTL / best of STL, pooled | rank | C | MTL CPU s |")
    print("|---|---|" + "---|" * len(METHODS) + "---|---|---|---|")
    for name, (key, path, kw) in SETS.items():
        if key not in sets:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DataWarning)
            data = Responses.read(args.shared / "data" / path, **kw)
        for seed in seeds:
            train, held = data.holdout(args.share, seed=seed)
            loss, info = {}, {}
            for m in METHODS:
                t0 = time.process_time()
                est = fit(train, m, seed=seed)
                info[m] = (est.info, time.process_time() - t0)
                loss[m] = heldout_loglik(est, data, held)["log_loss"]
            best = min(loss["stl"], loss["pooled"])
            mi = info["mtl"][0]
            print(f"| {name} ({data.n_llms} LLMs, {data.n_items} items) | {seed} | "
                  + " | ".join(f"{loss[m]:.4f}" for m in METHODS)
                  + f" | {loss['mtl'] / best:.4f} | {mi.get('rank')} | {mi.get('C')} | {info['mtl'][1]:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
