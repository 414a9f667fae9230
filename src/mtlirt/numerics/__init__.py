"""Shared numerics of the LLM side: a leaf package (numpy, scipy; numba and PyTensor where asked for).

:mod:`~mtlirt.numerics.hermite`
    Cubic Hermite interpolation of tabulated functions, one definition in
    numpy, PyTensor and numba.
:mod:`~mtlirt.numerics.vecmath`
    exp, log and log1p written so that LLVM vectorises them, for the numba
    kernels (the EM's, the Bayesian likelihoods').
:mod:`~mtlirt.numerics.llm_side`
    The likelihood of an LLM's responses on a grid of trait values (2PL,
    3PL, floors, missing cells), its tables and their interpolation, and its
    integrals against a normal prior.
:mod:`~mtlirt.numerics.factor_grid`
    The rank-one factor model's grid posterior of many LLMs at once (MTL's
    reported scores, the scorer), a numba kernel.
:mod:`~mtlirt.numerics.factor_model`
    The rank-one factor model's structure tabulated on fixed grids and its
    grid posterior of any number of LLMs (MTL's reported scores, the scorer).
:mod:`~mtlirt.numerics.mcmc_stats`
    The rank-normalised R-hat and bulk/tail ESS, vectorised over many
    parameters (the Bayesian diagnostics, the convergence plot).
"""
