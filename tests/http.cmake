# tests/http.cmake — wiring for tests/test_http.c.
#
# 1. Tell test_http whether the library it links has the endpoint, so that
#    a build without it checks the TTFT_ENOTSUP entry points instead.
# 2. test_http_valgrind: the endpoint test under valgrind (leaks, invalid
#    reads, fds left open). Missing valgrind fails under CI.
if(TARGET test_http_shared)
  set(_ttft_http_built 0)
  if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
    set(_ttft_http_built 1)
  endif()
  foreach(kind shared static)
    target_compile_definitions(test_http_${kind} PRIVATE TTFT_TEST_HTTP_BUILT=${_ttft_http_built})
  endforeach()

  if(NOT TTFT_SANITIZE)
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
endif()
