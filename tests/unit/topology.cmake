mcdc_unit_test(test_topology SOURCES test_topology.c LIBS mcdc_topology)
