# ttft_runner(<var> <name> <program>): the command a test script runs for a
# program this build made. Natively that is <program> itself. In a cross
# build (cmake/toolchain-aarch64-linux-gnu.cmake) ctest runs the programs
# of add_test(COMMAND <target>) through CMAKE_CROSSCOMPILING_EMULATOR, but
# not those a shell or Python script runs by path: <var> is then a wrapper,
# <build>/emulated/<name>, that execs the emulator on <program> (exec: the
# script's pid, signals and exit status are the program's). <program> may
# be a generator expression ($<TARGET_FILE:ttft-report>) or a plain path.
# TTFT_EMULATOR (a string, empty natively) is the emulator's command line,
# for the scripts that compile and run programs of their own (tests/cpp).
set(TTFT_EMULATOR "")
if(CMAKE_CROSSCOMPILING AND CMAKE_CROSSCOMPILING_EMULATOR)
  if(CMAKE_VERSION VERSION_LESS 3.20)
    message(FATAL_ERROR "a cross build with an emulator needs CMake >= 3.20 (file(GENERATE ... FILE_PERMISSIONS))")
  endif()
  list(JOIN CMAKE_CROSSCOMPILING_EMULATOR " " TTFT_EMULATOR)
endif()

function(ttft_runner var name program)
  if(NOT TTFT_EMULATOR)
    set(${var} "${program}" PARENT_SCOPE)
    return()
  endif()
  set(_w ${CMAKE_BINARY_DIR}/emulated/${name})
  # one wrapper per name, however many tests ask for it
  get_property(_done GLOBAL PROPERTY TTFT_RUNNERS)
  if(name IN_LIST _done)
    set(${var} ${_w} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL APPEND PROPERTY TTFT_RUNNERS ${name})
  set(_q "")
  foreach(_a IN LISTS CMAKE_CROSSCOMPILING_EMULATOR)
    string(APPEND _q "'${_a}' ")
  endforeach()
  file(GENERATE OUTPUT ${_w}
       CONTENT "#!/bin/sh\n# written by CMake (cmake/TtftRunner.cmake): ${name} under the emulator\nexec ${_q}'${program}' \"$@\"\n"
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  set(${var} ${_w} PARENT_SCOPE)
endfunction()

# Under an emulator every test program runs several times slower (qemu-user
# translates each instruction: 5-15x for the CPU-bound tests here), so the
# tests' TIMEOUTs, written for native runs, are multiplied by
# TTFT_TEST_TIMEOUT_SCALE (4 under an emulator, else 1). They stay safety
# nets: no test asserts a time. ttft_scale_test_timeouts() applies it to
# the tests of the calling directory, at its end.
if(TTFT_EMULATOR)
  set(_ttft_scale 4)
else()
  set(_ttft_scale 1)
endif()
set(TTFT_TEST_TIMEOUT_SCALE ${_ttft_scale} CACHE STRING
    "Multiply every test's TIMEOUT by this (4 under an emulator)")
function(ttft_scale_test_timeouts)
  if(TTFT_TEST_TIMEOUT_SCALE EQUAL 1)
    return()
  endif()
  get_property(_tests DIRECTORY PROPERTY TESTS)
  foreach(_t IN LISTS _tests)
    get_test_property(${_t} TIMEOUT _to)
    if(NOT _to)
      set(_to 1500) # ctest's default
    endif()
    math(EXPR _to "${_to} * ${TTFT_TEST_TIMEOUT_SCALE}")
    set_tests_properties(${_t} PROPERTIES TIMEOUT ${_to})
  endforeach()
endfunction()
