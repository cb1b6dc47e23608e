# pipeline: the at-least-once core (commit only over acknowledged records,
# failures, restarts) with the JSON-lines sink and the file offset store.
mcdc_unit_test(test_pipeline SOURCES test_pipeline.c LIBS mcdc_pipeline)
