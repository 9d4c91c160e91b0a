# CLI tests for tools/ttft-report (docs/ttft-report.md): a helper writes
# snapshots of a known workload, tests/tools/test_report.sh runs the tool
# over them and checks its output, exit codes and SVG (xmllint).
if(TTFT_BUILD_TOOLS)
  add_executable(ttft-mksnap ${CMAKE_CURRENT_SOURCE_DIR}/tools/mksnap.c)
  target_link_libraries(ttft-mksnap PRIVATE ttft_static m)
  target_compile_options(ttft-mksnap PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(ttft-mksnap PRIVATE _GNU_SOURCE)
  ttft_runner(_report ttft-report $<TARGET_FILE:ttft-report>)
  ttft_runner(_mksnap ttft-mksnap $<TARGET_FILE:ttft-mksnap>)
  add_test(NAME tools_report
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_report.sh ${_report} ${_mksnap}
                   ${CMAKE_CURRENT_BINARY_DIR}/tools_report.d)
  set_tests_properties(tools_report PROPERTIES LABELS "tools" TIMEOUT 300)
  # ttft-report --capacity over a synthetic sweep with an exact answer
  # (tests/tools/test_capacity.sh; runs written by tests/tools/mkcap.c)
  add_executable(ttft-mkcap ${CMAKE_CURRENT_SOURCE_DIR}/tools/mkcap.c)
  target_link_libraries(ttft-mkcap PRIVATE ttft_static m)
  target_compile_options(ttft-mkcap PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(ttft-mkcap PRIVATE _GNU_SOURCE)
  ttft_runner(_mkcap ttft-mkcap $<TARGET_FILE:ttft-mkcap>)
  add_test(NAME tools_capacity
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_capacity.sh
                   ${_report} ${_mkcap}
                   ${CMAKE_CURRENT_BINARY_DIR}/tools_capacity.d)
  set_tests_properties(tools_capacity PROPERTIES LABELS "tools" TIMEOUT 120)
endif()
# tools/ttft-exporter end to end (tests/tools/test_exporter.sh): start,
# scrape, SIGTERM/SIGINT, bad directories, a busy port. Needs python3.
if(TTFT_BUILD_TOOLS AND TTFT_HAVE_HTTP) # (the tools directory comes later)
  ttft_runner(_exporter ttft-exporter $<TARGET_FILE:ttft-exporter>)
  add_test(NAME tools_exporter
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_exporter.sh
                   ${_exporter} ${CMAKE_CURRENT_BINARY_DIR}/tools_exporter.d)
  set_tests_properties(tools_exporter PROPERTIES LABELS "tools" TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
# tools/ttft-top as a person uses it (tests/tools/test_top.sh): a server of
# a known workload (tests/tools/top_server.c), ttft-top in tmux (keys and
# the screen), batch JSON frames against the exact workload deltas, a
# restart, fake endpoints (garbage, a newer snapshot version, silent, down).
# Needs tmux (and python3 to read the JSON): missing under CI fails.
if(TTFT_BUILD_TOOLS AND TTFT_HAVE_HTTP AND NOT TTFT_MUSL) # musl: no ncurses, no ttft-top
  add_executable(ttft-top-server ${CMAKE_CURRENT_SOURCE_DIR}/tools/top_server.c)
  target_link_libraries(ttft-top-server PRIVATE ttft_static)
  target_compile_options(ttft-top-server PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(ttft-top-server PRIVATE _GNU_SOURCE)
  ttft_runner(_top ttft-top ${CMAKE_BINARY_DIR}/tools/ttft-top)
  ttft_runner(_top_server ttft-top-server $<TARGET_FILE:ttft-top-server>)
  add_test(NAME tools_top
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_top.sh ${_top} ${_top_server}
                   ${CMAKE_CURRENT_BINARY_DIR}/tools_top.d)
  set_tests_properties(tools_top PROPERTIES LABELS "tools" TIMEOUT 240 SKIP_RETURN_CODE 77)
endif()
# ttft-top --dir end to end (tests/tools/test_top_dir.sh): processes of
# known workloads (tests/tools/top_dir_worker.c) publish into a fresh 0700
# directory under /dev/shm; batch JSON frames against their exact union, a
# process that exits and one that starts between frames, an empty, a
# missing and a group-writable directory, and the screen in tmux. Needs
# tmux and python3: missing under CI fails.
if(TTFT_BUILD_TOOLS AND TTFT_HAVE_HTTP AND NOT TTFT_MUSL) # musl: no ncurses, no ttft-top
  add_executable(ttft-top-dir-worker ${CMAKE_CURRENT_SOURCE_DIR}/tools/top_dir_worker.c)
  target_link_libraries(ttft-top-dir-worker PRIVATE ttft_static)
  target_compile_options(ttft-top-dir-worker PRIVATE ${TTFT_WARNINGS})
  target_compile_definitions(ttft-top-dir-worker PRIVATE _GNU_SOURCE)
  ttft_runner(_top ttft-top ${CMAKE_BINARY_DIR}/tools/ttft-top)
  ttft_runner(_top_dir_worker ttft-top-dir-worker $<TARGET_FILE:ttft-top-dir-worker>)
  add_test(NAME tools_top_dir
           COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tools/test_top_dir.sh ${_top} ${_top_dir_worker}
                   ${CMAKE_CURRENT_BINARY_DIR}/tools_top_dir.d)
  set_tests_properties(tools_top_dir PROPERTIES LABELS "tools" TIMEOUT 240 SKIP_RETURN_CODE 77)
endif()
