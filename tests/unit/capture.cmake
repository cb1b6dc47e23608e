if(TARGET mcdc_capture)
  mcdc_unit_test(test_capture SOURCES test_capture.c LIBS mcdc_capture)
endif()
