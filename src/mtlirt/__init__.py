"""mtlirt: multi-domain IRT for LLM leaderboards.

The main entry points: :class:`Responses` (the data), :func:`fit` (every
estimator), :class:`Estimate` (every result), :func:`simulate`,
:func:`read_fit` / :func:`write_fit` (fit folders), :func:`compare`,
:func:`score` (new LLMs against a fit), :func:`write_report` and :mod:`plots` (one figure per function),
:mod:`importers` (harness and leaderboard exports), :mod:`bayes` (the PyMC
model). The folders below follow the data flow: ``data/`` (tables, checks,
``Responses``, importers, the simulator), ``estimators/`` (MTL and the
frequentist baselines), ``bayes/``, ``results/`` (``Estimate``, its schema, fit
folders), ``evaluate/`` (model checks, scoring new LLMs, adaptive tests),
``report/`` (plots, HTML, comparison); ``numerics/`` the shared numerics.
"""

__version__ = "0.1.0"

from .data import importers
from .data.responses import Responses
from .data.simulate import simulate
from .data.validate import DataWarning
from .errors import InputError
from .estimators.heldout import heldout_loglik
from .evaluate.scoring import score
from .fitting import fit
from .report.compare import compare
from .results.estimate import Estimate
from .results.finish import ConvergenceWarning
from .results.fitdir import read_fit, write_fit

# matplotlib and PyMC load on first use, so that `import mtlirt` and the CLI start fast
_LAZY = {"plots": "mtlirt.report.plots", "bayes": "mtlirt.bayes"}


def __getattr__(name):
    import importlib

    if name in _LAZY:
        return importlib.import_module(_LAZY[name])
    if name == "write_report":
        from .report.html import write_report

        return write_report
    raise AttributeError(f"module 'mtlirt' has no attribute {name!r}")


__all__ = [
    "ConvergenceWarning",
    "DataWarning",
    "Estimate",
    "InputError",
    "Responses",
    "__version__",
    "bayes",
    "compare",
    "fit",
    "heldout_loglik",
    "importers",
    "plots",
    "read_fit",
    "score",
    "simulate",
    "write_fit",
    "write_report",
]
