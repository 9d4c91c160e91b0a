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

add_test(NAME otlp_decode
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/otlp/run.sh
          $<TARGET_FILE:ttft_otlp_dump> ${CMAKE_CURRENT_BINARY_DIR}/otlp_decode)
set_tests_properties(otlp_decode PROPERTIES LABELS "otlp" SKIP_RETURN_CODE 77 TIMEOUT 300)
