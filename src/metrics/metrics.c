/*
 * metrics: per-task counters and gauges, and their text exposition
 * (Prometheus exposition format 0.0.4). See metrics.h.
 */
#include "metrics/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "metrics/metrics_internal.h"

/* Delivery-latency bucket bounds, seconds (le="..."); +Inf is implied. */
static const double latency_bounds[LATENCY_BUCKETS] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                       0.5,   1,     2.5,  5,     10,   30};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct metrics_task *tasks[METRICS_MAX_TASKS];
static size_t ntasks;

const char *const metrics_op_labels[METRICS_OP_COUNT] = {"c", "u", "d", "r", "other"};
static const char *const state_labels[METRICS_STATE_COUNT] = {
    "starting", "snapshotting", "streaming", "reconnecting", "stopped", "failed"};

struct metrics_task *metrics_task_register(const char *name)
{
    struct metrics_task *t = NULL;

    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < ntasks; i++)
        if (strcmp(tasks[i]->name, name) == 0)
            t = tasks[i];
    if (t == NULL && ntasks < METRICS_MAX_TASKS) {
        t = xcalloc(1, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        atomic_store(&t->progress_ms, mcdc_clock_mono_ms());
        atomic_store(&t->snap_docs_est, -1);
        t->colls = metrics_colls_new();
        tasks[ntasks++] = t;
    }
    pthread_mutex_unlock(&reg_mu);
    return t;
}

void metrics_task_rename(struct metrics_task *t, const char *name)
{
    if (t == NULL)
        return;
    pthread_mutex_lock(&reg_mu);
    snprintf(t->name, sizeof t->name, "%s", name);
    pthread_mutex_unlock(&reg_mu);
}

static void bump(atomic_uint_fast64_t *a, uint64_t n)
{
    atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

void metrics_event_seen(struct metrics_task *t, enum metrics_op op)
{
    if (t != NULL && op < METRICS_OP_COUNT)
        bump(&t->seen[op], 1);
}

void metrics_event_filtered(struct metrics_task *t, enum metrics_op op)
{
    if (t != NULL && op < METRICS_OP_COUNT)
        bump(&t->filtered[op], 1);
}

void metrics_event_emitted(struct metrics_task *t, enum metrics_op op)
{
    if (t != NULL && op < METRICS_OP_COUNT)
        bump(&t->emitted[op], 1);
}

void metrics_add(struct metrics_task *t, enum metrics_counter c, uint64_t n)
{
    if (t != NULL && c < METRICS_COUNTER_COUNT)
        bump(&t->counters[c], n);
}

void metrics_progress(struct metrics_task *t)
{
    if (t != NULL)
        atomic_store_explicit(&t->progress_ms, mcdc_clock_mono_ms(), memory_order_relaxed);
}

void metrics_set_state(struct metrics_task *t, enum metrics_state s)
{
    if (t == NULL || s >= METRICS_STATE_COUNT)
        return;
    atomic_store(&t->state, (int)s);
    metrics_progress(t);
}

void metrics_set_source_time_ms(struct metrics_task *t, int64_t epoch_ms)
{
    if (t != NULL && epoch_ms > 0)
        atomic_store_explicit(&t->source_ms, epoch_ms, memory_order_relaxed);
}

void metrics_offset_stored(struct metrics_task *t)
{
    if (t == NULL)
        return;
    atomic_store_explicit(&t->offset_ms, mcdc_clock_wall_ms(), memory_order_relaxed);
    bump(&t->counters[METRICS_OFFSET_COMMITS], 1);
}

void metrics_set_offset_stalled(struct metrics_task *t, int64_t ms)
{
    if (t != NULL)
        atomic_store_explicit(&t->stalled_ms, ms > 0 ? ms : 0, memory_order_relaxed);
}

void metrics_set_oplog(struct metrics_task *t, int64_t oldest_sec, int64_t stored_sec)
{
    if (t == NULL)
        return;
    atomic_store(&t->oplog_oldest, oldest_sec);
    atomic_store(&t->oplog_stored, stored_sec);
}

void metrics_set_queue(struct metrics_task *t, int64_t records, int64_t bytes)
{
    if (t == NULL)
        return;
    atomic_store_explicit(&t->queue_records, records, memory_order_relaxed);
    atomic_store_explicit(&t->queue_bytes, bytes, memory_order_relaxed);
}

void metrics_set_snapshot(struct metrics_task *t, int64_t colls_total, int64_t colls_done,
                          int64_t docs_done, int64_t docs_estimated)
{
    if (t == NULL)
        return;
    atomic_store(&t->snap_colls_total, colls_total);
    atomic_store(&t->snap_colls_done, colls_done);
    atomic_store(&t->snap_docs_done, docs_done);
    atomic_store(&t->snap_docs_est, docs_estimated);
}

static void hist_observe(struct metrics_hist *h, int64_t us)
{
    size_t i = 0;

    while (i < LATENCY_BUCKETS && (double)us / 1e6 > latency_bounds[i])
        i++;
    bump(&h->bucket[i], 1);
    bump(&h->sum_us, (uint64_t)us);
}

void metrics_observe_delivery_us(struct metrics_task *t, int64_t us)
{
    if (t != NULL && us >= 0)
        hist_observe(&t->latency, us);
}

void metrics_observe_txn_commit_us(struct metrics_task *t, int64_t us)
{
    if (t != NULL && us >= 0)
        hist_observe(&t->txn_latency, us);
}

/* ---- exposition ---- */

void outf(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        o->cap = o->cap * 2 + (n > 0 ? (size_t)n : 0);
        o->buf = xrealloc(o->buf, o->cap);
    }
}

void metrics_header(struct out *o, const char *name, const char *type, const char *help)
{
    outf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values in the exposition escape \, " and newline. Task names are
 * replica-set names, but a shard name could hold anything. */
void metrics_esc(char *dst, size_t n, const char *src)
{
    size_t j = 0;
    for (; *src && j + 2 < n; src++) {
        if (*src == '\\' || *src == '"' || *src == '\n') {
            dst[j++] = '\\';
            dst[j++] = *src == '\n' ? 'n' : *src;
        } else {
            dst[j++] = *src;
        }
    }
    dst[j] = '\0';
}

static void per_op(struct out *o, const char *name, const char *help, size_t off)
{
    char nm[300];

    metrics_header(o, name, "counter", help);
    for (size_t i = 0; i < ntasks; i++) {
        const atomic_uint_fast64_t *a =
            (const atomic_uint_fast64_t *)((const char *)tasks[i] + off);
        metrics_esc(nm, sizeof nm, tasks[i]->name);
        for (int op = 0; op < METRICS_OP_COUNT; op++)
            outf(o, "%s{task=\"%s\",op=\"%s\"} %llu\n", name, nm, metrics_op_labels[op],
                 (unsigned long long)atomic_load(&a[op]));
    }
}

static void per_task_counter(struct out *o, const char *name, const char *help,
                             enum metrics_counter c)
{
    char nm[300];

    metrics_header(o, name, "counter", help);
    for (size_t i = 0; i < ntasks; i++) {
        metrics_esc(nm, sizeof nm, tasks[i]->name);
        outf(o, "%s{task=\"%s\"} %llu\n", name, nm,
             (unsigned long long)atomic_load(&tasks[i]->counters[c]));
    }
}

/* A gauge per task; value() returns false to leave the task's sample out. */
static void per_task_gauge(struct out *o, const char *name, const char *help,
                           bool (*value)(const struct metrics_task *, int64_t, double *),
                           int64_t now_ms)
{
    char nm[300];
    double v;

    metrics_header(o, name, "gauge", help);
    for (size_t i = 0; i < ntasks; i++) {
        if (!value(tasks[i], now_ms, &v))
            continue;
        metrics_esc(nm, sizeof nm, tasks[i]->name);
        outf(o, "%s{task=\"%s\"} %.3f\n", name, nm, v);
    }
}

static bool v_behind(const struct metrics_task *t, int64_t now, double *v)
{
    int64_t s = atomic_load(&t->source_ms);
    *v = s > 0 && now > s ? (double)(now - s) / 1000.0 : 0.0;
    return s > 0;
}

static bool v_offset_age(const struct metrics_task *t, int64_t now, double *v)
{
    int64_t s = atomic_load(&t->offset_ms);
    *v = s > 0 && now > s ? (double)(now - s) / 1000.0 : 0.0;
    return s > 0;
}

static bool v_stalled(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)atomic_load(&t->stalled_ms) / 1000.0;
    return true;
}

static bool v_headroom(const struct metrics_task *t, int64_t now, double *v)
{
    int64_t oldest = atomic_load(&t->oplog_oldest), stored = atomic_load(&t->oplog_stored);
    (void)now;
    *v = (double)(stored - oldest);
    return oldest > 0 && stored > 0;
}

static bool v_oplog_window(const struct metrics_task *t, int64_t now, double *v)
{
    int64_t oldest = atomic_load(&t->oplog_oldest);
    *v = (double)(now / 1000 - oldest);
    return oldest > 0;
}

static bool v_queue_records(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)atomic_load(&t->queue_records);
    return true;
}

static bool v_queue_bytes(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)atomic_load(&t->queue_bytes);
    return true;
}

static bool v_colls_total(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)atomic_load(&t->snap_colls_total);
    return true;
}

static bool v_colls_done(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)atomic_load(&t->snap_colls_done);
    return true;
}

static bool v_docs_done(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)atomic_load(&t->snap_docs_done);
    return true;
}

static bool v_docs_remaining(const struct metrics_task *t, int64_t now, double *v)
{
    int64_t est = atomic_load(&t->snap_docs_est), done = atomic_load(&t->snap_docs_done);
    (void)now;
    *v = est > done ? (double)(est - done) : 0.0;
    return est >= 0;
}

static bool v_progress_age(const struct metrics_task *t, int64_t now, double *v)
{
    (void)now;
    *v = (double)(mcdc_clock_mono_ms() - atomic_load(&t->progress_ms)) / 1000.0;
    return true;
}

/* utime + stime (clock ticks) and RSS (pages) from /proc/self/stat (proc(5)). */
static bool proc_stat(double *cpu_s, double *rss_bytes, double *start_s)
{
    char buf[1024], *p;
    unsigned long long ut, st, start, rss;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n;

    if (f == NULL)
        return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* comm may hold spaces */
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                      "%*d %*d %llu %*u %llu",
               &ut, &st, &start, &rss) != 4)
        return false;
    long tck = sysconf(_SC_CLK_TCK), pg = sysconf(_SC_PAGESIZE);
    *cpu_s = (double)(ut + st) / (double)tck;
    *rss_bytes = (double)rss * (double)pg;
    {
        /* starttime is in ticks since boot: boot time from /proc/stat btime. */
        unsigned long long btime = 0;
        char line[256];
        FILE *s = fopen("/proc/stat", "r");
        while (s != NULL && fgets(line, sizeof line, s) != NULL)
            if (sscanf(line, "btime %llu", &btime) == 1)
                break;
        if (s != NULL)
            fclose(s);
        *start_s = (double)btime + (double)start / (double)tck;
    }
    return true;
}

/* A histogram of every task (the struct metrics_hist at offset off of each). */
static void hist_render(struct out *o, const char *name, const char *help,
                        struct metrics_task *const *all, size_t n, size_t off)
{
    char nm[256];

    metrics_header(o, name, "histogram", help);
    for (size_t i = 0; i < n; i++) {
        const struct metrics_hist *h = (const void *)((const char *)all[i] + off);
        uint64_t cum = 0;
        metrics_esc(nm, sizeof nm, all[i]->name);
        for (size_t b = 0; b <= LATENCY_BUCKETS; b++) {
            cum += atomic_load(&h->bucket[b]);
            if (b < LATENCY_BUCKETS)
                outf(o, "%s_bucket{task=\"%s\",le=\"%g\"} %llu\n", name, nm, latency_bounds[b],
                     (unsigned long long)cum);
            else
                outf(o, "%s_bucket{task=\"%s\",le=\"+Inf\"} %llu\n", name, nm,
                     (unsigned long long)cum);
        }
        outf(o, "%s_sum{task=\"%s\"} %.6f\n", name, nm, (double)atomic_load(&h->sum_us) / 1e6);
        outf(o, "%s_count{task=\"%s\"} %llu\n", name, nm, (unsigned long long)cum);
    }
}

char *metrics_render(size_t *len)
{
    struct out o = {.buf = xmalloc(8192), .len = 0, .cap = 8192};
    int64_t now = mcdc_clock_wall_ms();
    double cpu, rss, start;
    char nm[300];

    pthread_mutex_lock(&reg_mu);
    per_op(&o, "mongocdc_events_seen_total",
           "Change events read from the source, by op (Debezium TotalNumberOfEventsSeen).",
           offsetof(struct metrics_task, seen));
    per_op(&o, "mongocdc_events_filtered_total",
           "Change events not captured by the collection filters (Debezium "
           "NumberOfEventsFiltered).",
           offsetof(struct metrics_task, filtered));
    per_op(&o, "mongocdc_events_emitted_total",
           "Change events turned into Kafka records, by op.",
           offsetof(struct metrics_task, emitted));
    per_task_counter(&o, "mongocdc_records_produced_total",
                     "Records handed to the Kafka producer.", METRICS_RECORDS_PRODUCED);
    per_task_counter(&o, "mongocdc_records_acknowledged_total",
                     "Records acknowledged by Kafka.", METRICS_RECORDS_ACKED);
    per_task_counter(&o, "mongocdc_records_failed_total",
                     "Records Kafka refused permanently.", METRICS_RECORDS_FAILED);
    per_task_counter(&o, "mongocdc_records_dead_lettered_total",
                     "Records too large for Kafka, sent to errors.deadletterqueue.topic.name "
                     "instead.",
                     METRICS_RECORDS_DEAD_LETTERED);
    per_task_counter(&o, "mongocdc_reconnects_total",
                     "Reconnections after a transient failure.", METRICS_RECONNECTS);
    per_task_counter(&o, "mongocdc_offset_commits_total",
                     "Positions written to the offset store.", METRICS_OFFSET_COMMITS);
    per_task_counter(&o, "mongocdc_events_oversize_skipped_total",
                     "Change events whose document was over cursor.oversize.skip.threshold, "
                     "skipped on the server (cursor.oversize.handling.mode skip).",
                     METRICS_EVENTS_OVERSIZE_SKIPPED);
    per_task_counter(&o, "mongocdc_events_split_total",
                     "Change events over 16 MiB reassembled from $changeStreamSplitLargeEvent "
                     "fragments (cursor.oversize.handling.mode split).",
                     METRICS_EVENTS_SPLIT);
    per_task_counter(&o, "mongocdc_transactions_committed_total",
                     "Exactly-once: Kafka transactions committed (records and the offset "
                     "covering them).",
                     METRICS_TXN_COMMITTED);
    per_task_counter(&o, "mongocdc_transactions_aborted_total",
                     "Exactly-once: Kafka transactions aborted (their records are never visible "
                     "to read_committed consumers; the changes are read again).",
                     METRICS_TXN_ABORTED);
    per_task_gauge(&o, "mongocdc_produce_queue_records",
                   "Records produced and not yet acknowledged (Debezium QueueTotalCapacity - "
                   "QueueRemainingCapacity).",
                   v_queue_records, now);
    per_task_gauge(&o, "mongocdc_produce_queue_bytes",
                   "Key and value bytes of the records not yet acknowledged (Debezium "
                   "CurrentQueueSizeInBytes).",
                   v_queue_bytes, now);
    per_task_gauge(&o, "mongocdc_behind_source_seconds",
                   "Now minus the source time of the last event or idle stream position "
                   "(Debezium MilliSecondsBehindSource / 1000).",
                   v_behind, now);
    per_task_gauge(&o, "mongocdc_offset_age_seconds",
                   "Seconds since the last offset was stored.", v_offset_age, now);
    per_task_gauge(&o, "mongocdc_offset_stalled_seconds",
                   "Seconds the stored position has not moved while the stream read past it, "
                   "once over offsets.stall.threshold.ms; 0 when it moves.",
                   v_stalled, now);
    per_task_gauge(&o, "mongocdc_oplog_headroom_seconds",
                   "Stored position time minus the oldest oplog entry time: how much "
                   "history is left before the stored position falls off the oplog.",
                   v_headroom, now);
    per_task_gauge(&o, "mongocdc_oplog_window_seconds",
                   "Now minus the oldest oplog entry time.", v_oplog_window, now);
    per_task_gauge(&o, "mongocdc_progress_age_seconds",
                   "Seconds since the task last made progress (an event, an answered "
                   "getMore, a snapshot batch).",
                   v_progress_age, now);
    per_task_gauge(&o, "mongocdc_snapshot_collections_planned",
                   "Collections the snapshot copies (Debezium TotalTableCount).", v_colls_total,
                   now);
    per_task_gauge(&o, "mongocdc_snapshot_collections_done",
                   "Collections the snapshot has finished (TotalTableCount - "
                   "RemainingTableCount).",
                   v_colls_done, now);
    per_task_gauge(&o, "mongocdc_snapshot_documents_done",
                   "Documents the snapshot has copied (Debezium RowsScanned, summed).",
                   v_docs_done, now);
    per_task_gauge(&o, "mongocdc_snapshot_documents_remaining",
                   "Estimated documents left to copy (estimatedDocumentCount - copied).",
                   v_docs_remaining, now);

    metrics_header(&o, "mongocdc_task_state", "gauge",
                   "1 for the state each task is in (Debezium Connected, SnapshotRunning).");
    for (size_t i = 0; i < ntasks; i++) {
        int s = atomic_load(&tasks[i]->state);
        metrics_esc(nm, sizeof nm, tasks[i]->name);
        for (int k = 0; k < METRICS_STATE_COUNT; k++)
            outf(&o, "mongocdc_task_state{task=\"%s\",state=\"%s\"} %d\n", nm, state_labels[k],
                 k == s);
    }

    hist_render(&o, "mongocdc_delivery_latency_seconds",
                "Produce-to-acknowledgement latency of records.", tasks, ntasks,
                offsetof(struct metrics_task, latency));
    hist_render(&o, "mongocdc_transaction_commit_latency_seconds",
                "Exactly-once: time to commit a transaction (flush of its records, the offset "
                "record, commit).",
                tasks, ntasks, offsetof(struct metrics_task, txn_latency));
    metrics_colls_render(&o, tasks, ntasks);
    pthread_mutex_unlock(&reg_mu);

    if (proc_stat(&cpu, &rss, &start)) {
        metrics_header(&o, "process_cpu_seconds_total", "counter",
                       "User and system CPU time, seconds.");
        outf(&o, "process_cpu_seconds_total %.2f\n", cpu);
        metrics_header(&o, "process_resident_memory_bytes", "gauge",
                       "Resident memory size, bytes.");
        outf(&o, "process_resident_memory_bytes %.0f\n", rss);
        metrics_header(&o, "process_start_time_seconds", "gauge",
                       "Start time of the process since the epoch, seconds.");
        outf(&o, "process_start_time_seconds %.2f\n", start);
    }
    *len = o.len;
    return o.buf;
}

bool metrics_healthy(char *why, size_t n)
{
    bool ok = ntasks > 0;

    pthread_mutex_lock(&reg_mu);
    if (ntasks == 0)
        snprintf(why, n, "no capture task has started");
    for (size_t i = 0; i < ntasks && ok; i++)
        if (atomic_load(&tasks[i]->state) == METRICS_STATE_FAILED) {
            ok = false;
            snprintf(why, n, "task %s has failed", tasks[i]->name);
        }
    if (ok)
        snprintf(why, n, "ok");
    pthread_mutex_unlock(&reg_mu);
    return ok;
}

bool metrics_ready(int64_t window_ms, char *why, size_t n)
{
    bool ok = true;
    int64_t now = mcdc_clock_mono_ms();

    pthread_mutex_lock(&reg_mu);
    if (ntasks == 0) {
        ok = false;
        snprintf(why, n, "no capture task has started");
    }
    size_t live = 0;
    for (size_t i = 0; i < ntasks && ok; i++) {
        int s = atomic_load(&tasks[i]->state);
        int64_t age = now - atomic_load(&tasks[i]->progress_ms);
        /* A task that stopped cleanly while the daemon runs on (its shard
         * left config.shards) has nothing left to capture: it does not make
         * the daemon unready; a failed one does. */
        if (s == METRICS_STATE_STOPPED)
            continue;
        live++;
        if (s != METRICS_STATE_STREAMING && s != METRICS_STATE_SNAPSHOTTING) {
            ok = false;
            snprintf(why, n, "task %s is %s", tasks[i]->name, state_labels[s]);
        } else if (age > window_ms) {
            ok = false;
            snprintf(why, n, "task %s is %s but has made no progress for %lld ms", tasks[i]->name,
                     state_labels[s], (long long)age);
        }
    }
    if (ok && live == 0 && ntasks > 0) {
        ok = false;
        snprintf(why, n, "every capture task has stopped");
    }
    if (ok)
        snprintf(why, n, "ok");
    pthread_mutex_unlock(&reg_mu);
    return ok;
}

void metrics_reset(void)
{
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < ntasks; i++) {
        metrics_colls_free(tasks[i]->colls);
        free(tasks[i]);
    }
    ntasks = 0;
    pthread_mutex_unlock(&reg_mu);
}
