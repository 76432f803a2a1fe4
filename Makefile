# Quarry: `make run` serves the app, `make test` runs the whole suite.
# Both create .venv and install requirements.txt on first use; nothing else is needed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# Offline by default: litellm must not fetch its price list, onnxruntime must not phone home.
export LITELLM_LOCAL_MODEL_COST_MAP := True
export ORT_DISABLE_TELEMETRY := 1
export HF_HUB_OFFLINE := 1
export PYTHONUNBUFFERED := 1

.PHONY: run test setup help

help:
	@echo "make run   - install, start PostgreSQL, migrate, seed the demo, serve on http://127.0.0.1:$${PORT:-8000}"
	@echo "make test  - install, then run the whole test suite"

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

setup: $(STAMP)

# `make run` is a local development server: DEBUG on unless the environment says otherwise.
run: export DEBUG ?= 1
run: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py demo_setup
	$(PY) manage.py demo_corpus
	$(PY) -m config.serve

test: $(STAMP)
	DEBUG=1 $(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) -m pytest

