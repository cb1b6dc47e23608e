# metrics: the registry, the text exposition and the probes' decisions.
if(TARGET mcdc_metrics)
  mcdc_unit_test(test_metrics SOURCES test_metrics.c LIBS mcdc_metrics)
endif()
