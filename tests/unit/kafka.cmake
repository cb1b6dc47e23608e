# kafka: the librdkafka configuration builder (defaults, locked keys, error
# format, which keys each client takes); no broker needed.
mcdc_unit_test(test_kafka SOURCES test_kafka.c LIBS mcdc_kafka)
