# pipeline: the at-least-once core (commit only over acknowledged records,
# failures, restarts) with the JSON-lines sink and the file offset store.
mcdc_unit_test(test_pipeline SOURCES test_pipeline.c LIBS mcdc_pipeline)
# exactly-once: transactions against librdkafka's mock cluster (its
# transaction coordinator), the offsets store's writer hook.
mcdc_unit_test(test_pipeline_txn SOURCES test_pipeline_txn.c LIBS mcdc_pipeline PkgConfig::RDKAFKA)
