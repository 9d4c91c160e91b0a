# Thin wrapper over CMake. `make demo` and `make test` are the Quick start.
BUILD   ?= build
PREFIX  ?= /usr/local
JOBS    ?= 2
CMAKE_ARGS ?=
CTEST_ARGS ?=
DEMO_ARGS ?= --snapshot $(BUILD)/demo.ttfs

.PHONY: all build demo test bench install clean configure

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/examples/ttft-demo $(DEMO_ARGS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

bench:
	cmake -S . -B $(BUILD)-bench -DCMAKE_BUILD_TYPE=Release -DTTFT_BUILD_TESTS=OFF $(CMAKE_ARGS)
	cmake --build $(BUILD)-bench -j $(JOBS) --target ttft-bench
	$(BUILD)-bench/bench/ttft-bench $(BENCH_ARGS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-bench
