# test_encode: envelope, schemas, topics, filters, field selection and
# transactions against the golden vectors of encode_golden.tsv. (The
# extended-JSON writer has its own test, test_ejson.)
mcdc_unit_test(test_encode SOURCES test_encode.c LIBS mcdc_encode mcdc_event)

# test_encode_parity: context headers, snapshot ts_us/ts_ns, 1.9 snapshot
# positions (the details a side-by-side run with Debezium showed).
mcdc_unit_test(test_encode_parity SOURCES test_encode_parity.c LIBS mcdc_encode mcdc_event)

# test_filters_match: long include/exclude lists split within the server's
# regex pattern limit (change-stream $match and oplog query).
mcdc_unit_test(test_filters_match SOURCES test_filters_match.c LIBS mcdc_encode mcdc_event PkgConfig::PCRE2)
