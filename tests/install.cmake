# make install PREFIX=... then build against it with pkg-config and find_package
if(TTFT_MUSL)
  message(STATUS "musl: install_and_consume not registered (it builds a consumer with the host cc, which is glibc's)")
  return()
endif()
add_test(NAME install_and_consume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(install_and_consume PROPERTIES LABELS "install" TIMEOUT 300
                     FIXTURES_REQUIRED "" RUN_SERIAL FALSE)
