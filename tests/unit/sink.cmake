# sink: JSON-lines bytes and the Kafka sink on librdkafka's mock cluster
# (librdkafka is linked for the mock cluster and fault injection only).
mcdc_unit_test(test_sink SOURCES test_sink.c LIBS mcdc_sink PkgConfig::RDKAFKA Threads::Threads)
set_tests_properties(test_sink PROPERTIES TIMEOUT 120)

# Driver for tests/integration/test_sink_kafka.py (sink and Kafka offset store
# against a real broker).
add_executable(mcdc_sink_driver sink_driver.c)
target_link_libraries(mcdc_sink_driver PRIVATE mcdc_sink mcdc_offsets)
mcdc_target_defaults(mcdc_sink_driver)
