"""The evaluation stage of the flow: what is done with a fitted `Estimate`.

``checks`` (the model checks: predictive check of the correlations, item fit,
leave-one-LLM-out), ``scoring`` (new LLMs scored against a fit's fixed items and
structure), ``adaptive`` (the adaptive test across domains, and its replay).
"""
