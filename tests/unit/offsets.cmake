# offsets: in-flight tracker, offset values, file store, Kafka store on
# librdkafka's mock cluster (librdkafka is linked for the mock cluster only).
mcdc_unit_test(test_offsets SOURCES test_offsets.c LIBS mcdc_offsets PkgConfig::RDKAFKA)
set_tests_properties(test_offsets PROPERTIES TIMEOUT 120)
# Kafka Connect's FileOffsetBackingStore file, against files the Java class wrote.
mcdc_unit_test(test_dbzfile SOURCES test_dbzfile.c LIBS mcdc_offsets)
# Hand-over with Debezium: key bytes, layouts, Debezium 1.9.8/3.6.1 values,
# adoption from the file and Kafka stores, backwards positions refused.
mcdc_unit_test(test_offsets_handover SOURCES test_offsets_handover.c LIBS mcdc_offsets
               PkgConfig::RDKAFKA)
set_tests_properties(test_offsets_handover PROPERTIES TIMEOUT 120)
