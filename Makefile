# The two commands of the README, and a few conveniences.
#   make demo   install deps, build (Release), run the main job on the built-in default
#   make test   install deps, build, run every test (incl. an ASan+UBSan build of the unit tests,
#               a ThreadSanitizer build of the threaded tests and the layer check)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
# What runs under ThreadSanitizer: the three thread domains (kernel thread
# pool, engine loop, HTTP server threads) and the public API's request queue.
# Kernel pool: the float and quantized matmuls, the batched paged attention,
# the bandwidth probe, RTN and GPTQ over a pool (tests of single-threaded
# kernels, such as test_sbatch and test_attn_long, find nothing here and are
# left out). HTTP + engine: the server tests that start `nibble serve`
# (NB_TEST_QUICK=1 trims their random rounds), the CLI's engine commands and
# the load generator against the server. About 3 minutes on 2 cores.
TSAN_UNIT = test_threadpool test_sched test_engine test_lifecycle test_matmul_many test_float_kernels \
            test_paged_attn test_membw test_gptq test_rtn
TSAN_TARGETS = nibble embed_example $(TSAN_UNIT)
empty :=
space := $(empty) $(empty)
TSAN_TESTS = ^(unit\..*\.($(subst $(space),|,$(strip $(TSAN_UNIT))))|integration\.(serve_openai|serve_api|serve_drain|serve_tools|serve_tools_special|serve_structured|generate_cli|engine_cli|bench_serve_nibble|embed))$$
FUZZ_SECONDS ?= 20
FUZZ_TARGETS = fuzz_gguf fuzz_safetensors fuzz_vocab fuzz_openai fuzz_template fuzz_hfconfig fuzz_llama2c fuzz_http fuzz_golden

.PHONY: all deps build demo test test-release test-asan test-tsan test-fuzz check-layers clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

demo: build
	bash scripts/demo.sh $(BUILD)/nibble

test: deps check-layers test-release test-asan test-tsan test-fuzz

# Every #include follows the layer order of docs/design.md.
check-layers:
	bash scripts/check-layers.sh

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit and oracle tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNB_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L 'unit|oracle'

# The threaded tests again under ThreadSanitizer (gcc's; libmicrohttpd and the
# other system libraries are not instrumented: TSan sees their pthread calls
# but not their memory accesses). Every process writes its reports to
# $(TSAN_BUILD)/tsan.<pid> (the server runs in the background of the shell
# tests, so its exit status alone would not tell); any report fails.
# tests/tsan.supp holds suppressions, for third-party code only.
test-tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DNB_TSAN=ON >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TARGETS)
	rm -f $(TSAN_BUILD)/tsan.*
	cd $(TSAN_BUILD) && NB_TEST_QUICK=1 TSAN_OPTIONS="log_path=$(CURDIR)/$(TSAN_BUILD)/tsan suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1" \
	  ctest --output-on-failure -j $(JOBS) -R '$(TSAN_TESTS)'; rc=$$?; \
	if ls $(TSAN_BUILD)/tsan.* >/dev/null 2>&1; then cat $(TSAN_BUILD)/tsan.*; echo "ThreadSanitizer reported the above"; exit 1; fi; \
	exit $$rc

# libFuzzer over every parser of untrusted input (model files, tokenizer
# files, HTTP request bodies), FUZZ_SECONDS each, JOBS targets at a time,
# seeded from tests/fuzz/corpus.
test-fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNB_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(JOBS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
