# Two entry points for a fresh clone: `make demo` and `make test`.
# Each creates .venv with a Python >= 3.12 (found by scripts/find-python.sh)
# and installs the package with its dev extra the first time it runs.
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test test-fast env bench docs clean

$(STAMP): pyproject.toml
	@PYBIN=$$(sh scripts/find-python.sh) && echo "using $$PYBIN" && "$$PYBIN" -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/mtlirt demo

# The full suite on every core (pytest-xdist: tests spread one by one; those sharing
# an expensive fixture are grouped with xdist_group), the headless-browser test included:
# scripts/ensure-chromium.sh installs Debian's chromium when run as root.
test: $(STAMP)
	@sh scripts/ensure-chromium.sh
	$(PY) -m pytest -n auto --dist loadgroup

# Development: everything but the tests marked slow.
test-fast: $(STAMP)
	$(PY) -m pytest -n auto --dist loadgroup -m "not slow"

docs: $(STAMP)
	$(PY) -m mkdocs build --strict

clean:
	rm -rf $(VENV) build dist site
