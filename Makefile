# Two commands on a fresh machine: `make app` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)

.PHONY: app test lint world checkpoints bench clean-venv serve venv

$(STAMP): requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	rm -f $(VENV)/.installed-* && touch $(STAMP)

venv: $(STAMP)

app: $(STAMP)
	$(PY) -m streamlit run app.py

# A class at once: REPLICAS Streamlit processes (default: one per core) behind HAProxy on PORT (default 8501).
# Installs Debian's haproxy when run as root, else says which package to install. See README "Hosting".
serve: $(STAMP)
	$(PY) -m serve $(if $(REPLICAS),--replicas $(REPLICAS)) $(if $(PORT),--port $(PORT)) $(if $(HOST),--host $(HOST))

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest

lint: $(STAMP)
	$(PY) -m ruff check .

# Regenerate the demo data sets bit-identically: the demo world and the birthplace models' knowledge world.
world: $(STAMP)
	$(PY) -m core.data.world --seed 0 --out data/world
	$(PY) -m core.data.world --seed 0 --people 1000 --dev 200 --test 100 --bios 4 --out data/knowledge

clean-venv:
	rm -rf $(VENV)

# Retrain every bundled checkpoint from data/ on this CPU (see checkpoints/README.md for the minutes).
# COURSE=1: the birthplace family with the CS224N assignment's recipe, into checkpoints/course/ (a GPU).
checkpoints: $(STAMP)
	$(PY) -m core.train.bundle $(if $(COURSE),--course)

# Benchmarks against baselines measured in the same run (minutes; not part of `make test`).
# One summary table; exits non-zero if a target is missed. See bench/README.md.
bench: $(STAMP)
	$(PY) -m bench.run_all
