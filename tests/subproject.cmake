# libttft as a subproject of a parent project (add_subdirectory): it must
# build just the library (tests/subproject/check_subproject.sh).
if(TTFT_MUSL)
  message(STATUS "musl: subproject_build not registered (its parent project configures with the host compiler, glibc's)")
  return()
endif()
add_test(NAME subproject_build
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/subproject/check_subproject.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(subproject_build PROPERTIES LABELS "subproject;install" TIMEOUT 600)
