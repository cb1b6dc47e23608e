/*
 * metrics: the process's counters and gauges, one set per capture task
 * (label task="<replica set or shard name>"), rendered in the Prometheus text
 * exposition format (version 0.0.4; prometheus.io/docs/instrumenting/
 * exposition_formats) and served over HTTP with /health and /ready
 * (metrics_http.c). Names follow Prometheus conventions (_total, _seconds,
 * _bytes); docs/OPERATIONS.md maps them to Debezium's streaming and snapshot
 * MBean attributes (debezium.io/documentation/reference/stable/connectors/
 * mongodb.html#mongodb-monitoring).
 *
 * Thread: every update function may be called from any thread without a
 * lock (relaxed atomics); metrics_task_register() and the renderers take the
 * registry's mutex. A task slot lives until the process ends, so a pointer
 * from metrics_task_register() never dangles.
 */
#ifndef MCDC_METRICS_METRICS_H
#define MCDC_METRICS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kinds of change seen at the source, the label op="c|u|d|r|other". */
enum metrics_op { METRICS_OP_C = 0, METRICS_OP_U, METRICS_OP_D, METRICS_OP_R, METRICS_OP_OTHER,
                  METRICS_OP_COUNT };

/* Monotonic counters of a task. */
enum metrics_counter {
    METRICS_RECORDS_PRODUCED = 0, /* handed to the producer (Debezium: none; librdkafka txmsgs) */
    METRICS_RECORDS_ACKED,        /* acknowledged by Kafka */
    METRICS_RECORDS_FAILED,       /* failed permanently */
    METRICS_RECORDS_DEAD_LETTERED, /* too large: acknowledged in the dead-letter topic */
    METRICS_RECONNECTS,           /* connection attempts after a transient failure */
    METRICS_OFFSET_COMMITS,       /* positions written to the offset store */
    METRICS_EVENTS_OVERSIZE_SKIPPED, /* cursor.oversize.handling.mode skip: skipped on the server */
    METRICS_EVENTS_SPLIT,            /* reassembled from $changeStreamSplitLargeEvent fragments */
    METRICS_TXN_COMMITTED,           /* exactly-once: transactions committed */
    METRICS_TXN_ABORTED,             /* exactly-once: transactions aborted */
    METRICS_COUNTER_COUNT
};

/* What a task is doing, the value of mongocdc_task_state's label. */
enum metrics_state {
    METRICS_STATE_STARTING = 0,
    METRICS_STATE_SNAPSHOTTING,
    METRICS_STATE_STREAMING,
    METRICS_STATE_RECONNECTING,
    METRICS_STATE_STOPPED,
    METRICS_STATE_FAILED,
    METRICS_STATE_COUNT
};

struct metrics_task;

/*
 * The slot of the task named name (copied; at most 127 bytes), created on
 * first use: a task that restarts under the same name gets its old slot back
 * and its counters go on. Returns NULL only when the registry is full
 * (METRICS_MAX_TASKS); every update function accepts NULL and does nothing.
 */
struct metrics_task *metrics_task_register(const char *name);
#define METRICS_MAX_TASKS 64

/* Renames a slot (a task learns its replica-set name after `hello`). */
void metrics_task_rename(struct metrics_task *t, const char *name);

/* Change events seen (every event read from the stream or the snapshot),
 * filtered (not captured by the collection filters) and emitted (turned into
 * records), by op. Debezium: TotalNumberOfEventsSeen, NumberOfEventsFiltered,
 * TotalNumberOfCreate/Update/DeleteEventsSeen. */
void metrics_event_seen(struct metrics_task *t, enum metrics_op op);
void metrics_event_filtered(struct metrics_task *t, enum metrics_op op);
void metrics_event_emitted(struct metrics_task *t, enum metrics_op op);

/*
 * Per collection (label collection="db.coll"): an event of op turned into a
 * record (db/coll: db_len/coll_len bytes, not NUL-terminated), and n
 * documents copied by the snapshot (NUL-terminated names; Debezium's
 * RowsScanned map). A task tracks at most the cap set by
 * metrics_set_collection_cap (metrics.collections.max, default
 * METRICS_COLLECTIONS_DEFAULT) distinct collections; later ones share the
 * label METRICS_COLLECTION_OVERFLOW. Cost: one uncontended mutex per call,
 * a name compare when the collection is the previous call's, else a hash
 * lookup.
 */
void metrics_collection_event(struct metrics_task *t, const char *db, size_t db_len,
                              const char *coll, size_t coll_len, enum metrics_op op);
void metrics_collection_snapshot_rows(struct metrics_task *t, const char *db, const char *coll,
                                      uint64_t n);
/* The cap on distinct collections per task; 0 turns per-collection metrics
 * off (no series, no cost beyond a load). Set once before tasks start. */
void metrics_set_collection_cap(size_t cap);
#define METRICS_COLLECTIONS_DEFAULT 100
#define METRICS_COLLECTION_OVERFLOW "__overflow__"

/* Adds n to a counter. */
void metrics_add(struct metrics_task *t, enum metrics_counter c, uint64_t n);

/* The task's state; entering a state also counts as progress. */
void metrics_set_state(struct metrics_task *t, enum metrics_state s);

/* The task made progress now (an event, an empty getMore that answered, a
 * snapshot batch): /ready needs progress within metrics.ready.window.ms. */
void metrics_progress(struct metrics_task *t);

/* The source time (epoch ms) of the last event processed: the wallTime of a
 * change event, or the cluster time of the stream position when idle.
 * Exposed as mongocdc_behind_source_seconds (Debezium: MilliSecondsBehindSource). */
void metrics_set_source_time_ms(struct metrics_task *t, int64_t epoch_ms);

/* An offset was written to the store now (mongocdc_offset_age_seconds). */
void metrics_offset_stored(struct metrics_task *t);

/* How long (ms) the stored position has not moved while the stream read past
 * it, once over offsets.stall.threshold.ms; 0 when it is not stalled
 * (mongocdc_offset_stalled_seconds). */
void metrics_set_offset_stalled(struct metrics_task *t, int64_t ms);

/* Oplog headroom: the oplog's oldest entry time and the stored position's
 * time, both epoch seconds (headroom = stored - oldest). */
void metrics_set_oplog(struct metrics_task *t, int64_t oldest_sec, int64_t stored_sec);

/* Records produced and not yet acknowledged, and their bytes (key + value). */
void metrics_set_queue(struct metrics_task *t, int64_t records, int64_t bytes);

/* Snapshot progress: collections planned, collections done, documents
 * copied, documents expected in all (copied + still expected, see
 * snapshot_docs_progress(); -1 unknown); the remaining gauge is their
 * difference, never below 0.
 * Debezium: TotalTableCount, RemainingTableCount, RowsScanned. */
void metrics_set_snapshot(struct metrics_task *t, int64_t colls_total, int64_t colls_done,
                          int64_t docs_done, int64_t docs_estimated);

/* One record's delivery latency, produce to acknowledgement, in microseconds
 * (librdkafka rd_kafka_message_latency). */
void metrics_observe_delivery_us(struct metrics_task *t, int64_t us);

/* Exactly-once: one transaction's commit time (the flush of its records, the
 * offset record and rd_kafka_commit_transaction), in microseconds. */
void metrics_observe_txn_commit_us(struct metrics_task *t, int64_t us);

/*
 * Renders every metric in the text exposition format into a malloc'd,
 * NUL-terminated buffer the caller frees; *len gets its length.
 */
char *metrics_render(size_t *len);

/*
 * /health: true when at least one task is registered and none has failed.
 * /ready: true when every task is snapshotting or streaming and made
 * progress within window_ms; a task stopped cleanly (its shard was removed
 * from the cluster) is left out, but not every task may be stopped. why (size n) says which task is not, and why.
 */
bool metrics_healthy(char *why, size_t n);
bool metrics_ready(int64_t window_ms, char *why, size_t n);

/* Forgets every task (unit tests). */
void metrics_reset(void);

#endif
