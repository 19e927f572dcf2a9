# The two commands of the README, and a few conveniences.
#   make demo   install deps, build (Release), run the main job on the built-in default
#   make test   install deps, build, run every test (incl. an ASan+UBSan build of the unit tests)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
FUZZ_TARGETS = fuzz_gguf fuzz_safetensors fuzz_vocab fuzz_openai fuzz_template fuzz_hfconfig fuzz_llama2c fuzz_http

.PHONY: all deps build demo test test-release test-asan test-fuzz clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

demo: build
	bash scripts/demo.sh $(BUILD)/nibble

test: deps test-release test-asan test-fuzz

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit and oracle tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNB_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L 'unit|oracle'

# libFuzzer over every parser of untrusted input (model files, tokenizer
# files, HTTP request bodies), FUZZ_SECONDS each, seeded from tests/fuzz/corpus.
test-fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNB_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS)
	bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
