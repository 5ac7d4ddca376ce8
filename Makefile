# The two commands of the README:  `make demo`  and  `make test`.
# Both install what is missing first (idempotent), into .venv.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# llama.cpp's native build crashes on these CPUs (AMX path): pin the instruction sets.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
STAMP := $(VENV)/.installed

.PHONY: install demo test lint corpus clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU wheel first, so no dependency can pull a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	# compile llama-cpp-python with safe flags; --no-cache-dir because pip's wheel cache ignores CMAKE_ARGS
	$(BIN)/python -c "import llama_cpp" 2>/dev/null || \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q --no-cache-dir llama-cpp-python==0.3.36
	$(BIN)/pip install -q -e ".[local,dev]"
	# the serve page's browser test drives Debian's chromium through selenium; installed when we may (root + apt)
	command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } || \
	  echo "note: no chromium/chromedriver: the page's browser test will be skipped"
	touch $(STAMP)

demo: install
	$(BIN)/logicroute demo

# The README's test command: the linters, the import contract, then the tests.
test: install lint
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The corpus of `logicroute bench-scale --corpus debian-docs`: seven Debian documentation packages
# (apt-get download, dpkg-deb -x: nothing installed) as Markdown, 100k+ chunks, fetched once into
# $LOGICROUTE_CACHE_DIR/corpora/debian-docs (default ~/.cache/logicroute/...), outside the repository.
corpus: install
	$(BIN)/python -m training.corpus_fetch

clean:
	rm -rf $(VENV)
