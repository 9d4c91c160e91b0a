# Prometheus / OpenMetrics exposition: external validators (tests/prom/).
#   prom_promtool       promtool check metrics on every .prom variant, no lint
#   prom_python_parse   the reference Python client's text and OpenMetrics
#                       parsers on every variant, plus structural checks
#   prom_scrape         a real Prometheus server scraping /metrics of a
#                       workload process, PromQL answers vs the library
# A missing tool (promtool, prometheus, python3-prometheus-client) fails the
# test under CI (CI set) and skips it (exit 77) elsewhere.
if(TTFT_MUSL) # the validators are Python (prometheus_client) and Prometheus itself
  message(STATUS "musl: tests/prometheus.cmake not registered (Python and Prometheus validators; the exposition code is the same C, tested by the glibc build)")
  return()
endif()

ttft_runner(_expose ttft_prom_expose $<TARGET_FILE:ttft_prom_expose>)
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
          ${_expose} ${CMAKE_CURRENT_BINARY_DIR}/prom_promtool)
add_test(NAME prom_python_parse
  COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/parse_client.py
          ${_expose} ${CMAKE_CURRENT_BINARY_DIR}/prom_python)
set_tests_properties(prom_promtool prom_python_parse PROPERTIES
  LABELS "prometheus" SKIP_RETURN_CODE 77 TIMEOUT 120)

if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
  ttft_runner(_workload ttft_prom_workload $<TARGET_FILE:ttft_prom_workload>)
  add_executable(ttft_prom_workload ${CMAKE_CURRENT_SOURCE_DIR}/prom/workload.c)
  target_link_libraries(ttft_prom_workload PRIVATE ttft_static m)
  target_include_directories(ttft_prom_workload PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(ttft_prom_workload PRIVATE ${TTFT_WARNINGS})
  add_test(NAME prom_scrape
    COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/scrape_test.py
            ${_workload} "${TTFT_PROMETHEUS_BIN}")
  set_tests_properties(prom_scrape PROPERTIES
    LABELS "prometheus;integration" SKIP_RETURN_CODE 77 TIMEOUT 90)
  # prom_exemplars: two real Prometheus servers (exemplar-storage, and
  # exemplar-storage,native-histograms) scrape exemplars; query_exemplars
  # returns the slowest requests' trace ids (issue 19)
  ttft_runner(_exemplar_workload ttft_prom_exemplar_workload $<TARGET_FILE:ttft_prom_exemplar_workload>)
  add_executable(ttft_prom_exemplar_workload ${CMAKE_CURRENT_SOURCE_DIR}/prom/exemplar_workload.c)
  target_link_libraries(ttft_prom_exemplar_workload PRIVATE ttft_static m)
  target_compile_options(ttft_prom_exemplar_workload PRIVATE ${TTFT_WARNINGS})
  add_test(NAME prom_exemplars
    COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/exemplar_test.py
            ${_exemplar_workload} "${TTFT_PROMETHEUS_BIN}")
  set_tests_properties(prom_exemplars PROPERTIES
    LABELS "prometheus;integration" SKIP_RETURN_CODE 77 TIMEOUT 90)
endif()

# ---------------------------------------------------------- protobuf (issue 10)
#   prom_protobuf_roundtrip  every exposition variant decoded by an independent
#                            reader (pbdecode.py) and compared with the text
#                            exposition and the JSON report (Python stdlib only)
#   prom_rules_check         promtool check rules deploy/prometheus/ttft.rules.yml
#   prom_rules_test          promtool test rules (alerts fire / stay quiet)
#   prom_dashboard_lint      static checks of deploy/grafana/ttft-dashboard.json
#   prom_fleet               three replicas, a native-histogram Prometheus and a
#                            classic one: fleet p50/p90/p99 of TTFT, TPOT, ITL
#                            within 1 % of the exact union; every dashboard
#                            expression and rule evaluated on the real server;
#                            injected stall causes (>= 95 % attributed each)
ttft_runner(_expose_pb ttft_prom_expose_pb $<TARGET_FILE:ttft_prom_expose_pb>)
add_executable(ttft_prom_expose_pb ${CMAKE_CURRENT_SOURCE_DIR}/prom/expose_pb.c)
target_link_libraries(ttft_prom_expose_pb PRIVATE ttft_static m)
target_include_directories(ttft_prom_expose_pb PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(ttft_prom_expose_pb PRIVATE ${TTFT_WARNINGS})
add_test(NAME prom_protobuf_roundtrip
  COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/pb_roundtrip.py
          ${_expose_pb} ${CMAKE_CURRENT_BINARY_DIR}/prom_protobuf)
add_test(NAME prom_dashboard_lint
  COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/check_dashboard.py
          ${PROJECT_SOURCE_DIR}/deploy/grafana/ttft-dashboard.json
          ${PROJECT_SOURCE_DIR}/deploy/prometheus/ttft.rules.yml)
add_test(NAME prom_rules_check
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/prom/check_rules.sh check ${PROJECT_SOURCE_DIR}/deploy/prometheus)
add_test(NAME prom_rules_test
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/prom/check_rules.sh test ${PROJECT_SOURCE_DIR}/deploy/prometheus)
set_tests_properties(prom_protobuf_roundtrip prom_dashboard_lint prom_rules_check prom_rules_test
  PROPERTIES LABELS "prometheus" SKIP_RETURN_CODE 77 TIMEOUT 120)

if(TTFT_WITH_HTTP AND TTFT_HAVE_PTHREADS)
  ttft_runner(_replica ttft_prom_replica $<TARGET_FILE:ttft_prom_replica>)
  add_executable(ttft_prom_replica ${CMAKE_CURRENT_SOURCE_DIR}/prom/replica.c)
  target_link_libraries(ttft_prom_replica PRIVATE ttft_static m)
  target_compile_options(ttft_prom_replica PRIVATE ${TTFT_WARNINGS})
  add_test(NAME prom_fleet
    COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/fleet_test.py
            ${_replica} "${TTFT_PROMETHEUS_BIN}"
            --dashboard ${PROJECT_SOURCE_DIR}/deploy/grafana/ttft-dashboard.json
            --rules ${PROJECT_SOURCE_DIR}/deploy/prometheus/ttft.rules.yml)
  # one Prometheus-server test at a time on a 2-core machine; ~50 s alone,
  # 50-90 s inside a full parallel suite, ~115 s beside other heavy jobs
  set_tests_properties(prom_fleet PROPERTIES
    LABELS "prometheus;integration" SKIP_RETURN_CODE 77 TIMEOUT 300
    RESOURCE_LOCK prometheus_server)
  set_tests_properties(prom_scrape PROPERTIES RESOURCE_LOCK prometheus_server)

  # prom_fluidity (issue 29): scripted streams with token deadlines (early
  # and late stalls, n-token emissions, cancellations before and after a
  # miss, per-request targets) scraped over several intervals by a real
  # Prometheus with the rules: the fluidity rules within 0.1 % of the exact
  # union, the counters exact, rt's per-request SLO verdicts. ~20 s.
  add_executable(ttft_prom_fluidity_workload ${CMAKE_CURRENT_SOURCE_DIR}/prom/fluidity_workload.c)
  target_link_libraries(ttft_prom_fluidity_workload PRIVATE ttft_static m)
  target_compile_options(ttft_prom_fluidity_workload PRIVATE ${TTFT_WARNINGS})
  ttft_runner(_fluidity_workload ttft_prom_fluidity_workload $<TARGET_FILE:ttft_prom_fluidity_workload>)
  add_test(NAME prom_fluidity
    COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/fluidity_test.py
            ${_fluidity_workload} "${TTFT_PROMETHEUS_BIN}"
            --rules ${PROJECT_SOURCE_DIR}/deploy/prometheus/ttft.rules.yml)
  set_tests_properties(prom_fluidity PROPERTIES
    LABELS "prometheus;integration" SKIP_RETURN_CODE 77 TIMEOUT 90
    RESOURCE_LOCK prometheus_server)

  # prom_multiproc (issue 28): 8 worker processes (5 C, 3 Python) publish
  # into one shared directory while a driver restarts them at random for
  # 125 s (SIGTERM and SIGKILL); tools/ttft-exporter serves the gather to a
  # native-histogram Prometheus at 1 s: resets() = 0, final counters equal
  # the workers' ledgers, every rule and dashboard expression within 1 %,
  # the --by-process view sums to the merged one. ~3 min.
  if(TTFT_BUILD_TOOLS AND TARGET ttft_shared)
    ttft_runner(_mp_exporter ttft-exporter $<TARGET_FILE:ttft-exporter>)
    ttft_runner(_mp_worker ttft_prom_mp_worker $<TARGET_FILE:ttft_prom_mp_worker>)
    add_executable(ttft_prom_mp_worker ${CMAKE_CURRENT_SOURCE_DIR}/prom/mp_worker.c)
    target_link_libraries(ttft_prom_mp_worker PRIVATE ttft_static m)
    target_compile_options(ttft_prom_mp_worker PRIVATE ${TTFT_WARNINGS})
    add_test(NAME prom_multiproc
      COMMAND ${TTFT_PROM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/prom/multiproc_test.py
              ${_mp_worker} ${_mp_exporter}
              "${TTFT_PROMETHEUS_BIN}"
              --python-worker ${CMAKE_CURRENT_SOURCE_DIR}/prom/mp_worker.py
              --dashboard ${PROJECT_SOURCE_DIR}/deploy/grafana/ttft-dashboard.json
              --rules ${PROJECT_SOURCE_DIR}/deploy/prometheus/ttft.rules.yml)
    # label python too: its Python workers load TTFT_LIBRARY into CPython,
    # which an ASan build's library cannot join (20-sanitizers.sh excludes
    # the label, as for the Python suite)
    set_tests_properties(prom_multiproc PROPERTIES
      LABELS "prometheus;integration;python" SKIP_RETURN_CODE 77 TIMEOUT 300
      RESOURCE_LOCK prometheus_server
      ENVIRONMENT "TTFT_LIBRARY=$<TARGET_FILE:ttft_shared>;PYTHONPATH=${PROJECT_SOURCE_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
  endif()
endif()
