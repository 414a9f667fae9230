"""The Bayesian hierarchical multi-domain IRT model (docs/model.md, "The Bayesian model"), in PyMC.

Public API
----------
load_spec, list_specs, models_dir, ModelSpec
    Named model specs (TOML files in ``models/``, shipped as ``mtlirt/models/``).
build_model, build, BuiltModel
    The joint PyMC model over items and LLMs; the builders return a
    ``BuiltModel`` (the ``pymc.Model`` with its spec, anchors, initial values).
build_fixed_model, calibrate_items
    Calibrate, then score: items fixed, LLM side sampled with tabulated
    per-(LLM, domain) likelihoods.
fit_bayes
    NUTS / ADVI / MAP fit returning an ArviZ-layout ``xarray.DataTree``.
diagnostics, posterior_predictive_checks, add_log_likelihood,
add_llm_marginal_log_likelihood, loo, compare
    Checks of a fit (``add_llm_marginal_log_likelihood``: one element per LLM,
    its traits integrated out, for ``loo(tree, var_name="llm_marginal")``);
    its held-out log-likelihood is :func:`mtlirt.heldout_loglik`, as of every fit.
default_init
    A quick accuracy-based init.

Every function here takes the leaderboard as :class:`mtlirt.Responses` (or a long
DataFrame or the path of a table, read as one).
"""

from mtlirt.bayes._built import BuiltModel
from mtlirt.bayes.diagnostics import (
    add_llm_marginal_log_likelihood,
    add_log_likelihood,
    compare,
    diagnostics,
    loo,
    posterior_predictive_checks,
)
from mtlirt.bayes.fit_tree import NotConvergedWarning
from mtlirt.bayes.fixed_items import build_fixed_model, build_tables, calibrate_items
from mtlirt.bayes.init import default_init
from mtlirt.bayes.model import build_model
from mtlirt.bayes.sample import build, fit_bayes
from mtlirt.bayes.spec import ModelSpec, list_specs, load_spec, models_dir

__all__ = [
    "BuiltModel",
    "ModelSpec",
    "NotConvergedWarning",
    "add_llm_marginal_log_likelihood",
    "add_log_likelihood",
    "build",
    "build_fixed_model",
    "build_model",
    "build_tables",
    "calibrate_items",
    "compare",
    "default_init",
    "diagnostics",
    "fit_bayes",
    "list_specs",
    "load_spec",
    "loo",
    "models_dir",
    "posterior_predictive_checks",
]
