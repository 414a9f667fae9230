"""The results stage of the flow: `Estimate`, the result contract it is checked against, fit folders.

``estimate`` (``Estimate``, the posterior-shaped result of every method, and its tables),
``schema`` (every variable of an ``Estimate`` with its dims, declared once), ``fitdir``
(a fit folder written atomically and read back; data fingerprints checked).
"""
