# cmake -DMONGOCDC=<binary> -DFILE=<yaml> -DMODE=good|bad -P validate_test.cmake
# good: `mongocdc --validate -c FILE` exits 0.
# bad:  it exits 2 and its stderr equals FILE with .yaml replaced by
#       .expected, byte for byte, after the fixture's directory is stripped
#       from the path (the run uses the fixture's directory as its cwd and the
#       bare file name, so the expected text names the file only).
get_filename_component(dir ${FILE} DIRECTORY)
get_filename_component(name ${FILE} NAME)
execute_process(COMMAND ${MONGOCDC} --validate -c ${name}
  WORKING_DIRECTORY ${dir}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 20)
if(MODE STREQUAL "good")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: exit ${rc}, expected 0\n${err}")
  endif()
  return()
endif()
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "${name}: exit ${rc}, expected 2\n${err}")
endif()
string(REGEX REPLACE "\\.yaml$" ".expected" expected_file ${FILE})
if(NOT EXISTS ${expected_file})
  message(FATAL_ERROR "${name}: no expected message file ${expected_file}")
endif()
file(READ ${expected_file} expected)
string(REPLACE "${dir}/" "" err "${err}")
if(NOT err STREQUAL expected)
  message(FATAL_ERROR "${name}: stderr differs\n--- expected\n${expected}--- got\n${err}")
endif()
