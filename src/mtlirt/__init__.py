"""mtlirt: multi-domain IRT for LLM leaderboards.

The main entry points: :class:`Responses` (the data), :func:`fit` (every
estimator), :class:`Estimate` (every result), :func:`simulate`.
"""

__version__ = "0.1.0"

from .data import Responses
from .estimate import Estimate
from .fitting import fit
from .output import read_fit, write_fit
from .simulate import simulate

__all__ = ["Estimate", "Responses", "fit", "read_fit", "simulate", "write_fit", "__version__"]
