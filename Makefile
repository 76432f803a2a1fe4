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

.PHONY: run stop test setup help bench-load

# Debian packages from apt-get: Tesseract reads scanned PDFs and images (knowledge/extraction/ocr.py;
# `make setup` and `make run` install it), and the browser tests (tests/e2e) drive Debian's Chromium,
# never a browser a tool downloads. Installed as root or through passwordless sudo; the package
# lists are refreshed only when they do not know the package or are too stale to fetch it.
CHROMIUM  := /usr/bin/chromium
TESSERACT := /usr/bin/tesseract
PGBOUNCER := /usr/sbin/pgbouncer
APT_GET   := env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o Dpkg::Use-Pty=0

# (Defined before the rules that name them: make expands a rule's prerequisites when it reads the rule.)


help:
	@echo "make run   - install, start PostgreSQL, migrate, seed the demo, serve on http://127.0.0.1:$${PORT:-8000}"
	@echo "make stop  - stop the embedded PostgreSQL that make run leaves running"
	@echo "make test  - install (Tesseract for OCR, Chromium for the browser tests), then run the whole test suite"
	@echo "make bench-load - install PgBouncer, then measure the replica layout beside the one-database one (bench/load.py)"

$(STAMP): requirements.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

setup: $(STAMP) $(TESSERACT)

# `make run` is a local development server: var/development.env (DEBUG=1 and a random
# SECRET_KEY, written once) is what it and the README's manage.py commands run on, unless
# the environment sets DEBUG or SECRET_KEY. The banner with the URLs, login and token is
# printed last, once the server answers.
# config.prepare writes that file, then runs migrate, collectstatic, demo_setup --quiet and
# demo_corpus in one process (a second run finds their work done); config.serve starts the
# server and the worker.
run: $(STAMP) $(TESSERACT)
	@echo "Preparing the database and the demo (first run: about a minute)..."
	@$(PY) -m config.prepare
	@$(PY) -m config.serve

# The embedded PostgreSQL outlives `make run` (the next start reuses it); this stops it.
stop: $(STAMP)
	@$(PY) -m config.embedded_db stop

# $(call apt_install,PATH,PACKAGE,WHAT FOR)
define apt_install
@command -v apt-get >/dev/null 2>&1 || { echo "$(1) is missing and this is not a Debian-like system: install $(2) there yourself." >&2; exit 1; }
@if [ "$$(id -u)" = 0 ]; then sudo=""; \
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
else echo "$(1) is missing and installing it needs root: run 'sudo apt-get install -y $(2)' once." >&2; exit 1; fi; \
echo "Installing Debian's $(2) $(3) (apt-get)..."; \
if apt-cache show $(2) >/dev/null 2>&1 && $$sudo $(APT_GET) install $(2) >/dev/null; then :; \
else $$sudo $(APT_GET) update >/dev/null && $$sudo $(APT_GET) install $(2) >/dev/null; fi
@test -x $(1)
endef

$(CHROMIUM):
	$(call apt_install,$(CHROMIUM),chromium,for the browser tests)

$(TESSERACT):
	$(call apt_install,$(TESSERACT),tesseract-ocr,for OCR of scans and images)

$(PGBOUNCER):
	$(call apt_install,$(PGBOUNCER),pgbouncer,for bench/load.py's PgBouncer layouts)

# The load benchmark's replica layout beside the one-database layout, both through PgBouncer, in one run (JSON).
bench-load: $(STAMP) $(PGBOUNCER)
	$(PY) bench/load.py --setups bouncer-primary,bouncer-replica --levels 200,500

# QUARRY_E2E_REQUIRED: a missing browser fails the browser tests instead of skipping them.
test: $(STAMP) $(CHROMIUM) $(TESSERACT)
	DEBUG=1 $(PY) manage.py collectstatic --noinput --verbosity 0
	QUARRY_E2E_REQUIRED=1 $(PY) -m pytest

