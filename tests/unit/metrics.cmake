# metrics: the registry, the text exposition and the probes' decisions.
mcdc_unit_test(test_metrics SOURCES test_metrics.c LIBS mcdc_metrics)
