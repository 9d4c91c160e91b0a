# CLI tests for tools/ttft-report (docs/ttft-report.md): a helper writes
# snapshots of a known workload, tests/tools/test_report.sh runs the tool
# over them and checks its output, exit codes and SVG (xmllint).
if(TTFT_BUILD_TOOLS)
  add_executable(ttft-mksnap ${CMAKE_CURRENT_SOURCE_DIR}/tools/mksnap.c)
  target_link_libraries(ttft-mksnap PRIVATE ttft_static m)
  target_compile_options(ttft-mksnap PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(ttft-mksnap PRIVATE _GNU_SOURCE)
  add_test(NAME tools_report
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_report.sh
                   $<TARGET_FILE:ttft-report> $<TARGET_FILE:ttft-mksnap>
                   ${CMAKE_CURRENT_BINARY_DIR}/tools_report.d)
  set_tests_properties(tools_report PROPERTIES LABELS "tools" TIMEOUT 300)
endif()
# tools/ttft-exporter end to end (tests/tools/test_exporter.sh): start,
# scrape, SIGTERM/SIGINT, bad directories, a busy port. Needs python3.
if(TTFT_BUILD_TOOLS AND TTFT_HAVE_HTTP) # (the tools directory comes later)
  add_test(NAME tools_exporter
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_exporter.sh
                   $<TARGET_FILE:ttft-exporter> ${CMAKE_CURRENT_BINARY_DIR}/tools_exporter.d)
  set_tests_properties(tools_exporter PROPERTIES LABELS "tools" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
