# Wraps CMake, as DuckDB's does: `make run` and `make test` are all a newcomer needs.
BUILD_DIR ?= build/release
JOBS ?= $(shell nproc)
SCENARIO ?= configs/scenarios/default.json

FUZZ_SECONDS ?= 60

.PHONY: all deps build run test bench figures debug sanitize fuzz clean

all: build

deps:
	@bash tools/install_deps.sh

$(BUILD_DIR)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	$(BUILD_DIR)/stepsim run $(SCENARIO)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# Speed and memory on fixed scenarios from 64 to 16,384 GPUs and a 1,024-point sweep (issue 8);
# the README keeps the latest table.
bench: build
	$(BUILD_DIR)/stepsim_bench --markdown $(BUILD_DIR)/bench.md

# The measured figures of README.md (the default report, the accuracy table; the benchmark table
# with BENCH=1), regenerated in place from this build.
figures: build
	bash tools/figures/readme.sh $(BUILD_DIR) $(if $(BENCH),--bench)

debug: deps
	cmake -S . -B build/debug -DCMAKE_BUILD_TYPE=Debug && cmake --build build/debug -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer; any report fails the test
# that caused it (the stepsim children the tests start inherit the options).
SANITIZER_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# -O1 -g1 (line tables only): the sanitizers' usual level, with reports that still name files and
# lines, at a fraction of a full debug build's compile time on CI's two cores.
sanitize: deps
	cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
	  -DSTEPSIM_SANITIZE=ON
	cmake --build build/sanitize -j $(JOBS)
	cd build/sanitize && $(SANITIZER_ENV) ctest --output-on-failure -j $(JOBS)

# libFuzzer on each input a user hands stepsim (tests/fuzz/README.md): FUZZ_TARGET=scenario (the
# parser, validation, memory model and lowering), sweep (sweep files), results (sweep journals
# and shards) or hf_config (HuggingFace configs); FUZZ_TARGET=all runs each in turn.
# clang and its runtime are installed here only, not by the default deps.
FUZZ_TARGET ?= scenario
FUZZ_SEEDS_scenario  = configs/scenarios tests/bad_inputs
FUZZ_SEEDS_sweep     = configs/sweeps
FUZZ_SEEDS_results   = tests/fuzz/results_seeds
FUZZ_SEEDS_hf_config = configs/models tests/bad_inputs/hf_configs
FUZZ_ALL = scenario sweep results hf_config

fuzz: deps
	@bash tools/install_deps.sh clang libclang-rt-14-dev
	CC=clang CXX=clang++ cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPSIM_FUZZ=ON -DBUILD_TESTING=OFF
	@for t in $(if $(filter all,$(FUZZ_TARGET)),$(FUZZ_ALL),$(FUZZ_TARGET)); do \
	  cmake --build build/fuzz -j $(JOBS) --target stepsim_fuzz_$$t || exit 1; \
	  mkdir -p build/fuzz/corpus/$$t build/fuzz/findings/$$t; \
	  seeds="$(FUZZ_SEEDS_scenario)"; dict=""; \
	  case $$t in sweep) seeds="$(FUZZ_SEEDS_sweep)";; results) seeds="$(FUZZ_SEEDS_results)";; \
	    hf_config) seeds="$(FUZZ_SEEDS_hf_config)";; scenario) dict="-dict=tests/fuzz/scenario.dict";; esac; \
	  build/fuzz/tests/fuzz/stepsim_fuzz_$$t build/fuzz/corpus/$$t $$seeds $$dict -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build/fuzz/findings/$$t/ || exit 1; \
	done

clean:
	rm -rf build
