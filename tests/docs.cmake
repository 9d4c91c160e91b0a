# tests/docs.cmake — every C, C++ and Python code sample of README.md and
# docs/*.md builds and runs as written (tests/docs/check_samples.py; its
# header documents the markers for fragments, wrappers and compile-only
# samples). Labelled python and cpp as well: it loads libttft into Python
# and compiles C++ outside CMake's flags, which the sanitizer builds skip.
if(TTFT_MUSL) # the samples run in the host's CPython and C++ (glibc)
  message(STATUS "musl: docs_samples not registered (Python and C++ samples: the host's glibc CPython cannot load a musl libttft.so)")
  return()
endif()
find_program(TTFT_DOCS_PYTHON NAMES python3)
find_program(TTFT_DOCS_CXX NAMES g++ c++)
if(NOT TTFT_DOCS_PYTHON)
  set(TTFT_DOCS_PYTHON python3) # the test then fails (CI) or skips, loudly
endif()
if(NOT TTFT_DOCS_CXX)
  set(TTFT_DOCS_CXX g++)
endif()
add_test(NAME docs_samples
         COMMAND ${TTFT_DOCS_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_samples.py
                 --root ${PROJECT_SOURCE_DIR} --lib $<TARGET_FILE:ttft_shared>
                 --out ${CMAKE_CURRENT_BINARY_DIR}/docs_samples
                 --cc ${CMAKE_C_COMPILER} --cxx ${TTFT_DOCS_CXX} --python ${TTFT_DOCS_PYTHON})
set_tests_properties(docs_samples PROPERTIES LABELS "docs;python;cpp" TIMEOUT 600
                     SKIP_RETURN_CODE 77)
