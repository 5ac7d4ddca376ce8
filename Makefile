# The two commands of the README:  `make demo`  and  `make test`.
# Both install what is missing first (idempotent), into .venv.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# llama.cpp's native build crashes on these CPUs (AMX path): pin the instruction sets, adding
# AVX-512 where /proc/cpuinfo lists it (prompt evaluation 60 -> 88 tokens/s on a 2-core Xeon here,
# docs/results/llm/bench_logic_avx512.md). A change of the sets rebuilds llama-cpp-python once.
CPU_FLAGS := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
cpu_has = $(filter $(1),$(CPU_FLAGS))
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
ifneq ($(and $(call cpu_has,avx512f),$(call cpu_has,avx512cd),$(call cpu_has,avx512bw),$(call cpu_has,avx512dq),$(call cpu_has,avx512vl)),)
LLAMA_CMAKE_ARGS += -DGGML_AVX512=ON $(if $(call cpu_has,avx512_vnni),-DGGML_AVX512_VNNI=ON) \
  $(if $(call cpu_has,avx512vbmi),-DGGML_AVX512_VBMI=ON) $(if $(call cpu_has,avx512_bf16),-DGGML_AVX512_BF16=ON)
endif
LLAMA_CMAKE_ARGS += $(if $(call cpu_has,avx_vnni),-DGGML_AVX_VNNI=ON)
LLAMA_STAMP := $(VENV)/.llama-cpp-$(shell echo '$(LLAMA_CMAKE_ARGS)' | md5sum | cut -c1-10)
STAMP := $(VENV)/.installed

.PHONY: install demo test lint browser corpus clean peers milvus

install: $(STAMP)

# compile llama-cpp-python with the pinned sets; --no-cache-dir because pip's wheel cache ignores CMAKE_ARGS
$(LLAMA_STAMP):
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip uninstall -q -y llama-cpp-python 2>/dev/null || true
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install -q --no-cache-dir llama-cpp-python==0.3.36
	rm -f $(VENV)/.llama-cpp-*
	echo '$(LLAMA_CMAKE_ARGS)' > $@

$(STAMP): pyproject.toml $(LLAMA_STAMP)
	# CPU wheel first, so no dependency can pull a multi-GB CUDA build
	$(BIN)/pip install -q torch==2.13.0
	# docs: PDF/HTML/DOCX/PPTX readers for `index`; mcp: `logicroute mcp`
	$(BIN)/pip install -q -e ".[local,dev,docs,mcp]"
	touch $(STAMP)

demo: install
	$(BIN)/logicroute demo

# The README's test command: the linters, the import contract, then the tests.
test: install lint browser
	$(BIN)/python -m pytest -q

# A Milvus standalone server on 127.0.0.1:$(MILVUS_PORT), data in $(MILVUS_DATA), until Ctrl-C: the
# `milvus` package of [dev] (docs/vector_stores.md). Then: logicroute index ... --store milvus://127.0.0.1:19530
MILVUS_PORT ?= 19530
MILVUS_DATA ?= .milvus-server
milvus: install
	$(BIN)/python -m tests.milvus_server --port $(MILVUS_PORT) --data $(MILVUS_DATA)

# Only the tests need a system package: the serve page's browser test drives Debian's chromium
# through selenium. Installed when we may (root + apt), never by `make demo` or `make install`.
browser:
	command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } || \
	  echo "note: no chromium/chromedriver: the page's browser test will be skipped"

# The peers of `logicroute bench peers`, each in a venv of its own beside the repository (never in
# .venv: hipporag pins torch 2.5.1 and vllm); the pins are the adapters' (pyproject's [peers] extras).
PEERS_VENV ?= ../peers-venv
HIPPORAG_VENV ?= ../peers-venv-hipporag
NANO_VENV ?= ../peers-venv-nano
GRAPHRAG_VENV ?= ../peers-venv-graphrag
peer_pins = $(shell $(BIN)/python -c "import shlex; from training.peers.bench_peers_subprocess import $(1) as A; print(shlex.join(A.requirements))")
peers: install
	test -x $(PEERS_VENV)/bin/python || $(PY) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q $(call peer_pins,LightRAGAdapter)
	test -x $(HIPPORAG_VENV)/bin/python || $(PY) -m venv $(HIPPORAG_VENV)
	$(HIPPORAG_VENV)/bin/pip install -q $(call peer_pins,HippoRAGAdapter)
	test -x $(NANO_VENV)/bin/python || $(PY) -m venv $(NANO_VENV)
	$(NANO_VENV)/bin/pip install -q $(call peer_pins,NanoGraphRAGAdapter)
	test -x $(GRAPHRAG_VENV)/bin/python || $(PY) -m venv $(GRAPHRAG_VENV)
	$(GRAPHRAG_VENV)/bin/pip install -q $(call peer_pins,GraphRAGAdapter)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The corpus of `logicroute bench scale --corpus debian-docs`: seven Debian documentation packages
# (apt-get download, dpkg-deb -x: nothing installed) as Markdown, 100k+ chunks, fetched once into
# $LOGICROUTE_CACHE_DIR/corpora/debian-docs (default ~/.cache/logicroute/...), outside the repository.
corpus: install
	$(BIN)/python -m training.scale.corpus_fetch

clean:
	rm -rf $(VENV)
