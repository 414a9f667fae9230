"""The simulator's response draw: 0/1 responses from the item model, one domain block at a time, and the
observation mask (responses missing at random, LLMs that ran only some domains)."""

from __future__ import annotations

import numpy as np


def _draw_responses(theta, discrimination, intercept, guess, upper, starts, response_rng) -> np.ndarray:
    """0/1 responses ``P = c + (u - c) sigmoid(a theta + d)``, one domain block at a time (float32)."""
    n_llms, n_items, n_domains = theta.shape[0], discrimination.size, theta.shape[1]
    correct = np.empty((n_llms, n_items), dtype=np.int8)
    theta32 = theta.astype(np.float32)
    a32 = discrimination.astype(np.float32)
    d32 = intercept.astype(np.float32)
    c32 = guess.astype(np.float32)
    span32 = (upper - guess).astype(np.float32)
    lift = bool(np.any(guess != 0) or np.any(upper != 1))
    with np.errstate(over="ignore"):
        for k in range(n_domains):
            sl = slice(starts[k], starts[k + 1])
            # e = exp(-(a theta + d)); P = c + (1 - c) / (1 + e)
            e = np.multiply.outer(theta32[:, k], a32[sl])
            e += d32[sl]
            np.negative(e, out=e)
            np.exp(e, out=e)
            e += 1.0
            np.reciprocal(e, out=e)
            if lift:
                e *= span32[sl]
                e += c32[sl]
            u = response_rng.random(e.shape, dtype=np.float32)
            np.less(u, e, out=correct[:, sl])
            del e, u
    return correct


def _mask_responses(correct, starts, missing, block_missing, missing_rng, block_rng) -> np.ndarray:
    """The observation mask: responses missing at random, and LLMs that ran only some domains
    (unobserved cells of ``correct`` are set to 0 in place)."""
    n_llms, n_items = correct.shape
    n_domains, sizes = starts.size - 1, np.diff(starts)
    observed = np.ones((n_llms, n_items), dtype=bool)
    if missing > 0:
        for k in range(n_domains):
            sl = slice(starts[k], starts[k + 1])
            u = missing_rng.random((n_llms, sizes[k]), dtype=np.float32)
            np.greater_equal(u, np.float32(missing), out=observed[:, sl])
            correct[:, sl] *= observed[:, sl]
            del u
    ran = np.ones((n_llms, n_domains), dtype=bool)
    if block_missing > 0:
        partial = np.flatnonzero(block_rng.random(n_llms) < block_missing)
        drop = block_rng.random((partial.size, n_domains)) < 0.5
        keep_one = block_rng.integers(0, n_domains, partial.size)
        drop[np.arange(partial.size), keep_one] &= ~drop.all(axis=1)
        ran[partial] = ~drop
        for k in range(n_domains):
            off = ~ran[:, k]
            if off.any():
                sl = slice(starts[k], starts[k + 1])
                observed[off, sl] = False
                correct[off, sl] = 0
    return observed
