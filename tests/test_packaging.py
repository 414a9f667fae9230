"""The built wheel is complete: it ships the model specs of the top-level
``models/`` folder inside the package and fits a Bayesian model from outside
the checkout (the specs once lived beside ``src/`` and the wheel had none), and
it ships every example input, which ``mtlirt example-data`` copies out and
``mtlirt convert`` reads there. ``constraints.txt``, the versions ``make env``
installs, pins every requirement within pyproject.toml's bounds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted(p.name for p in (ROOT / "models").glob("*.toml"))
EXAMPLES = ROOT / "src" / "mtlirt" / "examples"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # a copy of what the build reads, so that setuptools' build/ and egg-info stay out of the checkout
    src = tmp_path_factory.mktemp("source")
    for folder in ("src", "models"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # as a user builds it: pip fetches the build backend (pyproject's build-system) into an isolated env
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "-q", "-w", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = out.glob("mtlirt-*.whl")
    return path


def test_the_wheel_lists_every_package_and_maps_the_specs():
    """pyproject lists the packages (the specs' folder is mapped from outside ``src/``, so setuptools'
    find cannot be used): every folder of the package that holds code or data is there, and the
    specs come from the top-level ``models/``, the one copy. The examples' subfolders are package data of
    ``mtlirt.examples`` (their files are checked in the wheel below)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    pkg = ROOT / "src" / "mtlirt"
    folders = {"mtlirt"} | {"mtlirt." + ".".join(p.relative_to(pkg).parts) for p in pkg.rglob("*")
                            if p.is_dir() and p.name != "__pycache__" and not p.name.endswith(".egg-info")
                            and any(f.is_file() and f.suffix != ".pyc" for f in p.iterdir())
                            and "examples" not in p.relative_to(pkg).parts[:-1]}
    assert set(config["packages"]) == folders | {"mtlirt.models"}
    assert config["package-dir"] == {"": "src", "mtlirt.models": "models"}
    assert not (pkg / "models").exists() and SPECS and "factor-2pl.toml" in SPECS


@pytest.mark.slow
def test_wheel_ships_the_model_specs_and_fits_outside_the_checkout(wheel, tmp_path):
    assert "factor-2pl.toml" in SPECS
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        zf.extractall(tmp_path / "site")
    assert {f"mtlirt/models/{s}" for s in SPECS} <= names
    assert "mtlirt/data/mmlu_subjects.csv" in names
    examples = {f"mtlirt/examples/{p.relative_to(EXAMPLES).as_posix()}" for p in EXAMPLES.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    assert len(examples) > 30 and "mtlirt/examples/README.md" in examples
    assert examples - names == set(), "example files missing from the wheel"
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as zf:
        assert "License-Expression: MIT" in zf.read(metadata).decode()

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MTLIRT_MODELS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(tmp_path / "site")

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=600)

    where = run("-c", "import mtlirt, mtlirt.bayes as b; print(mtlirt.__file__); print(*b.list_specs())")
    assert where.returncode == 0, where.stderr
    file, specs = where.stdout.splitlines()
    assert Path(file).is_relative_to(tmp_path / "site")
    assert specs.split() == [s.removesuffix(".toml") for s in SPECS]

    sim = run("-m", "mtlirt.cli", "simulate", "--n-llms", "30", "--domain-sizes", "5,6,7", "--seed", "3",
              "--out", "t.csv")
    assert sim.returncode == 0, sim.stderr
    fit = run("-m", "mtlirt.cli", "fit", "t.csv", "--method", "bayes", "--algorithm", "map", "--strict",
              "--out", "fit")
    assert fit.returncode == 0, fit.stderr
    assert "wrote bayes fit of 30 LLMs x 18 items (3 domains)" in fit.stdout
    assert "Traceback" not in fit.stderr and "NOT CONVERGE" not in fit.stderr
    info = (work / "fit" / "fit.json").read_text()
    assert '"spec": "factor-2pl"' in info and str(tmp_path / "site") in info

    # the examples, from the installed package: copied out, then converted as docs/harnesses.md does
    ex = run("-m", "mtlirt.cli", "example-data", "examples")
    assert ex.returncode == 0, ex.stderr
    assert {f"mtlirt/examples/{p.relative_to(work / 'examples').as_posix()}"
            for p in (work / "examples").rglob("*") if p.is_file()} == examples - {"mtlirt/examples/__init__.py"}
    helm = run("-m", "mtlirt.cli", "convert", "helm", "examples/helm/runs/v1", "--out", "helm.csv")
    assert helm.returncode == 0, helm.stderr
    assert "wrote 11 responses (2 LLMs, 6 items, 2 domains) to helm.csv" in helm.stdout


def test_constraints_pin_every_requirement_within_its_bounds():
    """``make env`` installs with ``-c constraints.txt``: every package that pyproject.toml asks for
    (the dependencies and every extra) is pinned there to one version its lower bound allows, so a
    fresh clone gets the versions the suite last passed with, and a raised bound cannot go unpinned."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: {line!r} is not a pin (name==version)"
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    for text in wanted:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt does not pin {req.name} (pyproject.toml: {text!r})"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's {text!r}"
    assert "mtlirt" not in pins, "constraints.txt pins the package itself"
