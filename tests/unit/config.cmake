# Configuration module: the loader's unit tests, then the command line over
# every example config (exit 0) and every bad fixture (exit 2, exact stderr),
# then the generated docs/CONFIGURATION.md being current.
mcdc_unit_test(test_config SOURCES test_config.c
  LIBS mcdc_config mcdc_common PkgConfig::YAML)

set(_validate ${PROJECT_SOURCE_DIR}/src/config/validate_test.cmake)
file(GLOB _good ${PROJECT_SOURCE_DIR}/conf/*.yaml)
foreach(f ${_good})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME config_validate_good_${n}
    COMMAND ${CMAKE_COMMAND} -DMONGOCDC=$<TARGET_FILE:mongocdc> -DFILE=${f} -DMODE=good
            -P ${_validate})
  set_tests_properties(config_validate_good_${n} PROPERTIES LABELS config TIMEOUT 30)
endforeach()
file(GLOB _bad ${PROJECT_SOURCE_DIR}/tests/fixtures/config/bad-*.yaml)
foreach(f ${_bad})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME config_validate_${n}
    COMMAND ${CMAKE_COMMAND} -DMONGOCDC=$<TARGET_FILE:mongocdc> -DFILE=${f} -DMODE=bad
            -P ${_validate})
  set_tests_properties(config_validate_${n} PROPERTIES LABELS config TIMEOUT 30)
endforeach()
add_test(NAME config_docs_current
  COMMAND ${CMAKE_COMMAND} -DMONGOCDC=$<TARGET_FILE:mongocdc>
          -DOUT=${PROJECT_SOURCE_DIR}/docs/CONFIGURATION.md -DCHECK=1
          -P ${PROJECT_SOURCE_DIR}/src/config/gen_docs.cmake)
set_tests_properties(config_docs_current PROPERTIES LABELS config TIMEOUT 30)

# Process life of the binary: exit codes, SIGTERM, a second signal, SIGHUP.
add_test(NAME mongocdc_process_life
  COMMAND sh ${PROJECT_SOURCE_DIR}/src/config/process_test.sh $<TARGET_FILE:mongocdc>
          ${CMAKE_CURRENT_BINARY_DIR}/process_life)
set_tests_properties(mongocdc_process_life PROPERTIES LABELS config TIMEOUT 90)
