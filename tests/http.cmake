# tests/http.cmake — wiring for the endpoint's tests (tests/test_http*.c).
#
# 1. Tell each test whether the library it links has the endpoint, so that
#    a build without it checks the TTFT_ENOTSUP entry points instead; the
#    static variants may also use the hidden internals of src/report/http.h
#    (TTFT_TEST_INTERNALS=1), which the shared library does not export.
# 2. test_http_valgrind: the endpoint test under valgrind (leaks, invalid
#    reads, fds left open). Missing valgrind fails under CI.
set(_ttft_http_built 0)
if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
  set(_ttft_http_built 1)
endif()
# test_alloc_fail injects allocation failures into ttft_http_start too.
foreach(t test_http test_http_abuse test_http_fork test_http_gather test_alloc_fail)
  foreach(kind shared static)
    if(TARGET ${t}_${kind})
      target_compile_definitions(${t}_${kind} PRIVATE TTFT_TEST_HTTP_BUILT=${_ttft_http_built})
    endif()
  endforeach()
endforeach()
foreach(t test_http test_http_abuse test_http_fork)
  if(TARGET ${t}_static)
    target_compile_definitions(${t}_static PRIVATE TTFT_TEST_INTERNALS=1)
  endif()
endforeach()
# Labels: "http" for all four; "concurrent" (run under TSan by
# .ci/steps.d/20-sanitizers.sh) for the two whose point is threads: the
# server thread beside client threads (test_http_gather: concurrent
# scrapers of a gather), and forks of a process that has one.
# Each program's ctest tests (one per TEST, tests/CMakeLists.txt) are in
# TTFT_CTESTS_<program>_<kind>.
foreach(kind shared static)
  foreach(t test_http test_http_abuse test_http_fork test_http_gather)
    if(TTFT_CTESTS_${t}_${kind})
      set(_l "unit;${kind};http;${t}")
      if(NOT t STREQUAL "test_http_abuse")
        set(_l "${_l};concurrent")
      endif()
      set_tests_properties(${TTFT_CTESTS_${t}_${kind}} PROPERTIES TIMEOUT 300 LABELS "${_l}")
    endif()
  endforeach()
endforeach()

# (musl: valgrind cannot replace malloc in a statically linked musl
# program, so its leak check would see nothing; not registered)
if(TARGET test_http_shared AND NOT TTFT_SANITIZE AND NOT TTFT_MUSL)
  find_program(TTFT_VALGRIND valgrind)
  if(TTFT_VALGRIND)
    add_test(NAME test_http_valgrind
             COMMAND ${TTFT_VALGRIND} --quiet --error-exitcode=99 --leak-check=full
                     --show-leak-kinds=definite,indirect,possible --errors-for-leak-kinds=definite,indirect,possible
                     --track-fds=yes $<TARGET_FILE:test_http_static>)
    set_tests_properties(test_http_valgrind PROPERTIES LABELS "valgrind" TIMEOUT 600)
  elseif(DEFINED ENV{CI})
    add_test(NAME test_http_valgrind
             COMMAND sh -c "echo 'valgrind is missing (CI needs it: .ci/packages.d/http.txt)'; exit 1")
  endif()
endif()

# tests/http/abuse.py's C half: not a test, a tool that measures the
# endpoint under abuse (docs/http.md has its figures). Public API only.
if(_ttft_http_built AND TARGET ttft_static)
  add_executable(http_abuse_tool ${CMAKE_CURRENT_SOURCE_DIR}/http/abuse_tool.c)
  target_link_libraries(http_abuse_tool PRIVATE ttft_static)
  target_compile_options(http_abuse_tool PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(http_abuse_tool PRIVATE _GNU_SOURCE)
  if(TTFT_HAVE_PTHREADS)
    target_link_libraries(http_abuse_tool PRIVATE Threads::Threads)
  endif()
  target_link_libraries(http_abuse_tool PRIVATE m)
endif()
