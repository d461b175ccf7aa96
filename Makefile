# Two commands do all set-up: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-slow lint-hw synth-table clean

$(STAMP): pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,pyg]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/moagcn train

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 --dist loadgroup

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -n 2 --dist loadgroup

synth-table: $(STAMP)
	$(BIN)/python -m moagcn.synth.table --out docs/synth-fp32.md

clean:
	rm -rf $(VENV) reports build *.egg-info
