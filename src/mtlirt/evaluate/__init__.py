"""The evaluation stage of the flow: what is done with a fitted `Estimate`.

``checks`` (the model checks: ``correlation_check``, the predictive check of the
correlations; ``item_fit``, S-X2; ``loo``, leave-one-LLM-out; what they read of a fit in
``check_inputs``), ``scoring`` (new LLMs scored against a fit's fixed items and
structure), ``adaptive`` (the adaptive test across domains, and its replay).
"""
