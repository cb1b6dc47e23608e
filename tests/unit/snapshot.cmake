# snapshot: `_id` key ranges (brackets, filters, BSON-order comparison, JSON form)
# and the split of one collection into ranges.
mcdc_unit_test(test_keyrange SOURCES test_keyrange.c LIBS mcdc_snapshot)
# The incremental snapshot engine: offsets, windows, stop, regexes (no server).
# Its offsets round trip stores the engine's offset keys through the file
# store, hence mcdc_offsets beside the module.
mcdc_unit_test(test_incremental SOURCES test_incremental.c LIBS mcdc_snapshot mcdc_offsets)
# The background chunk read: keys changed during the read, close before the
# result, failed/stopped/abandoned reads, the reader thread's handoff.
mcdc_unit_test(test_incremental_bg SOURCES test_incremental_bg.c LIBS mcdc_snapshot)
# The key-range walker the integration test runs against the simulator
# (tests/integration/test_keyrange.py).
add_executable(mcdc_keyrange_walk keyrange_walk.c)
target_link_libraries(mcdc_keyrange_walk PRIVATE mcdc_snapshot)
mcdc_target_defaults(mcdc_keyrange_walk)
# MongoDB's hash64 of hashed shard keys (hasher_test.cpp's values) and the
# hashed-chunk ownership filter.
mcdc_unit_test(test_hashkey SOURCES test_hashkey.c LIBS mcdc_snapshot)
# The initial snapshot's resumable progress (snapshot.resumable): the offset
# member per record, its parse, the pieces a collection resumes in, the check
# against a new plan.
mcdc_unit_test(test_snapshot_progress SOURCES test_snapshot_progress.c LIBS mcdc_snapshot)
# The snapshot readers' batched hand-over to the task thread: batches bounded
# by documents and bytes, and at once to a task waiting on an empty queue.
mcdc_unit_test(test_snapshot_handover SOURCES test_snapshot_handover.c LIBS mcdc_snapshot)
