# sink: JSON-lines bytes and the Kafka sink on librdkafka's mock cluster
# (librdkafka is linked for the mock cluster and fault injection only).
if(TARGET mcdc_sink)
  mcdc_unit_test(test_sink SOURCES test_sink.c LIBS mcdc_sink PkgConfig::RDKAFKA Threads::Threads)
  set_tests_properties(test_sink PROPERTIES TIMEOUT 120)
endif()
