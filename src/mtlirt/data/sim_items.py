"""The simulator's items: domain difficulty shifts, difficulties, discriminations, guessing floors on the
multiple-choice domains and the flawed items."""

from __future__ import annotations

import math

import numpy as np


def _draw_items(sizes, item_rng, guess_rng, flaw_rng, *, guessing, guessing_sd, mc_share, flawed_share,
                difficulty_mean, difficulty_sd, domain_shift_sd, discrimination_median, discrimination_sd):
    """Item parameters: domain shifts, difficulties, discriminations, guessing on the multiple-choice
    domains and the flawed items (each from its own stream)."""
    n_domains, n_items = sizes.size, int(sizes.sum())
    shift = difficulty_mean + domain_shift_sd * item_rng.standard_normal(n_domains)
    item_domain = np.repeat(np.arange(n_domains), sizes)
    difficulty = shift[item_domain] + difficulty_sd * item_rng.standard_normal(n_items)
    discrimination = discrimination_median * np.exp(
        discrimination_sd * item_rng.standard_normal(n_items)
    )
    # guessing on the items of multiple-choice domains (per item with a spread)
    mc = np.ones(n_domains, dtype=bool)
    if mc_share < 1:
        mc[:] = False
        mc[guess_rng.choice(n_domains, size=int(math.floor(mc_share * n_domains + 0.5)), replace=False)] = True
    guess = np.where(mc[item_domain], guessing, 0.0)
    if guessing_sd > 0 and guessing > 0:
        nu = guessing * (1 - guessing) / guessing_sd**2 - 1
        guess = np.where(mc[item_domain], guess_rng.beta(guessing * nu, (1 - guessing) * nu, n_items), 0.0)
    upper = np.ones(n_items)
    if flawed_share > 0:
        flawed = flaw_rng.choice(n_items, size=int(math.floor(flawed_share * n_items + 0.5)), replace=False)
        low_ceiling, reversed_ = flawed[: flawed.size // 2], flawed[flawed.size // 2:]
        upper[low_ceiling] = flaw_rng.uniform(0.5, 0.9, low_ceiling.size)
        discrimination[reversed_] *= -0.5
    intercept = -discrimination * difficulty
    return shift, item_domain, difficulty, discrimination, guess, upper, intercept
