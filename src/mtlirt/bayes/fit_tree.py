"""The DataTree that :func:`mtlirt.bayes.fit_bayes` returns, made from a fit's posterior draws: derived
quantities, the ``mtlirt_*`` attributes, the pointwise log-likelihood, the convergence checks and the fit's
record (the settings as it ran them included)."""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from dataclasses import asdict

import numpy as np
import xarray as xr

from mtlirt.bayes.derived import add_derived
from mtlirt.bayes.diagnostics import add_log_likelihood, checked_variables, diagnostics
from mtlirt.bayes.spec import ModelSpec
from mtlirt.config import CONFIG_ATTR, CONFIG_KEY, SamplerConfig
from mtlirt.progress import stage

# log_likelihood=None stores the pointwise log-likelihood up to this many
# values (chains x draws x LLMs x domains; 8 bytes each, so 0.8 GB)
LOGLIK_AUTO_MAX = 1e8


class NotConvergedWarning(UserWarning):
    """A NUTS fit failed the convergence checks."""


def _used_config(config: SamplerConfig | None, *, algorithm, sampler, items, draws, tune, chains, target_accept,
                 log_likelihood, extra_info) -> SamplerConfig:
    """The settings a fit ran with, every default filled in: the sampler a pilot chose, the run length and
    thinning the convergence checks chose, the LLM side taken (``"sampled"`` also where the integrated
    route's quadrature check sent the fit there); ``None`` for what the algorithm does not have."""
    nuts = algorithm == "nuts"
    integrated = (extra_info or {}).get("llm_side") == "integrated"
    ta = float(target_accept) if nuts and target_accept is not None else None
    return dataclasses.replace(
        config or SamplerConfig(), algorithm=algorithm, sampler=sampler if nuts else None, items=items,
        llm_side="integrated" if integrated else "sampled", draws=1 if algorithm == "map" else int(draws),
        tune=int(tune) if nuts else None,
        chains=int(chains), thin=(extra_info or {}).get("thin", 1),
        target_accept=None if ta is None or np.isnan(ta) else ta, log_likelihood=bool(log_likelihood)).validate()


def _finish(post, sample_stats, arr, spec: ModelSpec, anchors, *, t0, t_sample, stages, algorithm, sampler, items,
            seed, draws, tune, target_accept, free, fixed, tables, log_likelihood, keep_raw, warn,
            check_vars=None, extra_info=None, diagnostics_override=None, config=None):
    """Derived quantities, attributes, pointwise log-likelihood, diagnostics
    and the info record: the DataTree that :func:`fit_bayes` returns. ``config``: the resolved settings,
    recorded as the fit ran them (:func:`_used_config`)."""
    t2 = time.perf_counter()
    stage("derived quantities (overall scores, correlations, expected accuracy) and diagnostics")
    post = add_derived(post, arr, spec, anchors, fixed_items=fixed, tables=tables)
    stages["derived"] = time.perf_counter() - t2
    post.attrs.update(_fit_attrs(post, spec, anchors, free=free, algorithm=algorithm, sampler=sampler, items=items,
                                 seed=seed, draws=draws, tune=tune, target_accept=target_accept, stages=stages,
                                 t_sample=t_sample, thin=(extra_info or {}).get("thin", 1)))
    groups = {"posterior": post}
    if sample_stats is not None:
        groups["sample_stats"] = sample_stats
    tree = xr.DataTree.from_dict(groups)
    log_likelihood = _add_pointwise(tree, arr, tables, log_likelihood=log_likelihood, warn=warn, stages=stages)
    if algorithm == "nuts":
        _check_convergence(tree, check_vars, diagnostics_override, warn=warn, stages=stages)
    if not keep_raw:
        _drop_raw(tree)
    used = _used_config(config, algorithm=algorithm, sampler=sampler, items=items, draws=draws, tune=tune,
                        chains=int(post.sizes["chain"]), target_accept=target_accept,
                        log_likelihood=bool(log_likelihood), extra_info=extra_info)
    tree["posterior"].attrs[CONFIG_ATTR] = json.dumps(used.to_dict())
    total = float(time.perf_counter() - t0)
    tree["posterior"].attrs["mtlirt_total_seconds"] = total
    tree["posterior"].attrs["mtlirt_stage_seconds"] = json.dumps(stages)
    pattrs = tree["posterior"].attrs
    info = {
        "method": "bayes",
        "spec": spec.name,
        "spec_settings": asdict(spec),
        "algorithm": algorithm,
        "sampler": sampler if algorithm == "nuts" else None,
        "items": items,
        "seed": int(seed),
        "chains": int(pattrs["mtlirt_chains"]),
        "draws": int(draws),
        "tune": int(tune) if algorithm == "nuts" else 0,
        "target_accept": float(target_accept) if algorithm == "nuts" else None,
        "anchors": [arr.domains[k] for k in anchors],
        "seconds": total,
        "sampling_seconds": float(t_sample),
        "stage_seconds": stages,
        "log_likelihood": bool(log_likelihood),
        CONFIG_KEY: used.to_dict(),
        **(extra_info or {}),
    }
    if "mtlirt_diagnostics" in pattrs:
        info["diagnostics"] = json.loads(pattrs["mtlirt_diagnostics"])
    tree.attrs["mtlirt_info"] = json.dumps(info, default=str)
    return tree


def _fit_attrs(post, spec: ModelSpec, anchors, *, free, algorithm, sampler, items, seed, draws, tune, target_accept,
               stages, t_sample, thin) -> dict:
    """The posterior's ``mtlirt_*`` attributes: the spec, the algorithm and its settings, the anchors, the
    sampled variables, the seed, the build and sampling seconds."""
    return {
        "mtlirt_spec": spec.name,
        "mtlirt_spec_json": json.dumps(asdict(spec), default=str),
        "mtlirt_algorithm": algorithm,
        "mtlirt_sampler": sampler if algorithm == "nuts" else "",
        "mtlirt_items": items,
        "mtlirt_anchors": json.dumps(anchors),
        "mtlirt_sampled_vars": json.dumps(free),
        "mtlirt_seed": int(seed),
        "mtlirt_draws": int(draws),
        "mtlirt_thin": thin,
        "mtlirt_tune": int(tune) if algorithm == "nuts" else 0,
        "mtlirt_target_accept": float(target_accept) if algorithm == "nuts" else float("nan"),
        "mtlirt_chains": int(post.sizes["chain"]),
        "mtlirt_build_seconds": float(stages.get("build", 0.0)),
        "mtlirt_sampling_seconds": float(t_sample),
    }


def _add_pointwise(tree, arr, tables, *, log_likelihood, warn, stages) -> bool:
    """The ``log_likelihood`` group (per LLM x domain), added where asked; ``None`` adds it where it holds at
    most ``LOGLIK_AUTO_MAX`` values and warns where it is left out. Returns whether it was added."""
    post = tree["posterior"]
    n_ll = int(post.sizes["chain"]) * int(post.sizes["draw"]) * arr.n_llms * arr.n_domains
    if log_likelihood is None:
        log_likelihood = n_ll <= LOGLIK_AUTO_MAX
        if not log_likelihood and warn:
            warnings.warn(
                f"the pointwise log-likelihood ({n_ll:,} values, {8 * n_ll / 1e9:.1f} GB) is not "
                "stored, so loo/compare are not available for this fit; pass "
                "log_likelihood=True (CLI: --log-likelihood) to store it anyway",
                stacklevel=4,
            )
    if log_likelihood:
        t2 = time.perf_counter()
        add_log_likelihood(tree, arr, tables=tables)
        stages["log_likelihood"] = time.perf_counter() - t2
    return log_likelihood


def _check_convergence(tree, check_vars, diagnostics_override, *, warn, stages) -> None:
    """A NUTS fit's convergence checks (R-hat, ESS, divergences, BFMI; the IMH proposals' Pareto k-hat),
    recorded in ``mtlirt_diagnostics`` and warned of (:class:`NotConvergedWarning`) where they fail."""
    t2 = time.perf_counter()
    diag = diagnostics_override
    if diag is not None and "checked" in diag:
        diag = checkpoint_verdict(tree, diag, check_vars)
    if diag is None:
        diag = diagnostics(tree, var_names=check_vars, recompute=True)
    stages["diagnostics"] = time.perf_counter() - t2
    tree["posterior"].attrs["mtlirt_diagnostics"] = json.dumps(diag, default=float)
    if warn and not diag["converged"]:
        warnings.warn(
            "NUTS FIT DID NOT CONVERGE: "
            f"max R-hat {diag['max_rhat']:.3f} (<= 1.01, worst: {diag['worst_rhat']}), "
            f"min bulk ESS {diag['min_ess_bulk']:.0f} and tail ESS {diag['min_ess_tail']:.0f} "
            f"(>= {diag['ess_threshold']}), divergences {diag['divergences']} (0), "
            f"min BFMI {diag['min_bfmi']:.2f} (>= 0.3)"
            + (f", Pareto k-hat of the IMH proposals {diag['pareto_khat']:.2f} (<= 0.7: else the Laplace "
               "proposal misses the posterior's tails; sample with sampler='nutpie')"
               if "pareto_khat" in diag else "")
            + ". Run longer (draws/tune), more chains, or a higher target_accept before using these "
            "intervals.",
            NotConvergedWarning,
            stacklevel=4,
        )


def checkpoint_verdict(tree, checkpoint: dict, check_vars=None) -> dict | None:
    """The last convergence checkpoint of a NUTS run whose length the checks chose
    (:mod:`mtlirt.bayes.nuts_length`) as the fit's verdict, where it checked the variables the verdict
    checks on the draws the fit kept (the same figures, not computed twice); else None."""
    post = tree["posterior"]
    same_vars = set(checkpoint["checked"]) == set(checked_variables(tree, check_vars))
    same_draws = (checkpoint.get("draws") == post.sizes.get("draw")
                  and checkpoint.get("n_chains") == post.sizes.get("chain"))
    if not (same_vars and same_draws):
        return None
    out = {k: v for k, v in checkpoint.items() if k not in ("draws", "passed", "checked")}
    out["converged"] = bool(checkpoint["passed"])
    return out


def _drop_raw(tree) -> None:
    """``keep_raw=False``: the large free variables (``z``, ``eta_raw``, ``theta_raw``) dropped."""
    p = tree["posterior"].to_dataset()
    drop = [v for v in ("z", "eta_raw", "theta_raw") if v in p]
    if drop:
        tree["posterior"] = xr.DataTree(p.drop_vars(drop))
