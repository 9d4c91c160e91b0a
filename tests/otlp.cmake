# OTLP encoding proved against an independent decoder (issue 31.4):
#   otlp_decode  tests/otlp/run.sh: otlp_dump writes OTLP requests
#                (cumulative, two deltas) and the snapshots' exact values;
#                decode_check.js decodes them with the OpenTelemetry JS
#                generated protobuf definitions (@opentelemetry/otlp-transformer
#                0.57.2, tests/otlp/package.json) and compares.
# Without node, npm or the package (npm install fails), the test fails
# under CI (CI set) and skips (exit 77) elsewhere.
add_executable(ttft_otlp_dump ${CMAKE_CURRENT_SOURCE_DIR}/otlp/otlp_dump.c)
target_link_libraries(ttft_otlp_dump PRIVATE ttft_static m)
target_include_directories(ttft_otlp_dump PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
target_compile_options(ttft_otlp_dump PRIVATE ${TTFT_WARNINGS})
target_compile_definitions(ttft_otlp_dump PRIVATE _GNU_SOURCE)
if(TTFT_HAVE_PTHREADS)
  target_link_libraries(ttft_otlp_dump PRIVATE Threads::Threads)
endif()

ttft_runner(_otlp_dump ttft_otlp_dump $<TARGET_FILE:ttft_otlp_dump>)
add_test(NAME otlp_decode
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/otlp/run.sh
          ${_otlp_dump} ${CMAKE_CURRENT_BINARY_DIR}/otlp_decode)
set_tests_properties(otlp_decode PROPERTIES LABELS "otlp" SKIP_RETURN_CODE 77 TIMEOUT 300)

# The pusher end to end (issue 31.4, the push half):
#   otlp_push_e2e  tests/otlp/run.sh push: otlp_push_e2e pushes scripted
#                  timelines with ttft_otlp_start (cumulative, then delta) to
#                  receiver.js on loopback, which answers 429 (Retry-After: 1),
#                  503 and a closed connection on purpose and is stopped and
#                  restarted on the same port; push_check.js asserts what it
#                  decoded against the final snapshot. About 10 s.
add_executable(ttft_otlp_push_e2e ${CMAKE_CURRENT_SOURCE_DIR}/otlp/otlp_push_e2e.c)
target_link_libraries(ttft_otlp_push_e2e PRIVATE ttft_static m)
target_include_directories(ttft_otlp_push_e2e PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(ttft_otlp_push_e2e PRIVATE ${TTFT_WARNINGS})
target_compile_definitions(ttft_otlp_push_e2e PRIVATE _GNU_SOURCE)
if(TTFT_HAVE_PTHREADS)
  target_link_libraries(ttft_otlp_push_e2e PRIVATE Threads::Threads)
endif()

ttft_runner(_otlp_push_e2e ttft_otlp_push_e2e $<TARGET_FILE:ttft_otlp_push_e2e>)
add_test(NAME otlp_push_e2e
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/otlp/run.sh
          ${_otlp_push_e2e} ${CMAKE_CURRENT_BINARY_DIR}/otlp_push_e2e push)
set_tests_properties(otlp_push_e2e PROPERTIES LABELS "otlp" SKIP_RETURN_CODE 77 TIMEOUT 300)
