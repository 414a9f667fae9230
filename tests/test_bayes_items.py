"""The Bayesian fit's items follow its spec and sit on the population scale.

Before: ``fit(..., "bayes", spec="factor-3pl-mcq", items="fixed")`` built its
tables with guessing 0 (the MTL initial fit was a 2PL and its ``c = 0`` won
over the spec's 0.25), ``factor-1pl`` with fixed items got per-item
discriminations, and the fixed items were re-standardised by the sample spread
of the shrunk MTL scores instead of the population scale the model assumes.
"""

import warnings

import numpy as np
import pytest

from mtlirt.bayes.fixed_items import resolve_item_values
from mtlirt.bayes.spec import load_spec
from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.data.validate import DataWarning
from mtlirt.errors import InputError
from mtlirt.estimators.baselines import posterior_mean_scale
from mtlirt.estimators.irt import fit_stl
from mtlirt.fitting import _mtl_init, fit


@pytest.fixture(scope="module")
def data():
    sim = simulate(120, domain_sizes=[4, 6, 30], seed=5)
    return Responses.from_frame(sim.responses)


def _map(data, spec):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(data, "bayes", spec=spec, items="fixed", algorithm="map", progress=False)


def test_spec_item_model_maps_to_the_frequentist_fit():
    assert load_spec("factor-2pl").point_item_model == ("2pl", None)
    assert load_spec("factor-1pl").point_item_model == ("1pl", None)
    assert load_spec("factor-3pl-mcq").point_item_model == ("2pl", 0.25)


def test_3pl_spec_keeps_its_guessing_with_fixed_items(data):
    est = _map(data, "factor-3pl-mcq")
    assert np.all(est.point("guessing") == 0.25)


def test_1pl_spec_gets_one_discrimination_per_domain(data):
    est = _map(data, "factor-1pl")
    a = est.point("discrimination")
    for s in data.domain_slices:
        assert np.ptp(a[s]) < 1e-9


def test_1pl_spec_rejects_per_item_discriminations(data):
    spec = load_spec("factor-1pl")
    a = np.linspace(0.5, 2.0, data.n_items)
    with pytest.raises(InputError, match="one discrimination per domain"):
        resolve_item_values(data, spec, {"a": a, "d": np.zeros(data.n_items)}, None)


def test_bayes_rejects_frequentist_item_options(data):
    with pytest.raises(InputError, match="item model from its spec"):
        fit(data, "bayes", guessing=0.25, algorithm="map")


def test_mtl_init_items_are_on_the_population_scale(data):
    res, init = _mtl_init(data, model="2pl", guessing=None, seed=0)
    # the linear predictor is the fit's own ...
    for s_k, k in zip(data.domain_slices, range(data.n_domains)):
        z_pop = np.outer(init["theta"][:, k], init["a"][s_k]) + init["d"][s_k]
        z_std = np.outer(res.theta[:, k], res.a[s_k]) + res.d[s_k]
        assert np.allclose(z_pop, z_std)
    # ... and the items are the calibration's, whose traits are N(0, 1) over the population: the
    # traits' estimates (MAP, shrunk) then spread less than 1 in the short domains, and the output
    # spreads like posterior means (the estimand's scale, sqrt(1 - mean posterior variance) < 1)
    out_sd = res.theta.std(axis=0)
    if res.C == 0:
        stl = fit_stl(data)
        _, a_int, _ = stl.internal()
        assert np.allclose(init["a"], a_int)
        assert np.allclose(out_sd, posterior_mean_scale(stl).theta.std(axis=0))
    sd = init["theta"].std(axis=0)
    assert sd[0] < 0.95 and np.all(out_sd < 0.99)


def test_init_from_an_estimate_puts_items_on_the_population_scale(data):
    from mtlirt.fitting import init_from

    est = fit(data, "mtl", seed=0)
    res, direct = _mtl_init(data, model="2pl", guessing=None, seed=0)
    init = init_from(est)
    # same fit, same seed: the estimate's recorded map gives the direct route's population-scale values
    assert np.allclose(init["a"], direct["a"]) and np.allclose(init["d"], direct["d"])
    assert np.allclose(init["theta"], direct["theta"])


def test_fixed_items_stay_within_the_specs_discrimination_cap(data):
    """A spec's ``discrimination_max`` bounds every discrimination of the model, fixed items too: a user's
    and the calibration's (on its scores' scale) above it are set to it, with a warning naming them."""
    from dataclasses import replace

    base = load_spec("factor-2pl")
    spec = replace(base, priors=replace(base.priors, discrimination_max=1.5))
    a = np.linspace(0.5, 3.0, data.n_items)
    with pytest.warns(UserWarning, match=r"discrimination_max 1.5 \(largest 3: " + repr(str(data.items[-1]))):
        out = resolve_item_values(data, spec, {"a": a, "d": np.zeros(data.n_items)}, None)
    np.testing.assert_array_equal(out["a"], np.minimum(a, 1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # below the default cap nothing moves, and nothing is said
        same = resolve_item_values(data, base, {"a": a, "d": np.zeros(data.n_items)}, None)
    np.testing.assert_array_equal(same["a"], a)
    # the default route: items from the MTL fit, whose largest discrimination here exceeds the cap
    res, init = _mtl_init(data, model="2pl", guessing=None, seed=0)
    assert init["a"].max() > 1.5
    with pytest.warns(DataWarning, match="above the spec's discrimination_max 1.5"):
        est = fit(data, "bayes", spec=spec, items="fixed", algorithm="map", progress=False)
    disc = est.point("discrimination")
    assert disc.max() == pytest.approx(1.5) and np.all(disc <= 1.5)
