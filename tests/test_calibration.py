"""One item calibration EM: long-domain quadrature, the estimated guessing floor.

The Bayesian fixed-items route's calibration is the frequentist fits' EM
(``estimators.irt.calibrate_items``) with the spec's item model; long
domains get finer quadrature grids; ``guessing="estimate"`` fits one lower
asymptote per domain.
"""

import sys
import warnings
from functools import partial

import numpy as np
import pytest
from scipy.special import expit

import mtlirt.data.simulate  # noqa: F401
from mtlirt.bayes.fixed_items import calibrate_items as fixed_calibrate
from mtlirt.bayes.fixed_items import item_penalties
from mtlirt.bayes.spec import load_spec
from mtlirt.data.responses import Responses
from mtlirt.estimators import calibration, em_steps, irt
from mtlirt.fitting import _mtl_init, fit

simulate = sys.modules["mtlirt.data.simulate"].simulate


def _slices(sim):
    out, start = [], 0
    for n in sim.domains["n_items"]:
        out.append(slice(start, start + int(n)))
        start += int(n)
    return out


def test_node_levels_refine_long_domains_only():
    pen = irt.DEFAULT_PENALTIES
    sizes = [10, 400, 1500, 5000]
    dom = np.repeat(np.arange(4), sizes)
    lev = irt.node_levels(np.full(dom.size, 1.3), dom, 4, pen)
    nodes = (pen.n_nodes - 1) * 2**lev + 1
    assert nodes[0] == 49 and nodes[1] > 49 and nodes[2] > nodes[1]
    assert nodes[3] <= pen.max_nodes
    assert np.all(irt.node_levels(np.full(dom.size, 1.3), dom, 4, irt.Penalties(node_sd_ratio=0)) == 0)


def test_long_domain_matches_a_fine_grid_reference():
    """A 500-item domain: the default grids agree with a 1,537-node reference to 1e-3 in log a
    and d; the 49-node grid alone misses it by about 0.02 (so the test can fail)."""
    sim = simulate(200, domain_sizes=[500], seed=4)
    out = {}
    for label, pen in [("coarse", irt.Penalties(node_sd_ratio=0)), ("default", irt.DEFAULT_PENALTIES),
                       ("reference", irt.Penalties(n_nodes=1537, node_sd_ratio=0, mstep_stride=False))]:
        data = irt.ResponseData.from_responses(sim.to_responses())
        a, d, info = irt.calibrate_items(data, priors=pen)
        assert info["converged"]
        out[label] = (np.log(a), d, info["nodes"])
    ref = out["reference"]
    assert out["default"][2][0] > 49
    assert np.abs(out["default"][0] - ref[0]).max() < 1e-3
    assert np.abs(out["default"][1] - ref[1]).max() < 1e-3
    assert np.abs(out["coarse"][0] - ref[0]).max() > 5e-3


def test_estep_unobserved_cell_lists_match_the_dense_mask():
    """The E-step of domains with a few unobserved cells (listed by LLM and by item) gives the numbers
    of the dense float32 mask, with and without a floor, and with a block an LLM did not run."""
    sim = simulate(300, domain_sizes=[30, 12, 25], missing=0.08, seed=3)
    obs = sim.observed.copy()
    obs[:20, 30:42] = False  # LLMs that ran none of the second domain
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    sl = [slice(0, 30), slice(30, 42), slice(42, 67)]
    c = np.repeat([0.0, 0.0, 0.25], [30, 12, 25])
    rng = np.random.default_rng(1)
    a, d = np.exp(0.3 * rng.standard_normal(67)), rng.standard_normal(67)
    x = np.linspace(-5, 5, 41)
    logw = -0.5 * x**2
    lists, dense = (irt.ResponseData(Y, obs, sl, guessing=c) for _ in range(2))
    assert all(lists.mask_of(k)[0] == "sparse" for k in range(3))
    dense._masks = {k: ("dense",) for k in range(3)}
    s1, s2 = em_steps._estep(lists, a, d, x, logw), em_steps._estep(dense, a, d, x, logw)
    for key in ("eap", "Nq", "nq", "t", "R", "moments", "ll_domain"):  # the dense products sum in float32
        np.testing.assert_allclose(s1[key], s2[key], rtol=5e-5, atol=1e-6, err_msg=key)
    # each item's expected responses over the nodes are its observed cells: the lists took the others out
    np.testing.assert_allclose(s1["Nq"].sum(1), obs.sum(0), rtol=1e-6)
    assert obs.sum(0).min() < 280


def test_estep_of_a_floored_domain_runs_over_the_llms_that_answered_it(monkeypatch):
    """A floored domain that some LLMs did not run: its products over the others only give the numbers of
    the products over every LLM and of the dense mask; the LLMs without answers there keep the prior."""
    sim = simulate(300, domain_sizes=[30, 25], missing=0.05, seed=6)
    obs = sim.observed.copy()
    obs[:120, 30:55] = False
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    sl = [slice(0, 30), slice(30, 55)]
    c = np.repeat([0.0, 0.2], [30, 25])
    rng = np.random.default_rng(3)
    a, d = np.exp(0.3 * rng.standard_normal(55)), rng.standard_normal(55)
    x = np.linspace(-5, 5, 41)
    logw = -0.5 * x**2
    seen, every, dense = (irt.ResponseData(Y, obs, sl, guessing=c) for _ in range(3))
    assert len(em_steps._seen_rows(seen.mask_of(1))) == 180
    dense._masks = {k: ("dense",) for k in range(2)}
    s1, s3 = em_steps._estep(seen, a, d, x, logw), em_steps._estep(dense, a, d, x, logw)
    monkeypatch.setattr(em_steps, "SEEN_SHARE", 0.0)
    assert em_steps._seen_rows(every.mask_of(1)) is None
    s2 = em_steps._estep(every, a, d, x, logw)
    for key in ("eap", "Nq", "t", "R", "moments", "ll_domain"):
        np.testing.assert_allclose(s1[key], s2[key], rtol=1e-5, atol=1e-6, err_msg=key)
        np.testing.assert_allclose(s1[key], s3[key], rtol=5e-5, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(s1["eap"][:120, 1], 0.0, atol=1e-12)  # the prior's mean
    assert np.abs(s1["eap"][120:, 1]).std() > 0.3  # (the others moved by their answers)


def test_floored_calibration_over_the_llms_that_answered_keeps_their_answers_for_its_sweeps_only(monkeypatch):
    """A floored calibration of a domain some LLMs did not run: its sweeps' copy of the answering LLMs'
    answers gives the items of the products over every LLM, and is freed when the calibration ends."""
    sim = simulate(300, domain_sizes=[30, 25], guessing=0.2, missing=0.05, seed=6)
    obs = sim.observed.copy()
    obs[:120, 30:55] = False
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    sl = [slice(0, 30), slice(30, 55)]
    seen, every = (irt.ResponseData(Y, obs, sl, guessing="estimate") for _ in range(2))
    a1, d1, info1 = irt.calibrate_items(seen, tol=1e-6)
    assert not [key for key in seen._copies if isinstance(key, tuple)]
    monkeypatch.setattr(em_steps, "SEEN_SHARE", 0.0)
    a2, d2, info2 = irt.calibrate_items(every, tol=1e-6)
    assert info1["converged"] and info2["converged"]
    np.testing.assert_allclose(a1, a2, rtol=1e-3)
    np.testing.assert_allclose(d1, d2, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(info1["c_domain"], info2["c_domain"], atol=1e-4)
    assert info1["c_domain"].min() > 0.05


@pytest.mark.parametrize("floor", [0.0, 0.2])
def test_estep_of_one_domain_over_blocks_takes_an_unrun_block_whole(floor):
    """The pooled fit's one domain over the leaderboard's domains (``blocks``): a domain an LLM did not run
    is one term, the other unobserved cells listed; the numbers of the cell lists without blocks and of the
    dense mask."""
    sim = simulate(300, domain_sizes=[30, 12, 25], missing=0.05, seed=5)
    obs = sim.observed.copy()
    obs[:60, 30:42] = False
    obs[40:140, 42:67] = False
    Y = np.where(obs, sim.correct, 0).astype(np.int8)
    rng = np.random.default_rng(2)
    a, d = np.exp(0.3 * rng.standard_normal(67)), rng.standard_normal(67)
    x = np.linspace(-5, 5, 41)
    blocks = [slice(0, 30), slice(30, 42), slice(42, 67)]
    by_block, by_cell, dense = (irt.ResponseData(Y, obs, [slice(0, 67)], guessing=floor, blocks=b)
                                for b in (blocks, None, None))
    mb, mc = by_block.mask_of(0), by_cell.mask_of(0, max_share=1.0)
    assert mb[1].shape == (300, 3) and len(mb[2][1]) == np.count_nonzero(~obs) - 60 * 12 - 100 * 25
    assert mc[1].shape == (300, 1) and len(mc[2][1]) == np.count_nonzero(~obs)
    by_cell._masks = {0: mc}
    dense._masks = {0: ("dense",)}
    s1, s2, s3 = (em_steps._estep(v, a, d, x, -0.5 * x**2) for v in (by_block, by_cell, dense))
    for key in ("eap", "Nq", "nq", "t", "R", "moments", "ll_domain"):
        if s1[key] is None:
            continue
        np.testing.assert_allclose(s1[key], s2[key], rtol=1e-9, atol=1e-9, err_msg=key)
        np.testing.assert_allclose(s1[key], s3[key], rtol=5e-5, atol=1e-6, err_msg=key)


def test_grids_are_refined_when_the_coarse_phase_stalls():
    """A 300-item domain whose fitted items need 97 nodes: on 49 nodes the EM's changes (of the item
    curves) stall at 0.6-1.3e-7 (float32 statistics), so with tol 3e-8 the coarse phase never
    converges; the grid is refined anyway once the changes are within 10 x tol (before that fix it
    stayed at 49 nodes)."""
    sim = simulate(150, domain_sizes=[300], seed=1)
    data = irt.ResponseData.from_responses(sim.to_responses())
    _, _, coarse = irt.calibrate_items(data, priors=irt.Penalties(node_sd_ratio=0), tol=3e-8, max_iter=40)
    assert not coarse["converged"] and min(coarse["history"][3:]) > 3e-8  # the stall is real
    a, _, info = irt.calibrate_items(data, tol=3e-8, max_iter=40)
    assert irt.node_levels(a, data.item_domain, 1, irt.DEFAULT_PENALTIES)[0] == 1
    assert info["nodes"][0] == 97


@pytest.mark.parametrize("guessing", [None, "estimate"])
def test_calibration_ends_at_the_penalised_maximum(guessing):
    """The parameter expansion is a CM-step of the penalised marginal likelihood: from the converged
    items, plain EM sweeps (no expansion) gain nothing.  With the expansion matching the posterior
    moments to N(0, 1) alone (the items' penalties left out) they gained 0.30 (2PL) and 0.14 (floor)
    in 4 sweeps: its fixed point was not the maximum."""
    sizes = [20, 30] if guessing is None else [15, 25]
    sim = simulate(300 if guessing is None else 400, domain_sizes=sizes, seed=2, guessing=0.2 if guessing else 0.0)
    data = irt.ResponseData.from_responses(sim.to_responses(), guessing=guessing)
    a, d, info = irt.calibrate_items(data, tol=1e-6, max_iter=2000)
    assert info["converged"]
    levels = np.log2((info["nodes"] - 1) // (irt.DEFAULT_PENALTIES.n_nodes - 1)).astype(int)
    sweep = partial(calibration._em_sweep, data, calibration._node_groups(data, irt.DEFAULT_PENALTIES, levels),
                    priors=irt.DEFAULT_PENALTIES, model="2pl", px=False)
    point, pens = (a, d, info["c_domain"]), []
    for _ in range(5):
        new = sweep(*point)
        pens.append(calibration._penalised(new[3], *point, irt.DEFAULT_PENALTIES))
        point = new[:3]
    assert pens[-1] - pens[0] < 5e-3


def test_a_converged_domain_is_not_swept_again(monkeypatch):
    """The domains share no parameter: a domain whose items start at their maximum is swept in the first
    SQUAREM step only (three sweeps: its curves move by less than ``tol``), while the other goes on;
    both end at the maximum (the curves of a calibration to 1e-7)."""
    sim = simulate(400, domain_sizes=[20, 30], seed=6)
    data = irt.ResponseData.from_responses(sim.to_responses())
    a1, d1, ref = irt.calibrate_items(data, tol=1e-7, max_iter=2000)
    assert ref["converged"]
    a0, d0 = a1.copy(), d1.copy()
    a0[20:] *= 0.7
    d0[20:] += 0.5
    seen, estep = [], calibration._estep

    def recorded(data, a, d, x, logw, c=None, domains=None):
        seen.append(range(data.K) if domains is None else [int(k) for k in domains])
        return estep(data, a, d, x, logw, c=c, domains=domains)

    monkeypatch.setattr(calibration, "_estep", recorded)
    a, d, info = irt.calibrate_items(data, a0, d0)
    swept = [sum(k in s for s in seen) for k in range(2)]
    assert info["converged"] and swept[0] == 3 < swept[1] == info["n_iter"]
    x = em_steps._nodes(irt.DEFAULT_PENALTIES, 0)[0]
    gap = np.abs(expit(np.outer(a, x) + d[:, None]) - expit(np.outer(a1, x) + d1[:, None]))
    assert gap.max() < 2e-5


def test_convergence_is_measured_on_the_item_curves():
    """An item on its floor (success probability within 0.005 of it on the grid's [-6, 6]) whose
    intercept moves by 1e-3 has not moved; an ordinary item moving alike has (1.9e-4 at its location)."""
    x = em_steps._nodes(irt.DEFAULT_PENALTIES, 0)[0]
    dom = np.zeros(2, dtype=np.int64)
    a, d, cd = np.array([0.8, 1.0]), np.array([-10.0, 0.0]), np.array([0.25])
    measure = partial(calibration._curve_change, x=x, item_domain=dom)
    flat = measure((a, d, cd), (a, d + np.array([1e-3, 0.0]), cd))
    ordinary = measure((a, d, cd), (a, d + np.array([0.0, 1e-3]), cd))
    assert flat < 1e-5 < 1.5e-4 < ordinary < 2e-4  # (1 - c) / 4 per unit of d
    assert measure((a, d, None), (a, d, None)) == 0.0
    assert measure((a, d, cd), (a, d, cd + 1e-3)) > 5e-4  # the floor counts


def test_items_on_the_floor_do_not_hold_up_convergence():
    """3,000 LLMs, 40 3PL items (floor 0.25) and 4 items answered at random 15% of the time: their
    curves lie on the estimated floor (0.16), their intercepts (about -6) are held by the penalty alone
    and moved on while the other items had settled (81 sweeps with the change measured on ``log a``,
    ``d`` and ``logit c``); measured on the curves, 19."""
    sim = simulate(3000, domain_sizes=[40], seed=1, guessing=0.25)
    rng = np.random.default_rng(1)
    Y = np.hstack([sim.correct, (rng.random((3000, 4)) < 0.15).astype(sim.correct.dtype)])
    data = irt.ResponseData(Y, None, [slice(0, 44)], guessing="estimate")
    a, d, info = irt.calibrate_items(data, max_iter=600)
    assert info["converged"] and info["n_iter"] <= 40
    assert 0.12 < info["c_domain"][0] < 0.2 and np.all(d[-4:] < -4)


@pytest.fixture(scope="module")
def floor_fits():
    fits = {}
    for g in (0.25, 0.0):
        sim = simulate(1500, domain_sizes=[40, 60], guessing=g, seed=3)
        fits[g] = (sim, irt.fit_stl(sim.to_responses(), guessing="estimate"))
    return fits


def test_floor_is_recovered_on_3pl_data(floor_fits):
    sim, f = floor_fits[0.25]
    assert np.all(sim.items["guessing"] == 0.25)
    assert f.converged
    for s in _slices(sim):
        assert np.ptp(f.c[s]) == 0  # one floor per domain
        assert abs(f.c[s][0] - 0.25) < 0.04


def test_floor_is_near_zero_on_2pl_data(floor_fits):
    sim, f = floor_fits[0.0]
    assert np.all(sim.items["guessing"] == 0)
    assert f.converged
    assert np.all(f.c < 0.03) and np.all(f.c > 0)


def test_estimated_floor_fits_better_than_none_on_3pl_data(floor_fits):
    sim, f = floor_fits[0.25]
    f0 = irt.fit_stl(sim.to_responses())
    assert f.extra["marginal_loglik"] > f0.extra["marginal_loglik"] + 10


def test_fixed_items_calibration_is_the_frequentist_em():
    sim = simulate(150, domain_sizes=[8, 30], missing=0.1, seed=2)
    r = Responses.from_frame(sim.responses)
    for name, model in (("factor-2pl", "2pl"), ("factor-1pl", "1pl")):
        spec = load_spec(name)
        cal = fixed_calibrate(r, spec)
        data = irt.ResponseData.from_responses(r)
        a, d, info = irt.calibrate_items(data, priors=item_penalties(spec), model=model)
        np.testing.assert_allclose(cal["a"], a, rtol=1e-12)
        np.testing.assert_allclose(cal["d"], d, rtol=1e-12, atol=1e-12)
        assert cal["iterations"] == info["n_iter"] and np.all(cal["c"] == 0)
    cal = fixed_calibrate(r, "factor-3pl-mcq")
    assert np.all(cal["c"] == 0.25)
    cal = fixed_calibrate(r, "factor-3pl-estimate")
    for s in r.domain_slices:
        assert np.ptp(cal["c"][s]) == 0 and 0 < cal["c"][s][0] < 0.6


def test_fixed_items_route_gets_the_calibrated_floor():
    sim = simulate(200, domain_sizes=[6, 30], guessing=0.25, seed=5)
    r = Responses.from_frame(sim.responses)
    assert load_spec("factor-3pl-estimate").point_item_model == ("2pl", "estimate")
    res, init = _mtl_init(r, model="2pl", guessing="estimate", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = fit(r, "bayes", spec="factor-3pl-estimate", items="fixed", algorithm="map", progress=False)
    c = est.point("guessing")
    np.testing.assert_allclose(c, init["c"])
    np.testing.assert_allclose(c, res.stl.c)
    assert not np.allclose(c, 0.25)  # not the spec's prior mean
    for s in r.domain_slices:
        assert np.ptp(c[s]) == 0 and c[s][0] > 0


def test_fit_guessing_estimate_reports_the_floors(floor_fits):
    sim, _ = floor_fits[0.25]
    r = Responses.from_frame(sim.responses)
    est = fit(r, "mtl", guessing="estimate", seed=0)
    c = est.point("guessing")
    assert est.info["settings"]["guessing"] == "estimate"
    for s in r.domain_slices:
        assert np.ptp(c[s]) == 0 and abs(c[s][0] - 0.25) < 0.04
    pooled = fit(r, "pooled", guessing="estimate")
    assert np.ptp(pooled.point("guessing")) == 0 and pooled.point("guessing")[0] > 0.15
    with pytest.raises(Exception, match="estimate"):
        fit(r, "mtl", guessing="guess")


def test_node_levels_use_the_floors_smaller_information():
    """An item with a floor ``c`` tells less about the trait (at most ``a^2`` times Birnbaum's maximum
    of ``(P'/a)^2 / (P (1 - P))``, brute-forced here); the grids are chosen for that bound, so a
    domain whose floor is 0.25 needs no finer grid than without, and a coarser one where its
    2PL bound sits just above a level's threshold."""
    from mtlirt.estimators.em_steps import max_information

    s = np.linspace(1e-7, 1 - 1e-7, 200_001)
    for c in (0.0, 0.1, 0.25, 0.5):
        P = c + (1 - c) * s
        brute = np.max(((1 - c) * s * (1 - s)) ** 2 / (P * (1 - P)))
        assert max_information(np.array([c]))[0] == pytest.approx(brute, rel=1e-6)
    pen = irt.DEFAULT_PENALTIES
    sizes = [10, 200, 1500, 5000]
    dom = np.repeat(np.arange(4), sizes)
    a = np.full(dom.size, 1.3)
    plain = irt.node_levels(a, dom, 4, pen)
    floored = irt.node_levels(a, dom, 4, pen, np.full(dom.size, 0.25))
    assert np.all(floored <= plain) and np.any(floored < plain)
    assert np.array_equal(irt.node_levels(a, dom, 4, pen, np.zeros(dom.size)), plain)
