"""Fit folders: writing and reading them."""
