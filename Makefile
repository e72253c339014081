# Paperlane: `make demo` runs it, `make test` tests it. Both set up .venv first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: demo test test-fast lint bench bench-pipeline bench-burst install clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	./scripts/demo.sh

test: install
	./scripts/test.sh

# Everything but the tests marked slow (worker processes, servers, the browser).
test-fast: install
	./scripts/test.sh -m "not slow"

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
	rm -rf $(VENV) db.sqlite3 media var staticfiles
