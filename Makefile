# fsmlearn: every target depends on the install step, so a fresh checkout
# needs nothing installed by hand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install warm test fuzz demo bench bench-lm bench-startup clean tagger-giga200 rcms-decipher rcms-speech rcms-words bench-rcm trf-morph trf-morph-long trf-lm bench-trf mrf-synthetic mrf-lm mrf-lm-full mrf-tag

install: $(STAMP)

$(STAMP): setup.cfg pyproject.toml scripts/build_kenlm.sh
	@echo "== creating $(VENV) and installing fsmlearn with its dependencies"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@echo "== building KenLM's lmplz, build_binary and query into $(VENV)/bin"
	scripts/build_kenlm.sh $(VENV)/bin
	@echo "== compiling fsmlearn's numba kernels once (cached on disk: later processes start at once)"
	$(PY) -m fsmlearn.experiments.warm
	@touch $(STAMP)

# compile every numba kernel into the on-disk cache again (the install step does it once)
warm: $(STAMP)
	$(PY) -m fsmlearn.experiments.warm

# the suite on TEST_WORKERS processes (pytest-xdist; default: one per core), a test file at a
# time on each, so a file's module fixtures are built once; TEST_WORKERS=0 runs it in one process
TEST_WORKERS ?= auto
test: $(STAMP)
	$(PY) -m pytest -q --durations=30 -n $(TEST_WORKERS) --dist loadfile

# the readers' fuzz suite (issue 16) at FUZZ_EXAMPLES inputs per reader; prints the tally;
# then the model files' fuzz tests (TRF and MRF models)
FUZZ_EXAMPLES ?= 10000
fuzz: $(STAMP)
	FSMLEARN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/fuzz_*_test.py
	FSMLEARN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(PY) -m pytest -q tests/mrf_io_test.py tests/trf_io_test.py -k fuzz

demo: $(STAMP)
	$(VENV)/bin/fsmlearn demo

bench: $(STAMP)
	$(PY) bench/bench_engine.py

# one EM iteration of the 17-tag HMM tagger over Mixed-text (issue 4); writes reports/bench_em.json
.PHONY: bench-em
bench-em: $(STAMP)
	$(PY) bench/bench_em.py

# the LM benchmark of issue 3: intermediate files cached in bench/work (or $FSMLEARN_BENCH_DIR);
# then the small models of issue 31 (bench-lm-small's 171k n-grams and 12k n-grams)
bench-lm: $(STAMP)
	$(PY) bench/bench_lm.py
	$(PY) bench/bench_lm_small.py
	$(PY) bench/bench_lm_small.py --train 300 --runs 9 --out reports/bench_lm_small_12k.json

# the partitioned (Dask) LM estimation of issue 28 against lmplz on this machine (docs/cluster.md,
# docs/bench-scale.md): a stand-in text of TOKENS tokens sampled once into bench/work/scale, then
# lm estimate on 2 local workers, in memory (up to 50M tokens), lmplz, 1 worker and 1 worker of 2 threads;
# writes reports/bench_scale.json (docs/bench-scale.md has the 200M-token runs with MEMORY=2G and 4G)
# (MEMORY, when given, is each worker's budget here too; default 2G)
TOKENS ?= 200000000
.PHONY: bench-scale
bench-scale: $(STAMP)
	$(PY) bench/bench_scale.py --tokens $(TOKENS) --memory $(or $(MEMORY),2G)

# process start-up (issue 27, docs/startup.md): every command against KenLM's tools on small inputs
# built once in bench/work/startup; writes reports/bench_startup.json
bench-startup: $(STAMP)
	$(PY) bench/bench_startup.py

# scoring with a small model (171k n-grams) against KenLM's Python loop (docs/bench-lm.md)
.PHONY: bench-lm-small
bench-lm-small: $(STAMP)
	$(PY) bench/bench_lm_small.py

# the flagship job (issue 5): a tagger from n-grams alone.  The 200M-token stand-in corpus
# and its Web1T-format counts are built once under GIGA_CACHE; NGRAMS=<dir> uses a
# user's own Web1T/Gigaword count directory instead (corpus EM is then skipped).
# SCHEDULER= and MEMORY= set where the counting stage runs (docs/cluster.md; default: a local
# Dask cluster, one worker per core, each with a budget of GIGA_MEMORY: the counting workers
# then spill rather than hold their partitions, and the whole command stays near 4 GB).
GIGA_CACHE ?= data/cache/giga200
GIGA_MEMORY ?= 2G
NGRAMS ?=
DEVICE ?= cpu
tagger-giga200: $(STAMP)
	$(VENV)/bin/fsmlearn tag giga200 --cache $(GIGA_CACHE) $(if $(NGRAMS),--ngrams $(NGRAMS)) \
		$(if $(SCHEDULER),--scheduler $(SCHEDULER)) \
		$(if $(MEMORY),--memory $(MEMORY),$(if $(SCHEDULER),,--memory $(GIGA_MEMORY))) \
		--device $(DEVICE) --report reports/tagger-giga200.json --model models/tagger-giga200

# reified context models, decipherment (issue 17, section 6 of the paper): exact, beam and RCMS
rcms-decipher: $(STAMP)
	$(VENV)/bin/fsmlearn rcms decipher --jobs 2 --report reports/rcms-decipher.json

# latent alignments (section 6, figure 4) and precision at high confidence (section 5, figure 3)
rcms-speech: $(STAMP)
	$(VENV)/bin/fsmlearn rcms speech --jobs 2 --report reports/rcms-speech.json

rcms-words: $(STAMP)
	$(VENV)/bin/fsmlearn rcms words --jobs 2 --report reports/rcms-words.json

# trans-dimensional random fields (issue 18): word morphology (section 6: AugSA against L-BFGS
# and WB3 on cmudict words), Brown-LM against lmplz's KN5 (section 7; RESUME=1 continues a run
# from its checkpoint), and the benchmark (sampling throughput; rescoring against kenlm)
trf-morph: $(STAMP)
	$(VENV)/bin/fsmlearn trf morph --report reports/trf-morph.json

# the convergence run of docs/trf.md: 100,000 AugSA iterations with burn-in t0 = 10,000, one chain
trf-morph-long: $(STAMP)
	$(VENV)/bin/fsmlearn trf morph --iterations 100000 --t0 10000 --chains 1 --lbfgs-iterations 3000 \
		--report reports/trf-morph-long.json

trf-lm: $(STAMP)
	$(VENV)/bin/fsmlearn trf lm --report reports/trf-lm.json --model models/trf-lm.npz $(if $(RESUME),--resume)

bench-trf: $(STAMP)
	$(PY) bench/bench_trf.py

# MRF language models by lifted variational inference (issue 19): the synthetic experiment
# (section 6, figure 5), Brown-LM with K = 2, D = 30, full rank against low rank on 2,000 words,
# and the MRF part-of-speech tagger against the HMMs (one BLAS thread: faster on 2 cores)
mrf-synthetic: $(STAMP)
	$(VENV)/bin/fsmlearn mrf synthetic --report reports/mrf-synthetic.json

mrf-lm: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/fsmlearn mrf lm --minutes 30 --report reports/mrf-lm.json --model models/mrf-lm.npz

mrf-lm-full: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/fsmlearn mrf lm --rank 0 --vocab 2000 --minutes 12 --report reports/mrf-lm-full2000.json --model models/mrf-lm-full2000.npz

# the tagger with a window of L = 3 words (offsets 0, +1, -1), the word under the tag weighted 0.8
# (chosen among 0.33, 0.8, 0.9 on WSJ-small: docs/mrf.md); --window 1 is the tag-and-word model
mrf-tag: $(STAMP)
	OPENBLAS_NUM_THREADS=1 $(VENV)/bin/fsmlearn mrf tag-wsj --window 3 --centre-weight 0.8 --report reports/mrf-tag.json \
		--model models/mrf-tag.npz

# RCMS inference per sequence against beam search (fsmlearn's and an independent one)
bench-rcm: $(STAMP)
	$(PY) bench/bench_rcm.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
