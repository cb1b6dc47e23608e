mcdc_unit_test(test_capture SOURCES test_capture.c LIBS mcdc_capture)
mcdc_unit_test(test_oplog_diff SOURCES test_oplog_diff.c LIBS mcdc_capture)
mcdc_unit_test(test_oversize SOURCES test_oversize.c LIBS mcdc_capture mcdc_encode)
