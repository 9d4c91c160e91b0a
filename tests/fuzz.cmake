# tests/fuzz.cmake — the fuzz targets in tests/fuzz/.
#
# Always: each target is linked with a small replay driver (replay_main.c,
# no libFuzzer needed, any compiler) against ttft_static — the static link
# reaches the hidden ttft__ internals such as the HTTP parser — and ctest
# runs every committed corpus file through it (tests fuzz_<t>_corpus,
# label "fuzz"). A reproducer saved into tests/fuzz/corpus/<t>/ by a fuzzing
# run is therefore a regression test from then on.
#
# With -DTTFT_FUZZ=ON (clang only): the libFuzzer binaries fuzz_<t>, built
# with -fsanitize=fuzzer,address,undefined against ttft_fuzzcore, a copy of
# ttft_static's sources compiled with coverage instrumentation and the same
# sanitizers. .ci/steps.d/30-fuzz.sh builds and runs them.
# (the option TTFT_FUZZ is declared in the top-level CMakeLists.txt)

set(TTFT_FUZZ_TARGETS fuzz_api fuzz_decode fuzz_segment)
if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
  list(APPEND TTFT_FUZZ_TARGETS fuzz_http)
endif()
set(_fz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

foreach(t ${TTFT_FUZZ_TARGETS})
  add_executable(${t}_replay ${_fz_dir}/${t}.c ${_fz_dir}/replay_main.c)
  target_link_libraries(${t}_replay PRIVATE ttft_static m)
  target_include_directories(${t}_replay PRIVATE ${_fz_dir} ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(${t}_replay PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(${t}_replay PRIVATE _GNU_SOURCE)
  add_test(NAME ${t}_corpus COMMAND ${t}_replay ${_fz_dir}/corpus/${t})
  set_tests_properties(${t}_corpus PROPERTIES LABELS "fuzz" TIMEOUT 600)
endforeach()

if(TTFT_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TTFT_FUZZ=ON needs clang (libFuzzer): configure with CC=clang")
  endif()
  if(TTFT_SANITIZE MATCHES "thread|memory")
    message(FATAL_ERROR "TTFT_FUZZ=ON builds with address,undefined; it cannot be combined with TTFT_SANITIZE=${TTFT_SANITIZE}")
  endif()
  set(_fz_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  # ttft_static's sources, definitions and include directories, compiled
  # again with coverage for the fuzzer
  get_target_property(_fz_src_rel ttft_static SOURCES)
  # the sources are listed relative to the top-level directory
  set(_fz_src "")
  foreach(f ${_fz_src_rel})
    if(IS_ABSOLUTE "${f}")
      list(APPEND _fz_src "${f}")
    else()
      list(APPEND _fz_src "${PROJECT_SOURCE_DIR}/${f}")
    endif()
  endforeach()
  get_target_property(_fz_defs ttft_static COMPILE_DEFINITIONS)
  get_target_property(_fz_incs ttft_static INCLUDE_DIRECTORIES)
  # Two instrumented copies: with comparison tracing (the parsers, where it
  # finds magic values) and without (fuzz_api, whose cost is dominated by
  # tracing the histogram loops: about 4x more executions per second).
  foreach(core ttft_fuzzcore ttft_fuzzcore_nocmp)
    add_library(${core} STATIC ${_fz_src})
    target_compile_definitions(${core} PRIVATE ${_fz_defs})
    target_include_directories(${core} PUBLIC ${_fz_incs})
    target_compile_options(${core} PRIVATE ${TTFT_WARNINGS} -fsanitize=fuzzer-no-link ${_fz_san})
    if(TTFT_HAVE_PTHREADS)
      target_link_libraries(${core} INTERFACE Threads::Threads)
    endif()
    target_link_libraries(${core} INTERFACE m)
  endforeach()
  target_compile_options(ttft_fuzzcore_nocmp PRIVATE -fno-sanitize-coverage=trace-cmp)
  foreach(t ${TTFT_FUZZ_TARGETS})
    add_executable(${t} ${_fz_dir}/${t}.c)
    if(t STREQUAL "fuzz_api")
      target_link_libraries(${t} PRIVATE ttft_fuzzcore_nocmp)
      target_compile_options(${t} PRIVATE -fno-sanitize-coverage=trace-cmp)
    else()
      target_link_libraries(${t} PRIVATE ttft_fuzzcore)
    endif()
    target_include_directories(${t} PRIVATE ${_fz_dir} ${PROJECT_SOURCE_DIR}/src)
    target_compile_definitions(${t} PRIVATE _GNU_SOURCE TTFT_FUZZ_LIBFUZZER)
    target_compile_options(${t} PRIVATE ${TTFT_WARNINGS} -fsanitize=fuzzer ${_fz_san})
    target_link_options(${t} PRIVATE -fsanitize=fuzzer ${_fz_san})
  endforeach()
endif()
