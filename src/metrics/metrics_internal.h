/*
 * metrics internals shared by metrics.c (per task) and metrics_coll.c (per
 * collection): the task slot, the exposition buffer and its helpers.
 */
#ifndef MCDC_METRICS_INTERNAL_H
#define MCDC_METRICS_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include "metrics/metrics.h"

#define LATENCY_BUCKETS 13

struct metrics_colls;

/* A latency histogram (bounds: latency_bounds in metrics.c). */
struct metrics_hist {
    atomic_uint_fast64_t bucket[LATENCY_BUCKETS + 1]; /* per bucket, not cumulative */
    atomic_uint_fast64_t sum_us;
};

struct metrics_task {
    char name[128];
    atomic_uint_fast64_t seen[METRICS_OP_COUNT], filtered[METRICS_OP_COUNT],
        emitted[METRICS_OP_COUNT];
    atomic_uint_fast64_t counters[METRICS_COUNTER_COUNT];
    atomic_int state;
    atomic_int_fast64_t progress_ms;  /* monotonic */
    atomic_int_fast64_t source_ms;    /* epoch; 0 none yet */
    atomic_int_fast64_t offset_ms;    /* epoch of the last offset store; 0 none */
    atomic_int_fast64_t oplog_oldest; /* epoch s; 0 unknown */
    atomic_int_fast64_t oplog_stored; /* epoch s */
    atomic_int_fast64_t stalled_ms;   /* stored position unmoved while the stream moved; 0 not */
    atomic_int_fast64_t queue_records, queue_bytes;
    atomic_int_fast64_t snap_colls_total, snap_colls_done, snap_docs_done, snap_docs_est;
    struct metrics_hist latency;     /* produce to acknowledgement */
    struct metrics_hist txn_latency; /* exactly-once: transaction commit */
    struct metrics_colls *colls; /* per-collection counters (metrics_coll.c) */
};

/* Label values of the op label, by enum metrics_op. */
extern const char *const metrics_op_labels[METRICS_OP_COUNT];

/* A growing exposition buffer. */
struct out {
    char *buf;
    size_t len, cap;
};

/* Appends printf-style text to o. */
void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "# HELP" and "# TYPE" lines of a metric family. */
void metrics_header(struct out *o, const char *name, const char *type, const char *help);
/* A label value escaped for the exposition (\, " and newline) into dst (size n). */
void metrics_esc(char *dst, size_t n, const char *src);

/* A task's per-collection table: new (empty), freed with the task. */
struct metrics_colls *metrics_colls_new(void);
void metrics_colls_free(struct metrics_colls *c);
/* Renders the per-collection families of every task (registry lock held). */
void metrics_colls_render(struct out *o, struct metrics_task *const *tasks, size_t n);

#endif
