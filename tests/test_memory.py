"""numpy's huge-page advice is off while mtlirt works (mtlirt.memory), and back as it was afterwards."""

import pytest

import mtlirt.fitting
from mtlirt.cli import main
from mtlirt.data.responses import Responses
from mtlirt.data.simulate import simulate
from mtlirt.estimators.bootstrap import map_in_workers
from mtlirt.memory import _toggle, small_pages


def huge_pages_advised() -> bool:
    """Whether numpy now advises huge pages for its large arrays (read through its switch, then set back)."""
    now = _toggle()(True)
    _toggle()(now)
    return bool(now)


@pytest.fixture
def advised(monkeypatch):
    """The advice on before each test (numpy's default on Linux), whatever the host; restored after."""
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    old = _toggle()(True)
    yield
    _toggle()(old)


def test_small_pages_turns_the_advice_off_and_restores_it(advised, monkeypatch):
    with small_pages():
        assert huge_pages_advised() is False
        with small_pages():
            assert huge_pages_advised() is False
        assert huge_pages_advised() is False
    assert huge_pages_advised() is True
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")  # the user's own choice stands
    with small_pages():
        assert huge_pages_advised() is True


def test_fit_and_the_command_line_work_without_the_advice(advised, monkeypatch, tmp_path):
    seen = []
    finish = mtlirt.fitting._finish

    def spy(*args, **kwargs):
        seen.append(("fit", huge_pages_advised()))
        return finish(*args, **kwargs)

    monkeypatch.setattr(mtlirt.fitting, "_finish", spy)
    sim = simulate(40, domain_sizes=[6, 8], seed=3)
    mtlirt.fitting.fit(sim.responses, "accuracy")
    assert seen == [("fit", False)] and huge_pages_advised() is True

    read = Responses.read.__func__

    def read_spy(cls, *args, **kwargs):
        seen.append(("read", huge_pages_advised()))
        return read(cls, *args, **kwargs)

    monkeypatch.setattr(Responses, "read", classmethod(read_spy))
    path = tmp_path / "r.csv"
    sim.responses.to_csv(path, index=False)
    assert main(["validate", str(path)]) == 0
    assert seen[-1] == ("read", False) and huge_pages_advised() is True


def test_workers_run_without_the_advice(advised):
    """The bootstrap's worker processes start with numpy's default; each replicate runs without the advice."""
    out = map_in_workers(huge_pages_advised, [()] * 2, n=2, n_jobs=2)
    assert out == [False, False]
    assert map_in_workers(huge_pages_advised, [()], n=1, n_jobs=1) == [True]  # in this process: as the caller has it
