mcdc_unit_test(test_event SOURCES test_event.c LIBS mcdc_event)
