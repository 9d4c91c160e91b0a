# tests/cpp.cmake — C++ and header-compile tests (included by tests/CMakeLists.txt).
#
# The project is C-only, so these tests call the compilers directly through
# tests/cpp/run_compiler.sh: each test compiles one source with one compiler
# and standard, links the built library, and runs the program. A missing
# compiler fails the test when CI is set (ctest shows it as Skipped
# otherwise). Tests:
#   cpp_hpp_<cxx>_<std>_<lib>  tests/cpp/test_hpp.cpp (ttft.hpp), g++ and clang++,
#                              C++17 and C++20, shared lib; C++17 also static
#   cpp_header_c_<cc>_<std>    ttft.h as strict C99 and C11, gcc and clang
#   cpp_header_noshort_<cc>    TTFT_NO_SHORT_NAMES frees token_emitted/stream_end
#   cpp_header_cxx_<cxx>_<std> a C++ TU including only ttft.h (C++11 and C++20)
#   cpp_example_slot_server_<cxx>  examples/cpp/slot_server.cpp builds and runs
#   cpp_example_callback_server_<cxx>  examples/cpp/callback_server.cpp (SharedStream in
#                              callbacks, the clock started at accept) builds and runs
#   cpp_samples_<cxx>          every C++ sample of ttft.hpp's comments and of docs/*.md
#                              compiles as written (tests/cpp/samples.py); those with a
#                              main() are linked and run
# Under TTFT_SANITIZE only the compiler family that built the library is used
# (sanitizer runtimes of gcc and clang do not mix), with the same flags.
if(TTFT_MUSL) # cmake/toolchain-musl.cmake: no C++ library for musl-gcc
  message(STATUS "musl: tests/cpp.cmake not registered (C++ needs a musl libstdc++; the host's g++/clang++ link glibc)")
  return()
endif()

set(TTFT_CPP_SRC ${CMAKE_CURRENT_SOURCE_DIR}/cpp)
set(TTFT_CPP_OUT ${CMAKE_CURRENT_BINARY_DIR}/cpp)
set(TTFT_CPP_RUN ${TTFT_CPP_SRC}/run_compiler.sh)
set(TTFT_CPP_INC ${PROJECT_SOURCE_DIR}/include)

set(TTFT_CXX_WARN -Wall -Wextra -Werror -pedantic -Wshadow -Wconversion -Wsign-conversion
    -Wold-style-cast -Wnon-virtual-dtor -Woverloaded-virtual -Wcast-qual -Wundef)
set(TTFT_C_STRICT -pedantic -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wconversion -Wundef -Wcast-qual)

set(TTFT_CPP_SAN "")
if(TTFT_SANITIZE)
  set(TTFT_CPP_SAN -fsanitize=${TTFT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
endif()

# (C compiler, C++ compiler) pairs to test with.
set(TTFT_CPP_FAMILIES gnu clang)
if(CMAKE_CROSSCOMPILING)
  # a cross build (cmake/toolchain-aarch64-linux-gnu.cmake): the target's
  # gcc and g++ (aarch64-linux-gnu-g++, the toolchain's CMAKE_CXX_COMPILER),
  # the programs run under the emulator (TTFT_EMULATOR). clang is not
  # tried: the header checks are about the language, not the target, and
  # run natively with both compilers.
  set(TTFT_CPP_FAMILIES cross)
elseif(TTFT_SANITIZE)
  if(CMAKE_C_COMPILER_ID MATCHES "Clang")
    set(TTFT_CPP_FAMILIES clang)
  else()
    set(TTFT_CPP_FAMILIES gnu)
  endif()
endif()

find_program(TTFT_SAMPLES_PYTHON NAMES python3)

set(TTFT_CPP_HTTP "")
if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
  set(TTFT_CPP_HTTP -DTTFT_TEST_HTTP=1)
endif()

# ttft_cpp_test(NAME name COMPILER cc SOURCE src LIB shared|static FLAGS ...)
function(ttft_cpp_test)
  cmake_parse_arguments(T "" "NAME;COMPILER;SOURCE;LIB" "FLAGS" ${ARGN})
  if(T_LIB STREQUAL "static")
    set(link $<TARGET_FILE:ttft_static> -pthread -lm)
  else()
    set(link $<TARGET_FILE:ttft_shared> -Wl,-rpath,$<TARGET_FILE_DIR:ttft_shared>)
  endif()
  add_test(NAME ${T_NAME}
    COMMAND sh ${TTFT_CPP_RUN} ${T_COMPILER} ${TTFT_CPP_OUT}/${T_NAME} 1
            ${T_FLAGS} ${TTFT_CPP_SAN} -I${TTFT_CPP_INC} ${T_SOURCE} ${link} -pthread)
  set_tests_properties(${T_NAME} PROPERTIES LABELS "cpp;${T_LIB}" TIMEOUT 300 SKIP_RETURN_CODE 77
                       ENVIRONMENT "TTFT_EMULATOR=${TTFT_EMULATOR}")
endfunction()

foreach(fam ${TTFT_CPP_FAMILIES})
  if(fam STREQUAL "gnu")
    set(cc gcc)
    set(cxx g++)
  elseif(fam STREQUAL "cross")
    set(cc ${CMAKE_C_COMPILER})
    set(cxx ${CMAKE_CXX_COMPILER})
    if(NOT cxx)
      set(cxx ${CMAKE_C_COMPILER}-no-cxx) # run_compiler.sh then says it is missing
    endif()
  else()
    set(cc clang)
    set(cxx clang++)
  endif()

  # in test names: aarch64-linux-gnu-g++, not /usr/bin/aarch64-linux-gnu-g++
  get_filename_component(_cxx_name ${cxx} NAME)
  get_filename_component(_cc_name ${cc} NAME)
  # a system_clock time point does not compile, with a message naming the
  # clock (ttft::Time); the message is the pass condition
  add_test(NAME cpp_system_clock_refused_${_cxx_name}
    COMMAND sh ${TTFT_CPP_RUN} ${cxx} ${TTFT_CPP_OUT}/cpp_system_clock_refused_${_cxx_name} 0
            -std=c++17 -I${TTFT_CPP_INC} ${TTFT_CPP_SRC}/system_clock_refused.cpp
            $<TARGET_FILE:ttft_shared>)
  set_tests_properties(cpp_system_clock_refused_${_cxx_name} PROPERTIES LABELS "cpp;shared" TIMEOUT 300
    SKIP_RETURN_CODE 77
    PASS_REGULAR_EXPRESSION "system_clock is a wall clock; the library's clock is CLOCK_MONOTONIC")

  foreach(std 17 20)
    ttft_cpp_test(NAME cpp_hpp_${_cxx_name}_cxx${std}_shared COMPILER ${cxx} LIB shared
      SOURCE ${TTFT_CPP_SRC}/test_hpp.cpp FLAGS -std=c++${std} -O1 -g ${TTFT_CXX_WARN} ${TTFT_CPP_HTTP})
  endforeach()
  ttft_cpp_test(NAME cpp_hpp_${_cxx_name}_cxx17_static COMPILER ${cxx} LIB static
    SOURCE ${TTFT_CPP_SRC}/test_hpp.cpp FLAGS -std=c++17 -O1 -g ${TTFT_CXX_WARN} ${TTFT_CPP_HTTP})

  foreach(std c99 c11)
    ttft_cpp_test(NAME cpp_header_c_${_cc_name}_${std} COMPILER ${cc} LIB shared
      SOURCE ${TTFT_CPP_SRC}/header_c.c FLAGS -std=${std} ${TTFT_C_STRICT} -Wdeclaration-after-statement)
  endforeach()
  ttft_cpp_test(NAME cpp_header_noshort_${_cc_name} COMPILER ${cc} LIB shared
    SOURCE ${TTFT_CPP_SRC}/header_noshort.c FLAGS -std=c99 ${TTFT_C_STRICT})

  foreach(std 11 20)
    ttft_cpp_test(NAME cpp_header_cxx_${_cxx_name}_cxx${std} COMPILER ${cxx} LIB shared
      SOURCE ${TTFT_CPP_SRC}/header_cxx.cpp FLAGS -std=c++${std} -pedantic -Wall -Wextra -Werror -Wshadow -Wconversion -Wundef)
  endforeach()

  foreach(example slot_server callback_server)
    ttft_cpp_test(NAME cpp_example_${example}_${_cxx_name} COMPILER ${cxx} LIB shared
      SOURCE ${PROJECT_SOURCE_DIR}/examples/cpp/${example}.cpp FLAGS -std=c++17 -O1 ${TTFT_CXX_WARN})
  endforeach()

  if(TTFT_SAMPLES_PYTHON)
    add_test(NAME cpp_samples_${_cxx_name}
      COMMAND ${TTFT_SAMPLES_PYTHON} ${TTFT_CPP_SRC}/samples.py --cxx ${cxx}
              --root ${PROJECT_SOURCE_DIR} --lib $<TARGET_FILE:ttft_shared>
              --out ${TTFT_CPP_OUT}/samples_${_cxx_name} -- ${TTFT_CPP_SAN})
    set_tests_properties(cpp_samples_${_cxx_name} PROPERTIES LABELS "cpp;shared;docs" TIMEOUT 600
                         SKIP_RETURN_CODE 77 ENVIRONMENT "TTFT_EMULATOR=${TTFT_EMULATOR}")
  else()
    # No silent skip: a test that says what is missing and fails.
    add_test(NAME cpp_samples_${_cxx_name} COMMAND ${CMAKE_COMMAND} -E echo
      "FAIL: cpp_samples needs python3 to extract the samples")
    set_tests_properties(cpp_samples_${_cxx_name} PROPERTIES FAIL_REGULAR_EXPRESSION "FAIL:" LABELS cpp)
  endif()
endforeach()
