"""The frequentist estimators.

Single-domain IRT, the MTL estimator, the baselines, the seed paper's
estimator, the bootstrap, error-corrected correlations and held-out likelihood.
"""
