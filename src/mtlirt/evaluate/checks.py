"""Model checks: does a fitted model reproduce the data it was fitted to?

Three checks, each for the kinds of fit where it makes sense (a point
estimate is a posterior with one draw); ``docs/checks.md`` says what each
one measures, how to read it, and what it cost on which data.

Cross-domain correlations (:func:`correlation_check`)
    A predictive check of the correlation matrix. The statistic is the one
    the package reports in ``domain_correlation.csv`` for its point fits: the
    single-domain (STL) scores' correlations corrected for their measurement
    error (:mod:`mtlirt.estimators.correlation`). It is computed on the data
    and on replicated data sets drawn from the fitted model, each refitted by
    STL with the fit's item model, and every pair gets a posterior predictive
    p-value. The replicates draw *new domain deviations*, so that they follow
    the model's correlation structure rather than the fitted scores (which
    carry the data's own correlations wherever a domain is long):

    * Bayesian factor models: per posterior draw, ``theta = Lambda eta +
      psi z`` with the draw's overall traits ``eta``, loadings ``Lambda`` and
      ``psi = sqrt(1 - |Lambda|^2)``, fresh ``z ~ N(0, 1)``, and the draw's
      items; the correlated (LKJ) model: new traits ``N(0, R)`` with the
      draw's correlation matrix ``R``;
    * MTL (and the paper's variants): the fit's structure (its overall
      scores, with loadings and deviation spreads fitted to the observed
      correlations at its rank), or with ``world="estimate"`` the very world
      its error bootstrap draws from (:func:`mtlirt.estimators.error_world.error_world`):
      the fit's centre, overall traits redrawn around the fitted ones with
      their approximate posterior variances, deviations with each domain's
      spread estimated from the data
      (:func:`~mtlirt.estimators.bootstrap.deviation_spread`);
    * pooled: the same world with no deviations (the pooled model says every
      domain trait is the overall trait);
    * STL and accuracy model no cross-domain structure: no check.

Item fit (:func:`item_fit`)
    Orlando and Thissen's (2000) S-X2 per item (for posteriors also its
    posterior predictive version, :func:`item_fit_ppc`), as ``mirt::itemfit`` computes
    it: the LLMs are grouped by their summed score in the item's domain; the
    observed proportion correct in each group is compared with the model's,
    ``E_js = int P_j(t) f_-j(s-1 | t) phi(t) dt / int f(s | t) phi(t) dt``
    (``f`` the summed-score distribution by the Lord-Wingersky recursion,
    ``f_-j`` without item ``j``, ``phi`` the population ``N(0, 1)`` on the
    items' population scale), groups with an expected count below
    ``min_expected`` merged with their neighbours, ``df`` = groups minus the
    item's free parameters. The answers an LLM left out of a domain it ran
    are imputed from the model (several times, the statistic averaged, as
    ``mirt::itemfit(impute=)`` does). For fits with item parameters: MTL,
    STL, pooled, the paper's variants and Bayes
    (fixed items; for jointly sampled items the posterior means are used).

Leave-one-LLM-out (:func:`loo_llm`)
    PSIS-LOO (``arviz.loo``) of a Bayesian factor-model fit with one
    observation per LLM: the marginal likelihood of all of the LLM's
    responses, its domain traits integrated out (and its overall trait too,
    by default where that is cheap: rank 1 or 2) by adaptive Gauss-Hermite
    quadrature around each LLM's posterior. Conditional on its own traits an
    LLM's log-likelihood moves with parameters only its own data inform, and
    importance sampling fails (Pareto k above 0.7 for most LLMs); integrated
    out, it depends on the shared parameters only.

:func:`run_checks` runs whichever checks apply; :meth:`ModelChecks.summary`
is the short record that goes into ``fit.json``'s diagnostics
(:meth:`ModelChecks.record`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..progress import stage
from .check_inputs import ALPHA, _check_data

# the checks themselves, each in its own module; importable from here, the documented module of the model
# checks (bayes/diagnostics imports llm_marginal_loglik from here)
from .correlation_check import CorrelationCheck, check_replicates, correlation_check, correlation_statistic
from .item_fit import RMSEA_BOUND, item_fit, item_fit_ppc, large_misfits, sx2_expected
from .loo import LooCheck, llm_marginal_loglik, loo_llm

__all__ = [
    "CheckFailedWarning",
    "CorrelationCheck",
    "LooCheck",
    "ModelChecks",
    "RMSEA_BOUND",
    "check_replicates",
    "correlation_check",
    "correlation_statistic",
    "item_fit",
    "item_fit_ppc",
    "large_misfits",
    "llm_marginal_loglik",
    "loo_llm",
    "run_checks",
    "sx2_expected",
]


@dataclass
class ModelChecks:
    """The checks of one fit (None where a check does not apply or failed), why some were skipped and
    the error of each that failed (``failed``: check name -> ``"ErrorType: message"``)."""

    correlation: CorrelationCheck | None = None
    items: pd.DataFrame | None = None
    loo: LooCheck | None = None
    items_ppc: pd.DataFrame | None = None
    skipped: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    alpha: float = ALPHA

    def summary(self) -> dict:
        """Short JSON-ready record of every check (for ``fit.json``'s diagnostics)."""
        out: dict[str, Any] = {}
        if self.correlation is not None:
            out["correlation"] = self.correlation.summary()
        if self.items is not None:
            t = self.items
            out["item_fit"] = {"items": len(t), "tested": int(t["p_value"].notna().sum()),
                               "misfit_items": int(t["misfit"].sum()),
                               "misfit_rmsea_above_bound": large_misfits(t),
                               "rmsea_bound": RMSEA_BOUND,
                               "share_p_below_alpha": float((t["p_value"] < self.alpha).sum()
                                                            / max(int(t["p_value"].notna().sum()), 1)),
                               "alpha": self.alpha, "seconds": self.seconds.get("item_fit")}
        if self.items_ppc is not None:
            out["item_fit_ppc"] = {"items": len(self.items_ppc),
                                   "ppp_below_alpha": int((self.items_ppc["ppp"] < self.alpha).sum()),
                                   "seconds": self.seconds.get("item_fit_ppc")}
        if self.loo is not None:
            out["loo_llm"] = self.loo.summary()
        if self.skipped:
            out["skipped"] = dict(self.skipped)
        if self.failed:
            out["failed"] = dict(self.failed)
        return out

    def record(self, est) -> None:
        """Put :meth:`summary` into ``est.info["diagnostics"]["checks"]`` (written to ``fit.json``)."""
        diag = dict(est.info.get("diagnostics") or {})
        diag["checks"] = self.summary()
        est.update_info(diagnostics=diag)


class CheckFailedWarning(UserWarning):
    """A model check raised; :func:`run_checks` recorded its error and ran the others."""


def run_checks(est, responses, *, correlation: bool = True, items: bool = True, loo: bool = True,
               n_replicates: int = 100, seed: int = 0, alpha: float = ALPHA, max_draws: int = 400,
               errors: str = "warn") -> ModelChecks:
    """Run the checks that apply to a fit (see the module docstring).

    Parameters
    ----------
    est : Estimate
    responses : Responses
        The fit's data.
    correlation, items, loo : bool
        Which checks to run (``items`` with several posterior draws adds the
        posterior predictive S-X2, :func:`item_fit_ppc`, on 50 draws).
    n_replicates : int
        Replicated data sets of the correlation check.
    seed : int
    alpha : float
    max_draws : int
        Posterior draws used by the leave-one-LLM-out check.
    errors : {"warn", "raise"}
        A check that raises: ``"warn"`` records its error in
        ``ModelChecks.failed``, issues a :class:`CheckFailedWarning` and runs the
        other checks (one failing check costs a report or a long fit none of
        the others); ``"raise"`` lets the error through. Bad arguments and data
        that do not match the fit raise either way, before any check runs.

    Returns
    -------
    ModelChecks
    """
    if errors not in ("warn", "raise"):
        raise ValueError(f"errors must be 'warn' or 'raise', got {errors!r}")
    if correlation:
        check_replicates(n_replicates)
    _check_data(est, responses)
    out = ModelChecks(alpha=alpha)

    def attempt(name, what, run):
        stage(f"model checks: {what}")
        t0 = time.perf_counter()
        try:
            result = run()
        except Exception as exc:
            if errors == "raise":
                raise
            out.failed[name] = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"model check {name} failed and was left out ({out.failed[name]})", CheckFailedWarning,
                          stacklevel=3)
            result = None
        out.seconds[name] = time.perf_counter() - t0
        return result

    if correlation:
        out.correlation = attempt("correlation", f"cross-domain correlations ({n_replicates} replicated data sets)",
                                  lambda: correlation_check(est, responses, n_replicates=n_replicates, seed=seed,
                                                            alpha=alpha))
        if out.correlation is None and "correlation" not in out.failed:
            out.skipped["correlation"] = (f"the {est.method} fit models no cross-domain structure"
                                          if responses.n_domains > 1 else "one domain")
    if items:
        out.items = attempt("item_fit", "item fit (S-X2)", lambda: item_fit(est, responses, alpha=alpha))
        if out.items is None and "item_fit" not in out.failed:
            out.skipped["item_fit"] = f"the {est.method} fit has no item model"
    if items and est.n_draws > 1 and est.method != "accuracy":
        out.items_ppc = attempt("item_fit_ppc", "posterior predictive item fit",
                                lambda: item_fit_ppc(est, responses, seed=seed))
    if loo:
        out.loo = attempt("loo_llm", "leave-one-LLM-out", lambda: loo_llm(est, responses, max_draws=max_draws))
        if out.loo is None and "loo_llm" not in out.failed:
            out.skipped["loo_llm"] = ("a point estimate (one draw)" if est.n_draws < 2
                                      else "a model without overall traits and loadings")
    return out
