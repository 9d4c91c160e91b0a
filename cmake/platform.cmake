# cmake/platform.cmake — what the C library offers, tested at configure
# time rather than guessed from __GLIBC__ (glibc and musl differ; included
# by the top-level CMakeLists.txt). Each result becomes a compile
# definition of the library (TTFT_PLATFORM_DEFINITIONS), 1 or 0:
#   TTFT_HAVE_LINUX_MEMBARRIER_H  <linux/membarrier.h> (the kernel's headers;
#                                 musl-gcc on Debian sees musl's headers only)
#   TTFT_HAVE_SYS_MEMBARRIER_H    <sys/membarrier.h> (musl: the same
#                                 MEMBARRIER_CMD_* constants; we still call
#                                 the raw syscall, not musl's membarrier(),
#                                 which falls back to signals on its own)
#   TTFT_HAVE_PTHREAD_SETNAME_NP  name the endpoint's thread (glibc, musl >= 1.1.16)
#   TTFT_STRERROR_R_CHAR_P        GNU strerror_r (returns char *); else XSI (int)
#   TTFT_HAVE_GETRANDOM           getrandom(2) in <sys/random.h> (glibc >= 2.25, musl >= 1.1.20)
include(CheckIncludeFile)
include(CheckSymbolExists)
include(CheckCSourceCompiles)

set(_ttft_saved_defs "${CMAKE_REQUIRED_DEFINITIONS}")
set(_ttft_saved_libs "${CMAKE_REQUIRED_LIBRARIES}")
set(CMAKE_REQUIRED_DEFINITIONS -D_GNU_SOURCE) # as the library is compiled
check_include_file(linux/membarrier.h TTFT_HAVE_LINUX_MEMBARRIER_H)
check_include_file(sys/membarrier.h TTFT_HAVE_SYS_MEMBARRIER_H)
if(TTFT_HAVE_PTHREADS)
  set(CMAKE_REQUIRED_LIBRARIES Threads::Threads)
  check_symbol_exists(pthread_setname_np pthread.h TTFT_HAVE_PTHREAD_SETNAME_NP)
endif()
check_c_source_compiles("
#include <string.h>
int main(void) {
  char b[64];
  /* a type test: an int assigned to a char * is only a warning */
  _Static_assert(__builtin_types_compatible_p(__typeof__(strerror_r(1, b, sizeof b)), char *), \"GNU\");
  return strerror_r(1, b, sizeof b) == 0;
}"
  TTFT_STRERROR_R_CHAR_P)
check_symbol_exists(getrandom sys/random.h TTFT_HAVE_GETRANDOM)
set(CMAKE_REQUIRED_DEFINITIONS "${_ttft_saved_defs}")
set(CMAKE_REQUIRED_LIBRARIES "${_ttft_saved_libs}")

set(TTFT_PLATFORM_DEFINITIONS "")
foreach(_v TTFT_HAVE_LINUX_MEMBARRIER_H TTFT_HAVE_SYS_MEMBARRIER_H TTFT_HAVE_PTHREAD_SETNAME_NP
           TTFT_STRERROR_R_CHAR_P TTFT_HAVE_GETRANDOM)
  if(${_v})
    list(APPEND TTFT_PLATFORM_DEFINITIONS ${_v}=1)
  else()
    list(APPEND TTFT_PLATFORM_DEFINITIONS ${_v}=0)
  endif()
endforeach()
