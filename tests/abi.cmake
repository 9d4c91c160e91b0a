# tests/abi.cmake — the ABI other runtimes bind (included by tests/CMakeLists.txt).
#   abi_symbols           exported symbols == TTFT_API in ttft.h == tests/abi/symbols.txt;
#                         SONAME = libttft.so.<major>; libttft.a defines only ttft_* globals;
#                         every struct starts with struct_size (or is listed frozen);
#                         enum constants in tests/abi/enums.txt unchanged (enums only grow)
#   abi_symbols_selftest  the checker catches each kind of tampering it claims to
#   abi_layout            tests/abi/layout.c builds and prints the mirrored structs' layout
#   abi_struct_size.<test>.{shared,static}  struct_size at offset 0, set by the init
#                         functions, and a wrong struct_size rejected where documented
#                         (abi/test_struct_size.c, written with task.h: one ctest test
#                         per TEST, run alone as `abi_struct_size_<kind> <test>`)
# The checker needs python3 and binutils (nm, readelf): both are CI packages.

find_program(TTFT_PYTHON3 NAMES python3)
find_program(TTFT_NM NAMES nm)
find_program(TTFT_READELF NAMES readelf)
if(NOT TTFT_PYTHON3 OR NOT TTFT_NM OR NOT TTFT_READELF)
  # No silent skip: a test that says what is missing and fails.
  add_test(NAME abi_symbols COMMAND ${CMAKE_COMMAND} -E echo
    "FAIL: abi_symbols needs python3, nm and readelf (found: '${TTFT_PYTHON3}' '${TTFT_NM}' '${TTFT_READELF}')")
  set_tests_properties(abi_symbols PROPERTIES FAIL_REGULAR_EXPRESSION "FAIL:" LABELS abi)
else()
  set(TTFT_ABI_ARGS
    --header ${PROJECT_SOURCE_DIR}/include/ttft.h
    --symbols ${CMAKE_CURRENT_SOURCE_DIR}/abi/symbols.txt
    --enums ${CMAKE_CURRENT_SOURCE_DIR}/abi/enums.txt
    --shared $<TARGET_FILE:ttft_shared>
    --static $<TARGET_FILE:ttft_static>
    --nm ${TTFT_NM} --readelf ${TTFT_READELF})
  add_test(NAME abi_symbols COMMAND ${TTFT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/abi/check_abi.py ${TTFT_ABI_ARGS})
  add_test(NAME abi_symbols_selftest
    COMMAND ${TTFT_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/abi/check_abi.py ${TTFT_ABI_ARGS} --selftest)
  set_tests_properties(abi_symbols abi_symbols_selftest PROPERTIES LABELS abi TIMEOUT 120)
endif()

# the test names are read from the source (as tests/CMakeLists.txt does for
# tests/test_*.c): a TEST added or renamed there re-runs CMake
set(TTFT_ABI_STRUCT_SIZE_SRC ${CMAKE_CURRENT_SOURCE_DIR}/abi/test_struct_size.c)
file(STRINGS ${TTFT_ABI_STRUCT_SIZE_SRC} _abi_tu_tests REGEX "^TEST\\([A-Za-z0-9_]+\\)")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TTFT_ABI_STRUCT_SIZE_SRC})
foreach(kind shared static)
  add_executable(abi_struct_size_${kind} ${TTFT_ABI_STRUCT_SIZE_SRC})
  target_link_libraries(abi_struct_size_${kind} PRIVATE ttft_${kind})
  target_include_directories(abi_struct_size_${kind} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(abi_struct_size_${kind} PRIVATE ${TTFT_WARNINGS})
  if(TTFT_HAVE_PTHREADS)
    target_link_libraries(abi_struct_size_${kind} PRIVATE Threads::Threads)
  endif()
  target_link_libraries(abi_struct_size_${kind} PRIVATE m)
  set(_abi_ctests "")
  foreach(line ${_abi_tu_tests})
    string(REGEX REPLACE "^TEST\\(([A-Za-z0-9_]+)\\).*" "\\1" t "${line}")
    add_test(NAME abi_struct_size.${t}.${kind} COMMAND abi_struct_size_${kind} ${t})
    list(APPEND _abi_ctests abi_struct_size.${t}.${kind})
  endforeach()
  set_tests_properties(${_abi_ctests} PROPERTIES LABELS "abi;${kind}" TIMEOUT 120)
endforeach()

# abi_layout: tests/abi/layout.c prints the size, alignment and field
# offsets of every struct the Rust and Go bindings mirror, as the compiler
# sees ttft.h. The bindings' own tests (.ci/steps.d/70-bindings.sh) compare
# it with their declarations; here it is built with the project's warnings
# and run, so a header change that breaks the program itself fails ctest.
add_executable(abi_layout ${CMAKE_CURRENT_SOURCE_DIR}/abi/layout.c)
target_include_directories(abi_layout PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_options(abi_layout PRIVATE ${TTFT_WARNINGS})
add_test(NAME abi_layout COMMAND abi_layout)
set_tests_properties(abi_layout PROPERTIES LABELS abi TIMEOUT 60
  PASS_REGULAR_EXPRESSION "size ttft_config [0-9]+\nalign ttft_config [0-9]+\noffset ttft_config struct_size 0\n")
