# Prometheus / OpenMetrics exposition: external validators (tests/prom/).
#   prom_promtool       promtool check metrics on every .prom variant, no lint
#   prom_python_parse   the reference Python client's text and OpenMetrics
#                       parsers on every variant, plus structural checks
#   prom_scrape         a real Prometheus server scraping /metrics of a
#                       workload process, PromQL answers vs the library
# A missing tool (promtool, prometheus, python3-prometheus-client) fails the
# test under CI (CI set) and skips it (exit 77) elsewhere.

add_executable(ttft_prom_expose ${CMAKE_CURRENT_SOURCE_DIR}/prom/expose.c)
target_link_libraries(ttft_prom_expose PRIVATE ttft_static m)
target_include_directories(ttft_prom_expose PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(ttft_prom_expose PRIVATE ${TTFT_WARNINGS})

# Debian's python3-prometheus-client lives in the system interpreter's
# dist-packages: prefer /usr/bin/python3 over a python3 earlier in PATH.
find_program(TTFT_PROM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT TTFT_PROM_PYTHON)
  find_program(TTFT_PROM_PYTHON NAMES python3)
endif()
if(NOT TTFT_PROM_PYTHON)
  set(TTFT_PROM_PYTHON python3) # the test then fails: no interpreter
endif()
find_program(TTFT_PROMETHEUS_BIN NAMES prometheus)
if(NOT TTFT_PROMETHEUS_BIN)
  set(TTFT_PROMETHEUS_BIN "")
endif()

add_test(NAME prom_promtool
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/prom/check_promtool.sh
          $<TARGET_FILE:ttft_prom_expose> ${CMAKE_CURRENT_BINARY_DIR}/prom_promtool)
add_test(NAME prom_python_parse
  COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/parse_client.py
          $<TARGET_FILE:ttft_prom_expose> ${CMAKE_CURRENT_BINARY_DIR}/prom_python)
set_tests_properties(prom_promtool prom_python_parse PROPERTIES
  LABELS "prometheus" SKIP_RETURN_CODE 77 TIMEOUT 120)

if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
  add_executable(ttft_prom_workload ${CMAKE_CURRENT_SOURCE_DIR}/prom/workload.c)
  target_link_libraries(ttft_prom_workload PRIVATE ttft_static m)
  target_include_directories(ttft_prom_workload PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(ttft_prom_workload PRIVATE ${TTFT_WARNINGS})
  add_test(NAME prom_scrape
    COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/scrape_test.py
            $<TARGET_FILE:ttft_prom_workload> "${TTFT_PROMETHEUS_BIN}")
  set_tests_properties(prom_scrape PROPERTIES
    LABELS "prometheus;integration" SKIP_RETURN_CODE 77 TIMEOUT 90)
endif()
