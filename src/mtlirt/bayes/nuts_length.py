"""NUTS runs whose length the convergence checks choose (nutpie).

nutpie cannot continue a finished run, but it samples in the background and
shows its trace so far. So a run asked for with ``draws=None`` is started for
``NUTS_DRAWS_MAX`` draws per chain (fewer where that trace would not fit in
memory), every chain at once, and looked at (paused meanwhile) when
every chain has ``NUTS_DRAWS`` draws: where R-hat, ESS and E-BFMI of their first
``D`` draws pass (:func:`mtlirt.bayes.diagnostics.diagnostics`), it stops and keeps
exactly those ``D``; else ``D`` grows to the length the worst figure calls for
(:func:`mtlirt.bayes.diagnostics.draws_called_for`) and it looks again. The
chains' first ``D`` draws do not depend on how far they ran, so the same seed
gives the same draws however fast the machine is.

A divergent transition is a flaw of the step size that a longer run only
repeats: where one appears within the draws that would be kept, the run is
started afresh with the target acceptance halfway to 1 (0.9 to 0.95: the
remedy of Stan's and PyMC's warnings), at most ``NUTS_RETRIES`` times, unless
the target acceptance was given; a run that diverges after that stops at the
block of ``NUTS_MIN_MORE`` draws holding its first divergence, not converged.
The record (``info["run_length"]``) lists each attempt, its checkpoints and
their figures.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import xarray as xr

from mtlirt.bayes._factor import standardize_eta
from mtlirt.bayes.derived import CONTAINED
from mtlirt.bayes.diagnostics import diagnostics, draws_called_for
from mtlirt.config import NUTS_DRAWS, NUTS_DRAWS_MAX
from mtlirt.progress import stage

__all__ = ["sample_until_converged", "NUTS_DRAWS_MAX", "NUTS_RETRIES", "NUTS_MIN_MORE"]

#: Fresh starts at a higher target acceptance after divergences.
NUTS_RETRIES = 1
#: The least draws per chain a failed checkpoint adds.
NUTS_MIN_MORE = 250
_POLL_MS = 100


class _Watch:
    """nutpie's progress callback: each chain's finished draws (tuning included) and divergent draws."""

    def __init__(self, chains: int):
        self.lock = threading.Lock()
        self.finished = np.zeros(chains, dtype=np.int64)
        self.divergent: list[list[int]] = [[] for _ in range(chains)]
        self.event = threading.Event()
        self.moved = time.monotonic()  # when a chain last finished a draw

    def __call__(self, progress) -> None:
        with self.lock:
            for c, p in enumerate(progress):
                if int(p.finished_draws) != self.finished[c]:
                    self.moved = time.monotonic()
                self.finished[c] = int(p.finished_draws)
                self.divergent[c] = [int(i) for i in p.divergent_draws]
        self.event.set()

    def state(self, tune: int) -> tuple[int, int | None]:
        """The draws every chain has finished after its tuning, and the first divergent draw after tuning."""
        with self.lock:
            first = [i - tune for d in self.divergent for i in d if i >= tune]
            return int(self.finished.min()) - tune, (min(first) if first else None)


def _wait(watch: _Watch, sampler, done: int, D: int) -> None:
    """Until nutpie's next report. Where no chain has moved for ten report intervals, whether the run
    has ended before every chain reached ``D`` draws: nutpie's ``is_finished`` times out while it runs,
    raises what stopped the chains once, and is true after; an error is raised either way."""
    watch.event.wait(_POLL_MS / 1000.0)
    watch.event.clear()
    if time.monotonic() - watch.moved < 10 * _POLL_MS / 1000.0:
        return
    try:
        ended = bool(sampler.is_finished)
    except TimeoutError:
        ended = False
    if ended:
        raise RuntimeError(f"nutpie stopped after {done} of {D} draws per chain")


def _checked(trace, names: list[str], D: int, derive=None) -> dict:
    """The convergence figures of the first ``D`` draws of every chain of nutpie's trace
    (:func:`mtlirt.bayes.diagnostics.diagnostics` of ``names``), ``passed`` where they pass, and the
    variables ``checked`` (the fit's verdict reuses the last checkpoint's figures where it checks the
    same variables: :func:`mtlirt.bayes.fit_tree.checkpoint_verdict`). The
    reported quantities the fit's verdict checks are checked too, so a run does not stop where that
    verdict would then fail: those ``derive`` computes from the draws (name -> variable), else,
    where the trace holds the overall traits ``eta_raw``, their standardised version ``eta``."""
    full = trace["posterior"].to_dataset()
    post = full[names].isel(draw=slice(0, D))
    if derive is not None:
        extra = derive(full.isel(draw=slice(0, D)))
        names = [v for v in names if CONTAINED.get(v) not in extra]  # checked as part of the derived one
        post = post[names].assign(extra)
        names = [*names, *extra]
    elif "eta_raw" in full and "eta_raw" not in names:
        raw = full["eta_raw"].isel(draw=slice(0, D))
        post["eta"] = raw.copy(data=standardize_eta(np.asarray(raw.values, dtype=np.float64), np, axis=-2))
        names = [*names, "eta"]
    ss = trace["sample_stats"].to_dataset()
    ss = ss[[v for v in ("diverging", "energy") if v in ss]].isel(draw=slice(0, D))
    out = diagnostics(xr.DataTree.from_dict({"posterior": post, "sample_stats": ss}), var_names=names,
                      recompute=True)
    passed = out.pop("converged")
    return {"draws": int(D), **out, "passed": passed, "checked": list(names)}


def _attempt(compiled, *, tune: int, chains: int, seed: int, progress: bool, kw: dict, names: list[str],
             retry: bool, most: int, derive=None) -> tuple:
    """One run, stopped at the first checkpoint that passes (or at a divergence where ``retry``):
    ``(trace of the kept draws or None, record)``."""
    import nutpie

    watch = _Watch(chains)
    sampler = nutpie.sample(compiled, draws=most, tune=max(int(tune), 1), chains=chains, cores=chains,
                            seed=int(seed), save_warmup=False, progress_bar=bool(progress), blocking=False,
                            progress_callback=watch, progress_rate=_POLL_MS, **kw)
    D, record = NUTS_DRAWS, {"target_accept": kw.get("target_accept"), "checkpoints": []}
    try:
        while True:
            done, diverged = watch.state(tune)
            if diverged is not None and diverged < D:
                if done <= diverged:  # until every chain is past it, an earlier one may follow
                    _wait(watch, sampler, done, diverged + 1)
                    continue
                if retry:
                    record["divergence_at_draw"] = int(diverged)
                    sampler.cancel()
                    return None, record
                # kept draws end at the block of the first divergence: the checks below fail and stop
                D = min(D, max(NUTS_DRAWS, -(-(diverged + 1) // NUTS_MIN_MORE) * NUTS_MIN_MORE))
            if done < D:
                _wait(watch, sampler, done, D)
                continue
            sampler.pause()  # the checks get both cores, and no draws are made that a passing check discards
            trace = sampler.inspect()
            checked = _checked(trace, names, D, derive)
            record["checkpoints"].append(checked)
            stage(f"convergence checks at {D:,} draws per chain: R-hat {checked['max_rhat']:.4f}, ESS bulk "
                  f"{checked['min_ess_bulk']:.0f}, tail {checked['min_ess_tail']:.0f}, "
                  f"{checked['divergences']} divergences" + ("" if checked["passed"] else ": not yet"))
            if checked["passed"] or D >= most or checked["divergences"]:
                # a divergence stays in the kept draws however long the run: afresh, or stop here
                sampler.cancel()
                if checked["divergences"] and retry:
                    record["divergence_at_draw"] = int(diverged if diverged is not None else D)
                    return None, record
                record["draws"] = int(D)
                return trace, record
            D += draws_called_for(D, chains, checked, NUTS_MIN_MORE, most - D)
            del trace
            sampler.resume()
    except BaseException:
        sampler.cancel()
        raise


def sample_until_converged(compiled, *, tune: int, chains: int, seed: int, progress: bool, kw: dict,
                           names: list[str], raise_target: bool, most: int = NUTS_DRAWS_MAX,
                           derive=None) -> tuple:
    """nutpie's NUTS on ``compiled`` until the checks on ``names`` (and the quantities ``derive`` computes
    from the draws, :func:`_checked`) pass, within ``most`` draws per chain (see the module docstring):
    ``(trace cut to the kept draws, target acceptance of the kept run, record)``; ``kw`` holds
    ``target_accept``, raised after divergences where ``raise_target``."""
    kw = dict(kw)
    attempts = []
    t0 = time.perf_counter()
    for k in range(NUTS_RETRIES + 1):
        retry = raise_target and k < NUTS_RETRIES
        trace, rec = _attempt(compiled, tune=tune, chains=chains, seed=seed, progress=progress, kw=kw,
                              names=names, retry=retry, most=most, derive=derive)
        attempts.append(rec)
        if trace is not None:
            break
        ta = round(1.0 - (1.0 - float(kw["target_accept"])) / 2.0, 6)
        stage(f"a divergent transition at draw {rec['divergence_at_draw']:,}: sampling afresh with target "
              f"acceptance {ta}")
        kw["target_accept"] = ta
    D = attempts[-1]["draws"]
    trace = trace.isel(draw=slice(0, D))
    record = {"rule": "draws until R-hat, ESS and E-BFMI pass, afresh at a higher target acceptance after a "
                      "divergence", "draws": int(D), "most": int(most), "attempts": attempts,
              "converged": bool(attempts[-1]["checkpoints"] and attempts[-1]["checkpoints"][-1]["passed"]),
              "seconds": round(time.perf_counter() - t0, 2)}
    return trace, kw["target_accept"], record
