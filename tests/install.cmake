# make install PREFIX=... then build against it with pkg-config and find_package
add_test(NAME install_and_consume
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR} ${PROJECT_SOURCE_DIR})
set_tests_properties(install_and_consume PROPERTIES LABELS "install" TIMEOUT 300
                     FIXTURES_REQUIRED "" RUN_SERIAL FALSE)
