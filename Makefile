# Wraps CMake, as DuckDB's does: `make run` and `make test` are all a newcomer needs.
BUILD_DIR ?= build/release
JOBS ?= $(shell nproc)
SCENARIO ?= configs/scenarios/default.json

.PHONY: all deps build run test debug sanitize clean

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

debug: deps
	cmake -S . -B build/debug -DCMAKE_BUILD_TYPE=Debug && cmake --build build/debug -j $(JOBS)

sanitize: deps
	cmake -S . -B build/sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEPSIM_SANITIZE=ON
	cmake --build build/sanitize -j $(JOBS)
	cd build/sanitize && ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf build
