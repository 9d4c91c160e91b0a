# tests/layers.cmake — the layering of src/ (src/README.md): a reporting
# file must not include a recording-internal header, and every include
# names its layer. The selftest proves the checker catches a violation.
find_program(TTFT_LAYERS_PYTHON NAMES python3)
if(TTFT_LAYERS_PYTHON)
  add_test(NAME layers_includes
           COMMAND ${TTFT_LAYERS_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.py
                   ${PROJECT_SOURCE_DIR}/src --selftest)
else()
  add_test(NAME layers_includes COMMAND sh -c "echo 'FAIL: layers_includes needs python3'; exit 1")
endif()
set_tests_properties(layers_includes PROPERTIES LABELS "layers" TIMEOUT 60)
