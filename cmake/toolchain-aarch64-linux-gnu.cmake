# Cross-compiling libttft for aarch64 Linux (glibc) with Debian's cross
# toolchain, the tests run under qemu-user (docs/install.md, "Cross-building
# for aarch64"; .ci/steps.d/65-aarch64.sh):
#   apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
#   cmake --build build-aarch64 -j2 && ctest --test-dir build-aarch64
# Overridable: TTFT_CROSS_PREFIX (the compilers' prefix), TTFT_CROSS_SYSROOT
# (the target's libc, headers and libraries), TTFT_QEMU (the emulator).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED TTFT_CROSS_PREFIX)
  set(TTFT_CROSS_PREFIX aarch64-linux-gnu-)
endif()
if(NOT DEFINED TTFT_CROSS_SYSROOT)
  set(TTFT_CROSS_SYSROOT /usr/aarch64-linux-gnu)
endif()
if(NOT DEFINED TTFT_QEMU)
  set(TTFT_QEMU qemu-aarch64)
endif()
# the variables above reach try_compile's nested projects too
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TTFT_CROSS_PREFIX TTFT_CROSS_SYSROOT TTFT_QEMU)

set(CMAKE_C_COMPILER ${TTFT_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${TTFT_CROSS_PREFIX}g++)
set(CMAKE_AR ${TTFT_CROSS_PREFIX}ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${TTFT_CROSS_PREFIX}ranlib CACHE FILEPATH "")
set(CMAKE_STRIP ${TTFT_CROSS_PREFIX}strip CACHE FILEPATH "")
set(CMAKE_NM ${TTFT_CROSS_PREFIX}nm CACHE FILEPATH "")
set(CMAKE_OBJCOPY ${TTFT_CROSS_PREFIX}objcopy CACHE FILEPATH "")
set(CMAKE_READELF ${TTFT_CROSS_PREFIX}readelf CACHE FILEPATH "")

# headers and libraries from the target's tree (and Debian's multiarch
# arm64 directories, where an installed libfoo-dev:arm64 puts them);
# programs (python3, sh, promtool) from the host
set(CMAKE_FIND_ROOT_PATH ${TTFT_CROSS_SYSROOT})
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# every test program runs through this (add_test(COMMAND <target>) gets it
# from CMake; the scripts that run built programs by path read it from the
# environment variable TTFT_EMULATOR that tests/CMakeLists.txt sets);
# -L: the target's dynamic loader and libraries
set(CMAKE_CROSSCOMPILING_EMULATOR ${TTFT_QEMU} -L ${TTFT_CROSS_SYSROOT})
