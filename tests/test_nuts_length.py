"""NUTS runs whose length the convergence checks choose (nutpie in the background, stopped at a checkpoint)."""

import numpy as np
import pytest

from mtlirt.bayes import nuts_length as nl
from mtlirt.bayes.diagnostics import draws_called_for


@pytest.fixture(scope="module")
def normal():
    import nutpie
    import pymc as pm

    with pm.Model() as m:
        pm.Normal("x", 0.0, 1.0, shape=3)
    return nutpie.compile_pymc_model(m, backend="numba")


@pytest.fixture(scope="module")
def funnel():
    import nutpie
    import pymc as pm

    with pm.Model() as m:  # Neal's funnel, centred: divergences at 0.9 where the scale is small
        s = pm.Normal("s", 0.0, 1.5)
        pm.Normal("x", 0.0, pm.math.exp(s), shape=9)
    return nutpie.compile_pymc_model(m, backend="numba")


def test_run_stops_at_the_first_checkpoint_that_passes(normal, monkeypatch):
    """From a first checkpoint too short for the ESS bound, the run grows by what the worst figure calls
    for until the checks pass, and keeps exactly the draws checked: the prefix of a run of that length
    with the same seed, whatever the chains ran beyond."""
    import nutpie

    monkeypatch.setattr(nl, "NUTS_DRAWS", 40)
    kw = {"target_accept": 0.8}
    trace, ta, rec = nl.sample_until_converged(normal, tune=200, chains=4, seed=3, progress=False, kw=kw,
                                               names=["x"], raise_target=True)
    (att,) = rec["attempts"]
    cps = att["checkpoints"]
    assert ta == 0.8 and len(cps) >= 2 and cps[0]["draws"] == 40
    assert cps[-1]["passed"] and not any(c["passed"] for c in cps[:-1])
    for prev, nxt in zip(cps[:-1], cps[1:]):
        assert nxt["draws"] - prev["draws"] == draws_called_for(prev["draws"], 4, prev, nl.NUTS_MIN_MORE,
                                                                nl.NUTS_DRAWS_MAX - prev["draws"])
    D = rec["draws"]
    assert D == cps[-1]["draws"] and trace["posterior"]["x"].shape == (4, D, 3) and rec["converged"]
    assert min(cps[-1]["min_ess_bulk"], cps[-1]["min_ess_tail"]) >= 400 and cps[-1]["max_rhat"] <= 1.01
    fixed = nutpie.sample(normal, draws=D, tune=200, chains=4, cores=4, seed=3, save_warmup=False,
                          progress_bar=False, target_accept=0.8)
    assert np.array_equal(trace["posterior"]["x"].values, fixed["posterior"]["x"].values)


def test_a_divergence_starts_the_run_afresh_at_a_higher_target(funnel):
    """A divergence within the draws to keep restarts the run at the target acceptance halfway to 1 (once);
    a run that still diverges stops at the block holding its first divergence, not converged; a target
    acceptance that was given is kept."""
    trace, ta, rec = nl.sample_until_converged(funnel, tune=300, chains=4, seed=1, progress=False,
                                               kw={"target_accept": 0.9}, names=["s", "x"], raise_target=True)
    first, last = rec["attempts"][0], rec["attempts"][-1]
    assert first["target_accept"] == 0.9 and 0 <= first["divergence_at_draw"] < nl.NUTS_DRAWS_MAX
    assert len(rec["attempts"]) == 2 and last["target_accept"] == ta == 0.95
    div = trace["sample_stats"]["diverging"].values
    assert div.any() and not rec["converged"] and not last["checkpoints"][-1]["passed"]
    t = int(np.flatnonzero(div.any(0))[0])
    assert rec["draws"] == max(nl.NUTS_DRAWS, -(-(t + 1) // nl.NUTS_MIN_MORE) * nl.NUTS_MIN_MORE)
    _, ta2, rec2 = nl.sample_until_converged(funnel, tune=300, chains=4, seed=1, progress=False,
                                             kw={"target_accept": 0.9}, names=["s", "x"], raise_target=False)
    assert ta2 == 0.9 and len(rec2["attempts"]) == 1 and not rec2["converged"]


def test_the_joint_route_runs_until_the_checks_pass(monkeypatch):
    """``fit_bayes`` without ``draws``: the joint route's nutpie run is the checks' (its record in the fit's
    info, its reason in the route), kept at the checkpoint that passed, and the same seed gives the same
    draws; with ``draws`` given, that many and no record of checkpoints."""
    import json

    from mtlirt.bayes import fit_bayes
    from mtlirt.data.responses import Responses

    monkeypatch.setattr(nl, "NUTS_DRAWS", 60)  # a first checkpoint too short for the ESS bound
    rng = np.random.default_rng(0)
    n, sizes = 60, (6, 6, 6)
    theta = rng.normal(size=(n, 1)) + 0.6 * rng.normal(size=(n, 3))
    dom = np.repeat(np.arange(3), sizes)
    y = (rng.random((n, sum(sizes))) < 1 / (1 + np.exp(-(theta[:, dom] + rng.normal(size=sum(sizes)))))).astype(np.int8)
    slices = [slice(0, 6), slice(6, 12), slice(12, 18)]
    arr = Responses.from_arrays(y, None, slices, llms=[f"m{i}" for i in range(n)],
                                items=[f"q{j}" for j in range(18)], domains=["a", "b", "c"])
    kw = dict(chains=4, seed=5, progress=False, tune=300, warn=False)
    tree = fit_bayes(arr, "factor-2pl", **kw)
    info = json.loads(tree.attrs["mtlirt_info"])
    rl = info["run_length"]
    cps = rl["attempts"][-1]["checkpoints"]
    assert "convergence checks" in info["route"]["reasons"]["draws"] and cps[0]["draws"] == 60
    assert info["draws"] == rl["draws"] == cps[-1]["draws"] == tree["posterior"].sizes["draw"]
    assert len(rl["attempts"]) == 1 and len(cps) >= 2 and not cps[0]["passed"] and cps[-1]["passed"]
    # the checkpoints checked the reported domain scores too (n x 3 of them), so the verdict agrees
    assert cps[-1]["n_parameters"] > n * 3 and info["diagnostics"]["converged"]
    again = fit_bayes(arr, "factor-2pl", **kw)
    assert np.array_equal(tree["posterior"]["overall"].values, again["posterior"]["overall"].values)
    fixed = fit_bayes(arr, "factor-2pl", draws=rl["draws"], **kw)
    finfo = json.loads(fixed.attrs["mtlirt_info"])
    assert "run_length" not in finfo and "as asked" in finfo["route"]["reasons"]["draws"]
    assert np.array_equal(tree["posterior"]["overall"].values, fixed["posterior"]["overall"].values)
    # the verdict is the last checkpoint's figures, not computed twice: those of the same draws computed afresh
    mine, fresh = info["diagnostics"], finfo["diagnostics"]
    assert mine.keys() == fresh.keys() and mine["converged"] is True and cps[-1]["checked"]
    for k, v in fresh.items():
        assert mine[k] == (pytest.approx(v, rel=1e-9) if isinstance(v, float) else v), k
    # fewer cores than chains: the later chains would wait for the first to finish, so 1,000 draws, and why
    one = json.loads(fit_bayes(arr, "factor-2pl", **{**kw, "chains": 2, "cores": 1}).attrs["mtlirt_info"])
    rule = one["run_length"]["rule"]
    assert one["draws"] == 1000 and rule.startswith("1,000 draws per chain: 1 cores for 2 chains")
    assert one["route"]["reasons"]["draws"] == rule and "attempts" not in one["run_length"]


def test_a_run_whose_chains_fail_raises_their_error():
    """Chains that cannot start (no initial point of finite density) end nutpie's background run: the
    error is raised, as a blocking run raises it, rather than waited on for ever."""
    import threading

    import nutpie
    import pymc as pm

    with pm.Model() as m:
        x = pm.Normal("x", 0.0, 1.0, shape=2)
        pm.Potential("nowhere", pm.math.switch(x[0] > 5.0, 0.0, -np.inf))
    compiled = nutpie.compile_pymc_model(m, backend="numba")
    got = {}

    def run():
        try:
            nl.sample_until_converged(compiled, tune=100, chains=2, seed=0, progress=False,
                                      kw={"target_accept": 0.9}, names=["x"], raise_target=True)
        except Exception as e:  # noqa: BLE001 - the test asserts on what was raised
            got["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(120)
    assert not t.is_alive(), "the run was waited on for ever"
    assert isinstance(got.get("error"), RuntimeError) and "initialization" in str(got["error"])


def test_checkpoints_check_the_standardised_overall_traits():
    """The overall traits' location and scale over the LLMs are not identified (``eta_raw`` is not among the
    checked names), but the fit's verdict checks them standardised: so does a checkpoint. Chains that agree
    on a well-mixed parameter but order the LLMs differently fail it, and pass where they agree."""
    import xarray as xr

    rng = np.random.default_rng(0)
    C, D, N = 4, 400, 6
    x = rng.standard_normal((C, D))
    level = np.where(np.arange(C)[:, None, None] % 2 == 0, np.arange(N), np.arange(N)[::-1])  # chains disagree
    raw = 3.0 * rng.standard_normal((C, D, 1, 1)) + level[..., None] + 0.3 * rng.standard_normal((C, D, N, 1))

    def trace(eta_raw):
        post = xr.Dataset({"x": (("chain", "draw"), x), "eta_raw": (("chain", "draw", "llm", "factor"), eta_raw)})
        ss = xr.Dataset({"diverging": (("chain", "draw"), np.zeros((C, D), bool))})
        return xr.DataTree.from_dict({"posterior": post, "sample_stats": ss})

    bad = nl._checked(trace(raw), ["x"], D)
    assert not bad["passed"] and bad["worst_rhat"] == "eta" and bad["max_rhat"] > 1.5
    agree = 3.0 * rng.standard_normal((C, D, 1, 1)) + np.arange(N)[None, None, :, None] \
        + 0.3 * rng.standard_normal((C, D, N, 1))
    good = nl._checked(trace(agree), ["x"], D)
    assert good["passed"] and good["max_rhat"] < 1.01
    # the reported domain scores, as the fit derives them from the draws (the joint and sampled routes):
    # chains that order the LLMs differently there fail the checkpoint too
    theta = xr.Variable(("chain", "draw", "theta_dim_0"), raw[..., 0])
    derived = nl._checked(trace(agree), ["x"], D, derive=lambda post: {"theta": theta[:, :post.sizes["draw"]]})
    assert not derived["passed"] and derived["worst_rhat"] == "theta"
