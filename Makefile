# Two entry points for a fresh clone: `make demo` and `make test`.
# Each creates .venv with a Python >= 3.12 (found by scripts/find-python.sh)
# and installs the package with its dev extra the first time it runs.
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-fast env lock bench docs clean

# constraints.txt: the versions the suite and the docs' figures last ran with (pyproject.toml has lower bounds only)
$(STAMP): pyproject.toml constraints.txt
	@PYBIN=$$(sh scripts/find-python.sh) && echo "using $$PYBIN" && "$$PYBIN" -m venv $(VENV)
	@# a current pip installs the environment in half the time of the venv's own (pip 26.3: 37.5 s wall,
	@# 26.3 s CPU; pip 23.2.1: 68.9 s, 57.3 s; empty pip cache, 2 cores)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -c constraints.txt -e ".[dev]"
	@# pip byte-compiles the packages one file after another; compileall does it on every core
	$(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null || true
	@touch $(STAMP)

env: $(STAMP)

# Pin what .venv holds now (after an upgrade the suite passed with): constraints.txt, its header kept
lock: $(STAMP)
	@{ grep '^#' constraints.txt; $(PY) -m pip freeze --exclude-editable; } > constraints.txt.new && mv constraints.txt.new constraints.txt

# --force: a second `make demo` replaces the demo folder (demo-output, recognised by its demo.json) the first wrote
demo: $(STAMP)
	$(VENV)/bin/mtlirt demo --force

# The full suite on every core (pytest-xdist: tests spread one by one; those sharing
# an expensive fixture are grouped with xdist_group; tests/conftest.py puts the longest
# first and --no-loadscope-reorder keeps that order), the headless-browser test included:
# scripts/ensure-chromium.sh installs Debian's chromium when run as root.
# Debian's chromium installs (apt, about 30 s on a fresh machine) while pip installs the environment.
test:
	@sh scripts/ensure-chromium.sh & pid=$$!; $(MAKE) --no-print-directory env; rc=$$?; wait $$pid; exit $$rc
	$(PY) -m pytest -n auto --dist loadgroup --no-loadscope-reorder

# Development: everything but the tests marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest -n auto --dist loadgroup --no-loadscope-reorder -m "not slow"

docs: $(STAMP)
	$(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) build dist site
