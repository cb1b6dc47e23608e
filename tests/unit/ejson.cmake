# Extended-JSON writer (src/encode/ejson*.c, jstring.c, jdouble.c): golden
# vectors from debezium-format.md, plus a small command-line front end for the
# writer used by the differential oracle test when the daemon binary lacks
# the `encode` subcommand.
mcdc_unit_test(test_ejson SOURCES test_ejson.c LIBS mcdc_encode)
# test_ejson_walk: the writer's own walk over BSON against libbson's iterator
# on mutated documents, and its cache of member names against fresh buffers.
mcdc_unit_test(test_ejson_walk SOURCES test_ejson_walk.c LIBS mcdc_encode)
# test_jdouble: Double.toString's fast paths against the JDK digit loop
# emulated step by step, on edge cases and random values
# (MCDC_JDOUBLE_SWEEP=N values per class; the default takes a few seconds).
mcdc_unit_test(test_jdouble SOURCES test_jdouble.c LIBS mcdc_encode m)
add_executable(mcdc_encode_cli ejson_cli_main.c)
target_link_libraries(mcdc_encode_cli PRIVATE mcdc_encode)
mcdc_target_defaults(mcdc_encode_cli)
