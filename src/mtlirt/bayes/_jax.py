"""JAX version of the collapsed marginal likelihood (:mod:`mtlirt.bayes.collapsed`),
so that numpyro (on a CPU, or on an accelerator) samples the structure of the
fixed-items factor model.

The same two trapezoid rules as the numba kernel, written as array operations
(log-sum-exp over each cell's inner nodes, sum over the domains, log-sum-exp
over each LLM's outer nodes) and differentiated by JAX. The LLMs are taken in
blocks (``lax.map``) so the largest temporary is ``G x K x Q x block``. Needs
the optional ``jax`` extra (``pip install 'mtlirt[jax]'``); float64 is switched
on (the totals are of the order of 1e7 at leaderboard sizes)."""

from __future__ import annotations

import numpy as np

__all__ = ["collapsed_loglik_jax", "structure_model_numpyro", "sample_structure_numpyro"]

BLOCK = 256


def _enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


def _blocked(grid, block: int):
    """The grid's arrays with the LLM axis (last) padded to a multiple of
    ``block`` and split: leading axis = block index; and the mask of real LLMs."""
    N = grid.shape[0]
    nb = -(-N // block)
    pad = nb * block - N

    def split(x):
        x = np.asarray(x, dtype=np.float64)
        if pad:
            x = np.concatenate([x, np.repeat(x[..., -1:], pad, axis=-1)], axis=-1)
        x = x.reshape(x.shape[:-1] + (nb, block))
        return np.moveaxis(x, -2, 0)

    mask = np.zeros(nb * block)
    mask[:N] = 1.0
    arrays = [split(a) for a in (grid.start, grid.step, grid.weights_read(), grid.logscale, grid.mu, grid.chol,
                                 grid.logomega)]
    return arrays, np.asarray(grid.offsets, dtype=np.float64), mask.reshape(nb, block)


def collapsed_loglik_jax(blocked, lam, psi):
    """Total collapsed marginal log-likelihood (a JAX scalar) at loadings
    ``lam`` (K, r) and residual sds ``psi`` (K,); ``blocked`` from
    :func:`prepare`."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp

    arrays, offsets, mask = blocked
    a = 0.5 / psi**2
    lpsi = jnp.log(psi)

    def one(args):
        start, step, logw, logscale, mu, chol, logomega, msk = args
        Q = logw.shape[1]
        nodes = start[:, None, :] + step[:, None, :] * jnp.arange(Q)[None, :, None]  # K Q B
        eta = mu[None] + jnp.einsum("jlb,gl->gjb", chol, offsets)  # G r B
        m = jnp.einsum("kj,gjb->gkb", lam, eta)  # G K B
        e = logw[None] - a[None, :, None, None] * (nodes[None] - m[:, :, None, :]) ** 2  # G K Q B
        lf = logscale[None] + logsumexp(e, axis=2) - lpsi[None, :, None]  # G K B
        return (logsumexp(logomega + lf.sum(1), axis=0) * msk).sum()

    return jax.lax.map(one, (*arrays, mask)).sum()


def prepare(grid, block: int = BLOCK):
    """The grid's arrays as JAX arrays in blocks of LLMs."""
    import jax.numpy as jnp

    _enable_x64()
    arrays, offsets, mask = _blocked(grid, min(block, grid.shape[0]))
    return [jnp.asarray(x) for x in arrays], jnp.asarray(offsets), jnp.asarray(mask)


def structure_model_numpyro(blocked, K: int, r: int, layout, loading_scale: float):
    """A numpyro model of the structure (the same priors as the nutpie route)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    rows, cols, drows = (np.asarray(x) for x in layout)

    def model():
        V = jnp.zeros((K, r))
        if len(rows):
            free = numpyro.sample("loading_free", dist.Normal(0.0, loading_scale).expand([len(rows)]))
            V = V.at[rows, cols].set(free)
        diag = numpyro.sample("loading_diag", dist.HalfNormal(loading_scale).expand([r]))
        V = V.at[drows, jnp.arange(r)].set(diag)
        psi = 1.0 / jnp.sqrt(1.0 + (V**2).sum(1))
        numpyro.factor("loglik", collapsed_loglik_jax(blocked, V * psi[:, None], psi))

    return model


def sample_structure_numpyro(grid, layout, loading_scale: float, V0: np.ndarray, *, draws: int, tune: int,
                             chains: int, seed: int, target_accept: float = 0.8, progress: bool = False):
    """NUTS (numpyro) on the structure, the chains on as many devices, as one batch on a single accelerator,
    else one after another; returns ``(posterior dict name -> (C, D, ...) arrays, sample stats dict)``."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS, init_to_value

    N, K = grid.shape
    r = grid.rank
    blocked = prepare(grid)
    model = structure_model_numpyro(blocked, K, r, layout, loading_scale)
    rows, cols, drows = layout
    values = {"loading_diag": jnp.asarray(np.maximum(V0[drows, np.arange(r)], 1e-3))}
    if len(rows):
        values["loading_free"] = jnp.asarray(V0[rows, cols])
    kernel = NUTS(model, target_accept_prob=target_accept, init_strategy=init_to_value(values=values))
    # a device per chain: in parallel; one accelerator: the chains as one batch on it (vmap), where one after
    # another would leave it idle for the others' sake; on CPUs: one after another
    if jax.local_device_count() >= chains:
        method = "parallel"
    else:
        method = "sequential" if jax.default_backend() == "cpu" else "vectorized"
    mcmc = MCMC(kernel, num_warmup=max(int(tune), 1), num_samples=int(draws), num_chains=int(chains),
                chain_method=method, progress_bar=bool(progress))
    mcmc.run(jax.random.PRNGKey(int(seed)), extra_fields=("diverging", "num_steps", "energy"))
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    post = {k: np.asarray(v, dtype=np.float64) for k, v in samples.items()}
    stats = {"diverging": np.asarray(extra["diverging"]), "n_steps": np.asarray(extra["num_steps"]),
             "energy": np.asarray(extra["energy"], dtype=np.float64)}
    return post, stats
