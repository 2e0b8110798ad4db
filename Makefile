# sandcastle — the two commands a new user needs:
#   make run    install what is missing, build (Release), start the HTTP server on 127.0.0.1:8181
#               (ARGS="--port 9000" keeps HTTP on another port; ARGS=--stdio serves stdio instead)
#   make test   install what is missing, build, run every test suite
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
ARGS ?=
# HTTP unless ARGS picks a transport itself (--stdio, --transport ...).
RUN_TRANSPORT = $(if $(filter --stdio --transport --transport=%,$(ARGS)),,--transport http)

.PHONY: run test deps build build-asan build-tsan build-fuzz unit integration e2e bench fuzz clean format tidy languages-table

# Everything but the server goes to stderr: over stdio, stdout is the MCP channel.
run:
	@$(MAKE) --no-print-directory deps build 1>&2
	@exec ./$(BUILD)/sandcastle $(RUN_TRANSPORT) $(ARGS)

test: deps build build-asan build-tsan
	scripts/run-tests

deps:
	@scripts/install-deps

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSANDCASTLE_BENCH=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# AddressSanitizer + UndefinedBehaviorSanitizer, built by clang with
# libFuzzer's instrumentation: one build serves the unit tests, the kernel
# channel's tests and the fuzz targets (make fuzz).
build-asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
	  -DSANDCASTLE_SANITIZE=ON -DSANDCASTLE_FUZZ=ON -DSANDCASTLE_TESTS=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target unit_tests kernel_tests $(addprefix fuzz_,$(FUZZ_TARGETS))

# clang-tidy (checks in .clang-tidy) over src/; needs only the configured build.
tidy: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSANDCASTLE_BENCH=ON >/dev/null
	@BUILD=$(BUILD) JOBS=$(JOBS) scripts/tidy

# ThreadSanitizer (asserts on; CMakeLists picks -O1 -g1): the unit and
# integration tests.
build-tsan:
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSANDCASTLE_TSAN=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target unit_tests integration_tests

bench: deps build
	bench/run

# The README's table of languages: runs tests/e2e/languages.test.mjs (every
# language, real programs over MCP), then prints the table from what it ran
# (build/languages.json) and puts it into README.md; exits non-zero when a
# check failed.
languages-table: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSANDCASTLE_BENCH=ON >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target sandcastle >&2
	@SANDCASTLE_BIN=$(CURDIR)/$(BUILD)/sandcastle LANGUAGES_JSON=$(BUILD)/languages.json \
	  node --test --test-reporter=dot tests/e2e/languages.test.mjs >&2; rc=$$?; \
	  scripts/languages-table $(BUILD)/languages.json --readme README.md && exit $$rc

# Real coverage-guided fuzzing with clang's libFuzzer, FUZZ_SECONDS per target
# (every tests/fuzz/fuzz_<name>.cc); new inputs land in
# tests/fuzz/corpus/<name>/ (commit the interesting ones). `make test` runs
# each for FUZZ_CI_SECONDS too (scripts/run-tests), without touching the corpus.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.cc,%,$(wildcard tests/fuzz/fuzz_*.cc))
fuzz: deps build-asan
	for t in $(FUZZ_TARGETS); do \
	  ./$(ASAN_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 tests/fuzz/corpus/$$t || exit 1; done

# The fuzz targets live in the sanitizer build.
build-fuzz: build-asan

format:
	clang-format -i $$(git ls-files 'src/*.cc' 'src/*.h' 'tests/*.cc' 'tests/*.h' 'bench/*.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
