# cmake/toolchain-musl.cmake — build libttft against musl libc with the
# musl-gcc wrapper (Debian/Ubuntu: apt-get install musl-tools musl-dev).
#   cmake -S . -B build-musl -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-musl.cmake
# The target is the host's architecture on a different libc: the binaries
# run here directly (the musl loader is /lib/ld-musl-<arch>.so.1), so this
# is not a cross build and ctest needs no emulator.
#
# musl-gcc is a C compiler only (its specs file swaps glibc's headers for
# musl's; there is no musl libstdc++): everything C++ is left out and the
# top-level CMakeLists.txt reads TTFT_MUSL to exclude the tests that need
# C++, Python (the host's CPython is linked against glibc and cannot load
# a musl libttft.so), Prometheus or tmux/ncurses (docs/install.md, "musl").
# On Alpine itself no toolchain file is needed: gcc there targets musl.
set(CMAKE_SYSTEM_NAME Linux)
find_program(TTFT_MUSL_GCC NAMES musl-gcc x86_64-linux-musl-gcc REQUIRED)
set(CMAKE_C_COMPILER ${TTFT_MUSL_GCC})
set(TTFT_MUSL ON CACHE BOOL "Building against musl libc (cmake/toolchain-musl.cmake)")
# The kernel's UAPI headers (linux/, asm/, asm-generic/: Debian's
# linux-libc-dev, Alpine's linux-headers) are libc-independent, but
# musl-gcc's specs hide /usr/include. The tests' seccomp filter
# (tests/deny_membarrier.h) needs them; the library does not (it takes the
# MEMBARRIER_CMD_* constants from musl's <sys/membarrier.h> when
# <linux/membarrier.h> is missing). With TTFT_MUSL_KERNEL_HEADERS=OFF the
# build sees musl's headers only, as on an Alpine without linux-headers:
# .ci/steps.d/65-musl.sh builds the library that way too.
option(TTFT_MUSL_KERNEL_HEADERS "musl-gcc: add the kernel's UAPI headers (after musl's)" ON)
if(TTFT_MUSL_KERNEL_HEADERS)
  execute_process(COMMAND ${TTFT_MUSL_GCC} -dumpmachine OUTPUT_VARIABLE _ttft_triplet
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  # musl-gcc -dumpmachine names the host compiler's glibc triplet, where
  # Debian keeps asm/
  set(_ttft_kh ${CMAKE_BINARY_DIR}/musl-kernel-headers)
  if(NOT EXISTS ${_ttft_kh}/linux AND EXISTS /usr/include/linux/membarrier.h
     AND EXISTS /usr/include/${_ttft_triplet}/asm)
    file(MAKE_DIRECTORY ${_ttft_kh})
    file(CREATE_LINK /usr/include/linux ${_ttft_kh}/linux SYMBOLIC)
    file(CREATE_LINK /usr/include/asm-generic ${_ttft_kh}/asm-generic SYMBOLIC)
    file(CREATE_LINK /usr/include/${_ttft_triplet}/asm ${_ttft_kh}/asm SYMBOLIC)
  endif()
  if(EXISTS ${_ttft_kh}/linux)
    # -idirafter: searched after musl's own headers, so nothing of libc's is replaced
    set(CMAKE_C_FLAGS_INIT "-idirafter ${_ttft_kh}")
  else()
    message(WARNING "TTFT_MUSL_KERNEL_HEADERS: no kernel headers in /usr/include "
                    "(apt-get install linux-libc-dev); the seccomp tests will not build")
  endif()
endif()
# musl's headers only: the host's glibc and its libraries must not be found
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
