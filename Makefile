# Two commands do all set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# `make run` installs the package (what `moagcn` needs); `make test` adds the dev and pyg
# extras on top. --no-compile: modules are byte-compiled when first imported, not all of
# torch's at install time.
RUN_STAMP := $(VENV)/.installed-run
STAMP     := $(VENV)/.installed
PIP       := $(BIN)/python -m pip install --quiet --no-compile

.PHONY: run test test-slow lint-hw synth-table clean

$(RUN_STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(PIP) -e ".[dev,pyg]"
	touch $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/moagcn train

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -n 2 --dist loadgroup

synth-table: $(STAMP)
	$(BIN)/python -m moagcn.synth.table --out docs/synth-fp32.md

clean:
	rm -rf $(VENV) reports build *.egg-info
