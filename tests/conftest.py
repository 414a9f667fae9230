import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture(scope="session", autouse=True)
def python_thunks_for_inner_graphs():
    """Run the inner graphs of a Python-thunk compile (``mode="FAST_COMPILE"``) in Python too.

    The tests that check the model's log-density against numpy compile with ``FAST_COMPILE``, whose
    linker asks for Python thunks (``c_thunks=False``). PyTensor 3.3 links the inner graph of an
    ``OpFromGraph``-like Op (the 3PL and correlated models have some) with the ``"vm"`` linker instead,
    whose C thunks were fixed when PyTensor was imported: on an empty compile cache g++ built 28 C
    modules for these checks (36 s of CPU at load 7-8, ``tests/test_bayes.py -k numpy_derived``; 40 in a
    whole cold run, none now). mtlirt's fits compile their graphs with numba. Here a Python-thunk
    compile links its inner graphs with Python thunks as well; the values checked are the same.
    Every other compile (numba, and PyTensor's default ``impl=None``) is left as it is.
    """
    from pytensor.compile.inner_function import HasInnerFunction, link_only_mode
    from pytensor.link.vm import VMLinker

    default = HasInnerFunction.link_mode

    def link_mode(self, impl):
        if impl == "py":
            return link_only_mode(VMLinker(use_cloop=False, c_thunks=False))
        return default(self, impl)

    HasInnerFunction.link_mode = link_mode
    yield
    HasInnerFunction.link_mode = default


@pytest.fixture
def shared_data():
    """Path to the shared real-data folder (``../shared/data``); the test is skipped where it is absent."""
    path = Path(os.environ.get("MTLIRT_SHARED", SHARED)) / "data"
    if not path.exists():
        pytest.skip("the shared real-data folder (../shared/data) is not present")
    return path


# Tests that run for a minute or more on CI's two cores (``--durations`` of a cold `make test`), longest first.
# They start before everything else so that no long test is left running alone at the end of the run.
LONGEST_FIRST = (
    "tests/test_notebooks.py::test_notebook_runs[03-",
    "tests/test_notebooks.py::test_notebook_runs[01-",
    "tests/test_notebooks.py::test_notebook_runs[04-",
    "tests/test_demo.py::",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Order the run for two workers: the longest tests first, then the other ``slow`` tests, then the rest.

    ``make test`` passes ``--dist loadgroup --no-loadscope-reorder`` so that pytest-xdist hands out the tests
    in this order (its default reorders by the size of the ``xdist_group`` groups instead). The order within
    each tier is the collection order; the set of tests run is unchanged.
    """

    def tier(item):
        for rank, prefix in enumerate(LONGEST_FIRST):
            if item.nodeid.startswith(prefix):
                return rank
        return len(LONGEST_FIRST) + (0 if item.get_closest_marker("slow") else 1)

    items.sort(key=tier)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_xdist_group(config, items):
    """Make ``xdist_group`` group again under pytest >= 9.

    pytest-xdist (3.8) marks a grouped test by appending ``@group`` to ``item._nodeid``; pytest 9 builds
    ``item.nodeid`` from ``item._id`` instead, so the suffix was lost and ``--dist loadgroup`` spread the
    tests of a group over the workers (the docs site was built once per worker). This sets the suffix
    where pytest 9 reads it, on the workers of a ``--dist loadgroup`` run only.
    """
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest < 9: xdist's own suffix works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)
