# taskhoster: `make run` serves everything on the embedded defaults, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
# The PostgreSQL run of the suite; `make test` skips it with one line when no server answers.
TASKHOSTER_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
export TASKHOSTER_TEST_DATABASE_URL
# pytest-xdist workers per pass (PYTEST_WORKERS=0: one process). By file, so that a module's
# fixtures (a live server, a browser) start once, on the worker that runs it; tests/scheduling.py
# refines it: the longest files first, and a few long ones whose tests share nothing split.
PYTEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile
# Some machines set PYTHONDONTWRITEBYTECODE=1 for everything: then each pytest worker rewrites
# and compiles every test module again (10-40 s a worker a pass here), and each server, CLI and
# child process a test starts compiles taskhoster again. The caches are git-ignored.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test test-sqlite test-postgres lint format typecheck bench fuzz gates chaos soak clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@# setuptools' "Editable installation" box is a UserWarning of the build: not ours to show
	PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip install --quiet -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

run: $(VENV)/.installed
	@# a line per migration says nothing to someone starting the server: migrate quietly
	@DEBUG=$${DEBUG:-1} $(PY) manage.py migrate --no-input --verbosity 0
	@DEBUG=$${DEBUG:-1} $(PY) manage.py bootstrap
	@echo "taskhoster on http://127.0.0.1:$(PORT)/  (admin: /admin/, API docs: /api/v1/docs/; Ctrl-C stops)"
	DEBUG=$${DEBUG:-1} $(PY) manage.py serve --bind 127.0.0.1:$(PORT)

test: $(VENV)/.installed
	@scripts/ensure-test-tools
	$(PYTEST)
	$(MAKE) --no-print-directory test-postgres

test-sqlite: $(VENV)/.installed
	$(PYTEST)

# The second run keeps only the tests that can tell SQLite from PostgreSQL: those that use
# Django's database or are marked `postgres` (the rule: tests/conftest.py). The store's own
# tests never touch Django's database, so they are not even collected.
test-postgres: $(VENV)/.installed
	@$(PY) tests/postgres_ready.py; ready=$$?; \
	if [ $$ready = 0 ]; then \
		DATABASE_URL=$$TASKHOSTER_TEST_DATABASE_URL $(PYTEST) --ignore=tests/store; \
	elif [ $$ready != 1 ]; then exit $$ready; fi

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: $(VENV)/.installed
	$(VENV)/bin/mypy

# Every bench script, each output saved to var/bench-out/, then bench/RESULTS.md written from
# them. QUICK=1: the store, ingestion and peers scripts in their short modes (under 3 minutes).
BENCH_DB ?= taskhoster_bench
BENCH_OUT := var/bench-out
bench: $(VENV)/.installed
	@rm -rf $(BENCH_OUT); mkdir -p $(BENCH_OUT); started=$$(date +%s); \
	for script in bench/*_bench.py; do \
		name=$$(basename $$script .py); args=""; \
		case $$name in logs_bench) args="--bench-db $(BENCH_DB)";; \
			peers_bench) args="--json $(BENCH_OUT)/peers.json";; \
			http_bench) args="--json $(BENCH_OUT)/http.json";; esac; \
		if [ -n "$(QUICK)" ]; then case $$name in \
			store_bench|peers_bench|flush_bench|floor_bench) args="$$args --quick";; \
			logs_bench) args="$$args --lines 100000 --skip-pages";; \
			*) echo "== $$script: left out of the quick run"; continue;; esac; fi; \
		echo "== $$script $$args"; \
		$(PY) $$script $$args > $(BENCH_OUT)/$$name.txt 2>&1; status=$$?; \
		cat $(BENCH_OUT)/$$name.txt; [ $$status = 0 ] || exit $$status; \
	done; \
	$(PY) bench/results.py $(BENCH_OUT) $(if $(QUICK),--quick) --seconds $$(( $$(date +%s) - started ))

# Coverage-guided fuzzing of the JSON body parser and the name/path rules (5 minutes each).
fuzz: $(VENV)/.installed
	$(PY) fuzz/run.py $${FUZZ_SECONDS:-300}

# The Jepsen-style run through gunicorn: 10,000 tasks, workers, the sweep and web workers killed
# and paused; fails on any lost, stuck, unexpected or unexplained duplicate task.
chaos: $(VENV)/.installed
	$(PY) -m chaos.run $(CHAOS_ARGS)

# The soak of the real process layout: `manage.py serve` under mixed load while faults hit its
# items and logs (two small tmpfs mounts: root only, else one line and a skip). Fails on any
# death it did not cause, traceback, undocumented 5xx, lost event line or task not ended once.
# Default 10 minutes of load; SOAK_ARGS=--quick: about two minutes.
soak: $(VENV)/.installed
	$(PY) -m soak.run $(SOAK_ARGS)

# bandit on our code, pip-audit on the installed dependencies.
gates: $(VENV)/.installed
	scripts/gates

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache .mypy_cache .hypothesis
