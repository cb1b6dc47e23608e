mcdc_unit_test(test_topology SOURCES test_topology.c LIBS mcdc_topology)
mcdc_unit_test(test_gate SOURCES test_gate.c LIBS mcdc_topology)
