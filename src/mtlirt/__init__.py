"""mtlirt: multi-domain IRT for LLM leaderboards."""

__version__ = "0.1.0"
