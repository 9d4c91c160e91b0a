# Thin wrapper over CMake. `make demo` and `make test` are the Quick start;
# docs/install.md has install, custom prefixes and `make deb`.
#   make demo                  build the demo, ttft-report and ttft-top only, run the demo
#   make test                  build everything, run every test
#   make install PREFIX=DIR    install (DIR may be relative: it is made absolute)
#   make deb                   Debian packages (build-deb/*.deb: libttft1, libttft-dev, ttft-tools, python3-ttft)
#   make deb ARCH=arm64        the same for arm64, cross-built (build-deb-arm64/*.deb; docs/install.md)
#   make bench                 the benchmarks, in a Release build
#   make static-tools          ttft-report and ttft-exporter linked fully static against musl
#                              ($(BUILD)-static/tools/; needs musl-gcc: docs/install.md, "musl")
# The Makefile works from any directory (make -f path/to/Makefile ...);
# BUILD and PREFIX are relative to where make runs.
SRC     := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
BUILD   ?= build
PREFIX  ?= /usr/local
DESTDIR ?=
JOBS    ?= 2
CMAKE_ARGS ?=
CTEST_ARGS ?=
DEMO_ARGS ?= --snapshot $(BUILD)/demo.ttfs
# ARCH: the Debian architecture `make deb` builds for; empty = this
# machine's. arm64 is cross-built with cmake/toolchain-aarch64-linux-gnu.cmake
# (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) into its own directory.
ARCH    ?=
DEB_TOOLCHAIN_arm64 := $(SRC)/cmake/toolchain-aarch64-linux-gnu.cmake
DEB_BUILD ?= $(BUILD)-deb$(if $(ARCH),-$(ARCH))

# what `make demo` runs, and nothing else: a first run does not wait for
# the test suite, the benchmarks or the C++ checks
DEMO_TARGETS := ttft-demo ttft-report $(if $(wildcard /usr/include/ncurses.h /usr/include/curses.h),ttft-top)
# what `make install` installs (the Python package is copied, not built;
# ttft-tools: ttft-report, ttft-exporter and ttft-top, those this build has)
INSTALL_TARGETS := ttft_shared ttft_static ttft-tools

.PHONY: all build demo test bench install deb clean configure static-tools

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S $(SRC) -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(DEMO_TARGETS)
	$(BUILD)/examples/ttft-demo $(DEMO_ARGS)

# The verdict is the last line: ctest's own summary is followed by its
# label times and the failed tests' list, and a reader looks at the end.
test: build
	@{ ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_ARGS); echo $$? >$(BUILD)/ctest-rc.txt; } \
	  | tee $(BUILD)/ctest-output.txt
	@rc=$$(cat $(BUILD)/ctest-rc.txt); \
	summary=$$(grep -E '^[0-9]+% tests passed' $(BUILD)/ctest-output.txt | tail -n1); \
	if [ "$$rc" = 0 ]; then \
	  echo "make test: PASSED ($${summary:-no tests ran})"; \
	else \
	  failed=$$(sed -n 's/^[0-9]*://p' $(BUILD)/Testing/Temporary/LastTestsFailed.log 2>/dev/null | tr '\n' ' '); \
	  echo "make test: FAILED ($${summary:-ctest exit $$rc}): $$failed"; \
	  echo "  rerun one: ctest --test-dir $(BUILD) --output-on-failure -R <name>"; \
	fi; \
	exit $$rc

bench:
	cmake -S $(SRC) -B $(BUILD)-bench -DCMAKE_BUILD_TYPE=Release -DTTFT_BUILD_TESTS=OFF $(CMAKE_ARGS)
	cmake --build $(BUILD)-bench -j $(JOBS) --target ttft-bench
	$(BUILD)-bench/bench/ttft-bench $(BENCH_ARGS)

# cmake --install records the prefix (ttft.pc is relocatable, but the
# Python package writes down where the library went): hand it an absolute
# path, whatever PREFIX was given as.
install: configure
	cmake --build $(BUILD) -j $(JOBS) --target $(INSTALL_TARGETS)
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(abspath $(PREFIX))"

# A .deb of what `make install` installs, for /usr: its own build
# directory, because the prefix decides the library directory
# (lib/<multiarch>) and Debian's Python reads /usr/lib/python3/dist-packages.
# Four packages, as Debian splits a library (docs/install.md): libttft1,
# libttft-dev, ttft-tools, python3-ttft. Compiled with Debian's hardening
# flags (dpkg-buildflags: stack protector, _FORTIFY_SOURCE, relro) when
# dpkg-dev is there — those of ARCH (DEB_HOST_ARCH=arm64: the flags for
# arm64, not this machine's). The cross packages' libc6 dependency comes
# from the cross libc's shlibs (CMakeLists.txt, the package part).
DEB_ENV = $(if $(ARCH),DEB_HOST_ARCH=$(ARCH))
DEB_FLAGS = $(shell command -v dpkg-buildflags >/dev/null 2>&1 && export $(DEB_ENV) && \
  echo "-DCMAKE_C_FLAGS='$$(dpkg-buildflags --get CFLAGS) $$(dpkg-buildflags --get CPPFLAGS)'" \
       "-DCMAKE_SHARED_LINKER_FLAGS='$$(dpkg-buildflags --get LDFLAGS) -Wl,-z,now'" \
       "-DCMAKE_EXE_LINKER_FLAGS='$$(dpkg-buildflags --get LDFLAGS) -Wl,-z,now'")
# (GNUInstallDirs picks lib/<multiarch> for /usr only in native builds:
# the cross build is told, from dpkg-architecture)
DEB_CROSS = $(if $(ARCH),$(if $(DEB_TOOLCHAIN_$(ARCH)),-DCMAKE_TOOLCHAIN_FILE=$(DEB_TOOLCHAIN_$(ARCH)) \
  -DCMAKE_INSTALL_LIBDIR=lib/$(shell dpkg-architecture -a$(ARCH) -qDEB_HOST_MULTIARCH 2>/dev/null),\
  $(error make deb ARCH=$(ARCH): no toolchain file for it; ARCH=arm64 is the one there is)))
deb:
	rm -f $(DEB_BUILD)/*.deb
	cmake -S $(SRC) -B $(DEB_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
	  -DTTFT_BUILD_TESTS=OFF -DTTFT_BUILD_BENCH=OFF -DTTFT_BUILD_EXAMPLES=OFF -DTTFT_DEB_DOCS=ON \
	  -DTTFT_PYTHON_INSTALL_DIR=lib/python3/dist-packages $(DEB_CROSS) $(DEB_FLAGS) $(CMAKE_ARGS)
	cmake --build $(DEB_BUILD) -j $(JOBS)
	cd $(DEB_BUILD) && $(DEB_ENV) cpack -G DEB
	@for f in $(DEB_BUILD)/*.deb; do echo "package: $$f"; done

# Release artefacts that run on any x86-64 (or aarch64, built there) Linux,
# glibc or musl, with no library beside them: the tools linked statically
# against musl (cmake/toolchain-musl.cmake). ttft-top is not among them:
# it needs ncurses, and there is no musl ncurses to link here (Debian
# packages none); on Alpine, `apk add ncurses-static` would provide one.
# tests/tools/check_static.sh checks the result (CI: .ci/steps.d/65-musl.sh).
STATIC_BUILD ?= $(BUILD)-static
STATIC_TOOLS := ttft-report ttft-exporter
static-tools:
	cmake -S $(SRC) -B $(STATIC_BUILD) -DCMAKE_TOOLCHAIN_FILE=$(SRC)/cmake/toolchain-musl.cmake \
	  -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS=-static -DTTFT_BUILD_TESTS=OFF \
	  -DTTFT_BUILD_BENCH=OFF -DTTFT_BUILD_EXAMPLES=ON -DTTFT_INSTALL_PYTHON=OFF $(CMAKE_ARGS)
	cmake --build $(STATIC_BUILD) -j $(JOBS) --target $(STATIC_TOOLS) ttft-demo
	@for t in $(STATIC_TOOLS); do strip -o $(STATIC_BUILD)/$$t $(STATIC_BUILD)/tools/$$t; \
	  echo "static: $(STATIC_BUILD)/$$t ($$(wc -c <$(STATIC_BUILD)/$$t) bytes)"; done

clean:
	rm -rf $(BUILD) $(BUILD)-bench $(DEB_BUILD) $(BUILD)-deb-arm64 $(BUILD)-static
