# mcdc_module(<name> SOURCES ... [PUBLIC_LIBS ...] [PRIVATE_LIBS ...])
# One static library per module, named mcdc_<name>; src/ is on the include path.
function(mcdc_module name)
  cmake_parse_arguments(M "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  add_library(mcdc_${name} STATIC ${M_SOURCES})
  target_include_directories(mcdc_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(mcdc_${name} PUBLIC ${M_PUBLIC_LIBS} PRIVATE ${M_PRIVATE_LIBS})
  mcdc_target_defaults(mcdc_${name})
endfunction()

# mcdc_unit_test(<name> SOURCES ... LIBS ...): a cmocka binary registered with ctest
# under the label "unit". One binary per module (style.md §4.10).
function(mcdc_unit_test name)
  if(NOT MCDC_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  mcdc_target_defaults(${name})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit
    ENVIRONMENT "MCDC_SOURCE_DIR=${PROJECT_SOURCE_DIR};MCDC_SHARED_DIR=${MCDC_SHARED_DIR}")
endfunction()
