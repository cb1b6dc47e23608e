mcdc_unit_test(test_signals SOURCES test_signals.c LIBS mcdc_signals)
