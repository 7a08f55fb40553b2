# The two commands a fresh machine needs: `make demo` and `make test` (Python 3.11+, make).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install up down demo test unit lint fmt clean ui-check openapi bench hostile reliability golden docs

$(STAMP): pyproject.toml examples/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("Python 3.11+ is required, found " + sys.version.split()[0]) if sys.version_info < (3, 11) else None'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[devstack,dev,bench,docs]' -e ./examples
	touch $(STAMP)

install: $(STAMP)

up: install                 ## start the embedded stack and a background worker (it loads the examples)
	$(BIN)/dsmo dev up --worker

down:                        ## stop what `make up` started
	$(BIN)/dsmo dev down

demo: up                     ## run the sample agent end to end
	$(BIN)/python examples/demo.py

test: install lint           ## the whole suite against the real embedded stack
	$(BIN)/python -m pytest -q --ignore=tests/ui --durations=20 -n 3 --dist loadfile

ui-check: install            ## open the Web UI in headless Chromium, find a waiting run, save a screenshot
	command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
	$(BIN)/python -m pytest -q tests/ui -rs

openapi: install             ## regenerate docs/openapi.json from the ingress
	$(BIN)/python -c 'import json, pathlib; from dsmo.server.ingress.app import create_app; from dsmo.config.settings import Settings; pathlib.Path("docs/openapi.json").write_text(json.dumps(create_app(Settings()).openapi(), indent=2) + "\n")'

# `make bench X=1` picks `python -m bench <study>`; two at once is a usage error (one study a call).
BENCH_STUDY = $(strip $(if $(TABLE1),table1) $(if $(FLOOR),floor --repeats $(FLOOR)) $(if $(W5),w5) \
  $(if $(SCALE),scale $(if $(filter-out 1,$(SCALE)),--runs $(SCALE))) $(if $(MIGRATE),migrate) \
  $(if $(WHATIF),what-if) $(if $(FLOW),flow) $(if $(SUBJECTS),subjects) $(if $(PEERS),peers) \
  $(if $(TOOLS),tools) $(if $(LIVE),live))

bench: install               ## Table 1, the raw-Temporal floor, W5 (LLM-bound); QUICK=1 for ~3 minutes, UPDATE=1 rewrites BENCHMARKS.md, FLOOR=N only the floor ratios N times, W5=1 only W5, SCALE=1 only the scale test and the console (SCALE=100000: that many runs waiting, beside bare Temporal), MIGRATE=1 only migrating 10,000 waiting runs (300 with QUICK=1), WHATIF=1 only the what-if replay of 1,000 ended runs (100 with QUICK=1), FLOW=1 only flow control (per-key concurrency: keyed against plain W4 runs, one lock's ceiling), SUBJECTS=1 only data subjects (sealing's cost on W1 and W4, erasing a subject of 1,000 runs), PEERS=1 only W6 (DSMO beside raw Temporal, LangGraph and DBOS: latency, throughput, CPU, crash ledger), TOOLS=1 only a tool-using agent's cost per turn (DSMO beside LangGraph with a Postgres checkpointer, 20 lookups; 5 with QUICK=1), LIVE=1 only live streams (1,000 runs followed by 100 SSE readers against the same runs with none: worker and ingress CPU and memory per stream; 100 runs with QUICK=1), TABLE1=1 only Table 1's experiment (three repetitions, each its own seed)
	$(BIN)/python -m bench $(or $(BENCH_STUDY),all) $(if $(QUICK),--quick,) $(if $(UPDATE),--update,)

hostile: install             ## peak memory of the entry points under hostile inputs (bombs, 1 GiB bodies) and a control run's latency beside a loop-blocking agent and hostile model answers; writes BENCHMARKS.md
	$(BIN)/python -m bench hostile --update

reliability: install         ## crash/restart/storage-fault scenarios at larger counts (RUNS=300); writes BENCHMARKS.md
	$(BIN)/python -m bench reliability $(if $(RUNS),--runs $(RUNS),) --update

golden: up                   ## record golden histories of the examples (tests/histories/*.json)
	$(BIN)/python -m tests.histories.record $(FLOWS)

docs: install                ## build the documentation site into site/ (strict: a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

unit: install                ## the fast unit tests only
	$(BIN)/python -m pytest -q tests/unit

lint: install
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean: down
	rm -rf .dsmo
