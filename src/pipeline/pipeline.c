/*
 * pipeline: lifecycle, encoding and producing, delivery reports (design.md
 * §6, §7). The commit side is pipeline_commit.c.
 *
 * Thread: the owning capture task's.
 */
#include "pipeline/pipeline_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "encode/ejson.h"
#include "metrics/metrics.h"

#define PAUSE_STEP_MS 100

/* ---- lifecycle ---- */

struct pipeline *pipeline_new(const struct pipeline_options *o)
{
    struct pipeline *p = xzalloc_aligned(_Alignof(struct pipeline), sizeof *p); /* bson_t members */

    p->o = *o;
    position_init(&p->to_commit);
    position_init(&p->txn_pos);
    p->last_commit_ms = mcdc_clock_mono_ms();
    return p;
}

bool pipeline_open(struct pipeline *p, const char *name, const char *partition,
                   struct metrics_task *m, struct mcdc_error *err)
{
    free(p->name);
    free(p->partition);
    p->name = xstrdup(name);
    p->partition = partition != NULL ? xstrdup(partition) : NULL;
    p->m = m;
    p->enc = encoder_new(p->o.cfg, err);
    if (p->enc == NULL)
        return false;
    p->inf = inflight_new();
    if (pipeline_txn_start(p, err))
        p->store = offset_store_open(p->o.cfg, err);
    if (p->store == NULL) {
        pipeline_drop(p);
        return false;
    }
    pipeline_txn_attach(p);
    return true;
}

bool pipeline_is_open(const struct pipeline *p)
{
    return p != NULL && p->enc != NULL;
}

void pipeline_drop(struct pipeline *p)
{
    pipeline_txn_stop(p);
    sink_destroy(p->sink);
    p->sink = NULL;
    inflight_destroy(p->inf);
    p->inf = NULL;
    offset_store_close(p->store);
    p->store = NULL;
    encoder_destroy(p->enc);
    p->enc = NULL;
    p->to_commit_dirty = false;
    p->txn_pos_dirty = false;
    p->txn_open = false;
    p->batch_end = false;
    p->delivery_failed = false;
    p->must_restart = false;
    p->ack_stalled = false;
    p->ack_wait_since_ms = 0;
}

void pipeline_close(struct pipeline *p)
{
    if (p == NULL)
        return;
    pipeline_drop(p);
    position_clear(&p->to_commit);
    position_clear(&p->txn_pos);
    free(p->txn_id);
    free(p->name);
    free(p->partition);
    free(p->failed_at);
    free(p->stored_json);
    free(p);
}

struct encoder *pipeline_encoder(struct pipeline *p)
{
    return p->enc;
}

struct offset_store *pipeline_store(struct pipeline *p)
{
    return p->store;
}

/* ---- deliveries ---- */

bool pipeline_too_large(const struct mcdc_error *err)
{
    return err->domain == MCDC_ERR_KAFKA && err->code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
}

/* Inside sink_poll/produce/flush, on the task's thread. */
void pipeline_on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                          bool dead_lettered, void *ctx)
{
    struct pipeline *p = ctx;

    if (latency_us >= 0)
        metrics_observe_delivery_us(p->m, latency_us);
    metrics_add(p->m, err == NULL ? METRICS_RECORDS_ACKED : METRICS_RECORDS_FAILED, 1);
    if (err == NULL) {
        if (dead_lettered) {
            /* The dead-letter copy stands for the record (sink_kafka.c). */
            p->dead_lettered++;
            metrics_add(p->m, METRICS_RECORDS_DEAD_LETTERED, 1);
        }
        inflight_ack(p->inf, opaque);
        p->last_ack_ms = mcdc_clock_mono_ms();
        if (p->ack_stalled) {
            p->ack_stalled = false;
            LOG_INFO("Kafka acknowledges records again after %lld ms without one",
                     (long long)(p->last_ack_ms - p->ack_wait_since_ms));
        }
        return;
    }
    /* Never acknowledged: the committed position stays before this record. */
    if (!p->delivery_failed) {
        p->delivery_failed = true;
        p->delivery_err = *err;
    }
}

void pipeline_poll(struct pipeline *p)
{
    if (p != NULL && p->sink != NULL)
        sink_poll(p->sink, 0);
}

bool pipeline_flush(struct pipeline *p, struct mcdc_error *err)
{
    if (!pipeline_is_open(p))
        return true;
    return sink_flush(p->sink, (int)p->o.cfg->offsets_flush_timeout_ms, err);
}

bool pipeline_pause_ms(struct pipeline *p, int64_t ms)
{
    int64_t end = mcdc_clock_mono_ms() + ms;

    while (!pipeline_stopping(p) && mcdc_clock_mono_ms() < end) {
        int64_t left = end - mcdc_clock_mono_ms();
        int64_t step = left < PAUSE_STEP_MS ? left : PAUSE_STEP_MS;
        struct timespec ts = {0, (long)step * 1000000L};
        pipeline_poll(p);
        nanosleep(&ts, NULL);
    }
    return !pipeline_stopping(p);
}

/* ---- producing ---- */

/* pos (borrowed, may be NULL) is reached without a record. */
static void advance(struct pipeline *p, const struct mcdc_position *pos)
{
    inflight_advance(p->inf, pos);
    pipeline_txn_reached(p, pos);
}

void pipeline_pass(struct pipeline *p, const struct mcdc_position *pos)
{
    advance(p, pos);
}

/* The topic is not known to the cluster (yet): librdkafka's local
 * ERR__UNKNOWN_TOPIC or the broker's UNKNOWN_TOPIC_OR_PART. */
static bool topic_not_ready(const struct mcdc_error *err)
{
    return err->domain == MCDC_ERR_KAFKA && (err->code == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
                                             err->code == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
}

/* Produces r with cookie, waiting while its topic is not known yet. */
static bool produce_one(struct pipeline *p, struct mcdc_record *r, void *cookie,
                        struct mcdc_error *err)
{
    int64_t last_warn = 0;
    bool ok;

    for (;;) {
        *err = (struct mcdc_error)MCDC_ERROR_INIT;
        ok = sink_produce(p->sink, r, cookie, p->o.stop, err);
        if (ok || pipeline_stopping(p) || !topic_not_ready(err))
            return ok;
        /* Auto-created topics appear a moment after the first produce, and a
         * broker outage can leave the topic unknown for a while: wait (the
         * record keeps its buffers), never drop. */
        if (mcdc_clock_mono_ms() - last_warn >= 10000) {
            LOG_WARN("%s: %s; retrying until the topic exists", r->topic, err->msg);
            last_warn = mcdc_clock_mono_ms();
        }
        if (!pipeline_pause_ms(p, 200))
            return false;
    }
}

enum pipeline_status pipeline_produce(struct pipeline *p, struct mcdc_records *recs,
                                      const struct mcdc_position *pos, const char *what,
                                      struct mcdc_error *err)
{
    enum pipeline_status st = PIPELINE_OK;

    if (recs->count == 0 && pos != NULL)
        advance(p, pos);
    for (size_t i = 0; i < recs->count; i++) {
        struct mcdc_record *r = &recs->items[i];
        size_t key_len = r->key_len, value_len = r->value_len;
        char key[120];
        /* Only an event's last record carries its position: the event is
         * committed once all of its records are acknowledged. */
        void *cookie = inflight_add(p->inf, i + 1 == recs->count ? pos : NULL);

        if (!pipeline_txn_begin(p, err) || !produce_one(p, r, cookie, err)) {
            if (pipeline_stopping(p)) {
                st = PIPELINE_STOPPED;
                break;
            }
            if (p->eos && (p->txn_status != SINK_TXN_OK || sink_fatal(p->sink, err))) {
                /* fenced (another instance, or a transaction the broker
                 * timed out) or a fatal producer: the transaction's word */
                struct mcdc_error e = *err;
                enum sink_txn_status ts = p->txn_status != SINK_TXN_OK ? p->txn_status
                                                                        : SINK_TXN_FATAL;
                p->txn_status = SINK_TXN_OK;
                records_release(recs);
                return pipeline_txn_failed(p, ts, &e, err);
            }
            if (p->eos && err->domain == MCDC_ERR_KAFKA && err->code == RD_KAFKA_RESP_ERR__STATE) {
                /* the transaction already failed (an abortable error): abort
                 * it and read its changes again */
                struct mcdc_error e = *err;
                records_release(recs);
                return pipeline_txn_abort(p, &e, err);
            }
            /* a failed produce leaves the key with the record (sink.h) */
            snprintf(key, sizeof key, "%.*s", (int)(r->key_len < 100 ? r->key_len : 100),
                     r->key ? r->key : "");
            /* A too-large record: the sink's message already names size,
             * topic and key, and a prefix would push its advice out. */
            if (!pipeline_too_large(err))
                mcdc_error_prefix(err,
                                  "record for %s key %s (%zu bytes key, %zu bytes value) cannot "
                                  "be delivered",
                                  what, key, key_len, value_len);
            st = PIPELINE_FATAL;
            break;
        }
        p->records++;
        p->txn_records++;
        metrics_add(p->m, METRICS_RECORDS_PRODUCED, 1);
    }
    if (st == PIPELINE_OK && recs->count > 0)
        pipeline_txn_reached(p, pos);
    records_release(recs);
    return st;
}

/* ---- events ---- */

void pipeline_event_id(const struct mcdc_event *ev, char *out, size_t size)
{
    bson_iter_t it;

    if (ev->has_document_key && bson_iter_init_find(&it, &ev->document_key, "_id")) {
        /* {"_id": <relaxed extended JSON>}, the project's writer (the same
         * bytes with every libbson version) */
        bson_t one = BSON_INITIALIZER;
        struct ejson_buf b = {0};
        bson_append_iter(&one, "_id", 3, &it);
        ejson_write_document(&b, &one, EJSON_RELAXED, EJSON_SEP_DEFAULT);
        snprintf(out, size, "%.*s", (int)(b.len < (size_t)INT_MAX ? b.len : (size_t)INT_MAX),
                 b.data ? b.data : "");
        ejson_buf_free(&b);
        bson_destroy(&one);
    }
}

/* "<db>.<coll>" of ev into what (cap bytes, cut to fit, NUL-terminated):
 * what a failed or dead-lettered record names. Once per event, so without
 * snprintf's cost (about a thousand instructions). */
static void ns_text(char *what, size_t cap, const struct mcdc_event *ev)
{
    size_t db = ev->db ? ev->db_len : 0, coll = ev->coll ? ev->coll_len : 0, n = 0;
    if (db > cap - 1)
        db = cap - 1;
    memcpy(what, ev->db ? ev->db : "", db);
    n = db;
    if (n < cap - 1)
        what[n++] = '.';
    if (coll > cap - 1 - n)
        coll = cap - 1 - n;
    memcpy(what + n, ev->coll ? ev->coll : "", coll);
    what[n + coll] = '\0';
}

enum pipeline_status pipeline_event_failed(struct pipeline *p, const struct mcdc_event *ev,
                                           const struct mcdc_position *pos,
                                           const struct mcdc_error *cause, struct mcdc_error *err)
{
    char what[300], id[200] = "unknown";

    ns_text(what, sizeof what, ev);
    pipeline_event_id(ev, id, sizeof id);
    if (p->o.cfg->failure_mode == MCDC_FAILURE_FAIL) {
        *err = *cause;
        mcdc_error_prefix(err,
                          "cannot encode a change of %s %s (event.processing.failure.handling."
                          "mode warn or skip moves past it)",
                          what, id);
        return PIPELINE_FATAL;
    }
    p->failed_events++;
    if (p->o.cfg->failure_mode == MCDC_FAILURE_WARN)
        LOG_WARN("skipping a change of %s %s that cannot be encoded: %s (%llu so far)", what, id,
                 cause->msg, (unsigned long long)p->failed_events);
    else
        LOG_INFO("skipping a change of %s %s that cannot be encoded: %s (%llu so far)", what, id,
                 cause->msg, (unsigned long long)p->failed_events);
    advance(p, pos);
    return PIPELINE_OK;
}

enum pipeline_status pipeline_emit(struct pipeline *p, const struct mcdc_event *ev,
                                   const struct mcdc_position *pos, struct mcdc_error *err)
{
    struct mcdc_records recs = {.count = 0};
    struct mcdc_error cause = MCDC_ERROR_INIT;
    char what[300], id[200] = "";

    ns_text(what, sizeof what, ev);
    if (!encoder_encode(p->enc, ev, mcdc_clock_wall_us(), &recs, &cause))
        return pipeline_event_failed(p, ev, pos, &cause, err);
    if (p->o.cfg->dlq_topic && *p->o.cfg->dlq_topic) {
        /* What a dead-letter copy's metadata names (sink_kafka.c). */
        pipeline_event_id(ev, id, sizeof id);
        for (size_t i = 0; i < recs.count; i++) {
            recs.items[i].ns = what;
            recs.items[i].id = id;
        }
    }
    return pipeline_produce(p, &recs, pos, what, err);
}

/* ---- counts ---- */

size_t pipeline_in_flight(const struct pipeline *p)
{
    return p != NULL && p->sink != NULL ? sink_in_flight(p->sink) : 0;
}

size_t pipeline_pending(const struct pipeline *p)
{
    return p != NULL && p->inf != NULL ? inflight_pending(p->inf) : 0;
}

uint64_t pipeline_records(const struct pipeline *p)
{
    return p != NULL ? p->records : 0;
}

uint64_t pipeline_failed_events(const struct pipeline *p)
{
    return p != NULL ? p->failed_events : 0;
}

uint64_t pipeline_dead_lettered(const struct pipeline *p)
{
    return p != NULL ? p->dead_lettered : 0;
}

int64_t pipeline_failure_streak(const struct pipeline *p)
{
    return p != NULL ? p->failures : 0;
}

bool pipeline_must_restart(const struct pipeline *p)
{
    return p != NULL && p->must_restart;
}

const char *pipeline_stored_json(const struct pipeline *p)
{
    return p != NULL ? p->stored_json : NULL;
}

int64_t pipeline_stored_sec(const struct pipeline *p)
{
    return p != NULL ? p->stored_sec : 0;
}
