/*
 * worker_stream: the streaming phase of a capture task: change events ->
 * encode -> sink, filtered events and post-batch resume tokens advancing the
 * position, eager transaction END and heartbeats (debezium-format.md §1.9,
 * §3.4, §4.3; design.md §3).
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "capture/capture.h"
#include "common/log.h"

/*
 * A position that is not an emitted data event (a filtered event, a
 * post-batch resume token): closes an open transaction eagerly when
 * transaction.eager.end is on, else just advances the position.
 */
static enum phase pass_position(struct worker *w, const struct mcdc_position *pos)
{
    struct mcdc_records recs = {.count = 0};
    uint32_t sec = 0, ord = 0;
    bool have = false;

    if (pos->sec >= 0) {
        sec = (uint32_t)pos->sec;
        ord = (uint32_t)pos->ord;
        have = true;
    } else if (pos->has_resume_token) {
        have = resume_token_time(&pos->resume_token, &sec, &ord);
    }
    if (have && encoder_transaction_passed(w->enc, sec, ord, (int64_t)sec * 1000, &recs))
        return worker_produce(w, &recs, pos, "a transaction END");
    inflight_advance(w->inf, pos);
    return PHASE_OK;
}

/* heartbeat.interval.ms: a heartbeat record carrying the current position
 * (debezium-format.md §1.9), so consumers see liveness and offsets move. */
static enum phase maybe_heartbeat(struct worker *w, int64_t *last_ms)
{
    struct mcdc_records recs = {.count = 0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    const struct mcdc_position *pos = NULL;

    if (w->cfg->heartbeat_interval_ms <= 0 ||
        worker_now_ms() - *last_ms < w->cfg->heartbeat_interval_ms)
        return PHASE_OK;
    *last_ms = worker_now_ms();
    if (w->stream_pos.has_resume_token || w->stream_pos.sec > 0)
        pos = &w->stream_pos;
    if (!encoder_heartbeat(w->enc, worker_wall_ms(), &recs, &err)) {
        w->err = err;
        return PHASE_FATAL;
    }
    return worker_produce(w, &recs, pos, "a heartbeat");
}

/* INFO for a drop, rename or dropDatabase of a captured namespace: no record
 * is produced for them (Debezium emits none), but an operator must be able
 * to see why a captured collection went quiet. */
static void log_namespace_event(struct worker *w, const bson_t *doc, const struct mcdc_event *ev)
{
    const char *t = ev->op_type;
    char db[256], coll[256];
    bson_iter_t it;

    if (t == NULL || ev->db == NULL)
        return;
    snprintf(db, sizeof db, "%.*s", (int)ev->db_len, ev->db);
    snprintf(coll, sizeof coll, "%.*s", (int)ev->coll_len, ev->coll ? ev->coll : "");
    if (!strcmp(t, "dropDatabase")) {
        LOG_INFO("database %s was dropped (its captured collections emit nothing more)", db);
        return;
    }
    if (ev->coll == NULL || !encoder_captures(w->enc, db, coll))
        return;
    if (!strcmp(t, "drop")) {
        LOG_INFO("captured collection %s.%s was dropped", db, coll);
    } else if (!strcmp(t, "rename")) {
        const char *to_db = "?", *to_coll = "?";
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "to.db", &it) &&
            BSON_ITER_HOLDS_UTF8(&it))
            to_db = bson_iter_utf8(&it, NULL);
        if (bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "to.coll", &it) &&
            BSON_ITER_HOLDS_UTF8(&it))
            to_coll = bson_iter_utf8(&it, NULL);
        LOG_INFO("captured collection %s.%s was renamed to %s.%s%s", db, coll, to_db, to_coll,
                 encoder_captures(w->enc, to_db, to_coll) ? ""
                                                          : " (not captured under its new name)");
    }
}

enum phase worker_stream(struct worker *w)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position pos;
    struct capture *cap;
    enum phase ph = PHASE_OK;
    char d[128];
    bool from_stored = w->stream_pos.has_resume_token || w->stream_pos.sec > 0;
    int64_t last_heartbeat_ms = worker_now_ms();

    ph = worker_await_server(w);
    if (ph != PHASE_OK)
        return ph;
    /* No stored position: capture.start.op.time when set, else now (§4.3). */
    cap = capture_open(w->client, w->cfg, w->has_pipeline ? &w->pipeline : NULL, &w->stream_pos,
                       &fail, &err);
    if (cap == NULL)
        return worker_phase_from_failure(w, &fail, &err);
    resume_describe_position(&w->stream_pos, d, sizeof d);
    if (from_stored)
        LOG_INFO("streaming changes from %s", d);
    else if (w->cfg->capture_start_op_time >= 0)
        LOG_INFO("streaming changes from capture.start.op.time Timestamp(%u, %u)",
                 (unsigned)((uint64_t)w->cfg->capture_start_op_time >> 32),
                 (unsigned)((uint64_t)w->cfg->capture_start_op_time & 0xffffffffu));
    else
        LOG_INFO("streaming changes from now (no stored position)");
    position_init(&pos);
    if (!from_stored) {
        /* Store where this stream starts before any record is produced: if no
         * record is acknowledged before a restart (a broker outage, a crash),
         * the task must resume here, not from a later "now". */
        const bson_t *start = capture_resume_token(cap);
        if (start != NULL && !bson_empty(start)) {
            bson_destroy(&pos.resume_token);
            bson_copy_to(start, &pos.resume_token);
            pos.has_resume_token = true;
            inflight_advance(w->inf, &pos);
            position_copy(&w->stream_pos, &pos);
            ph = worker_service(w, true);
            position_clear(&pos);
        }
    }
    while (!worker_stopping(w) && ph == PHASE_OK) {
        const bson_t *doc = NULL, *token;
        struct mcdc_event ev;
        bool emit = false;

        switch (capture_next(cap, &doc)) {
        case CAPTURE_EVENT:
            w->attempts = 0;
            w->events++;
            if (!capture_event_position(doc, &pos)) {
                ph = PHASE_FATAL;
                mcdc_error_set(&w->err, MCDC_ERR_MONGO, 0, "change event without a resume token");
                break;
            }
            event_init(&ev);
            if (!event_from_change(doc, &ev, &emit, &err)) {
                mcdc_error_prefix(&err, "unreadable change event");
                ph = worker_event_failed(w, &ev, &pos, &err);
                position_copy(&w->stream_pos, &pos);
                break;
            }
            ev.rs = w->rs;
            if (emit) {
                char db[256], coll[256];
                snprintf(db, sizeof db, "%.*s", (int)ev.db_len, ev.db ? ev.db : "");
                snprintf(coll, sizeof coll, "%.*s", (int)ev.coll_len, ev.coll ? ev.coll : "");
                emit = encoder_captures(w->enc, db, coll);
            }
            if (emit) {
                ph = worker_emit(w, &ev, &pos);
            } else {
                log_namespace_event(w, doc, &ev);
                /* Not captured: no record, but the position moves past it. */
                w->skipped++;
                ph = pass_position(w, &pos);
            }
            position_copy(&w->stream_pos, &pos);
            break;
        case CAPTURE_IDLE:
            w->attempts = 0;
            /* The post-batch resume token moves on while captured collections are
             * idle, so the stored position never ages out of the oplog. */
            token = capture_resume_token(cap);
            if (token != NULL && !bson_empty(token) &&
                !(w->stream_pos.has_resume_token &&
                  bson_equal(token, &w->stream_pos.resume_token))) {
                position_clear(&pos);
                bson_destroy(&pos.resume_token);
                bson_copy_to(token, &pos.resume_token);
                pos.has_resume_token = true;
                ph = pass_position(w, &pos);
                position_copy(&w->stream_pos, &pos);
            }
            break;
        case CAPTURE_ERROR:
        default:
            capture_failure(cap, &fail, &err);
            ph = worker_phase_from_failure(w, &fail, &err);
            break;
        }
        if (ph == PHASE_OK)
            ph = maybe_heartbeat(w, &last_heartbeat_ms);
        if (ph == PHASE_OK)
            ph = worker_service(w, false);
    }
    position_clear(&pos);
    capture_destroy(cap);
    return ph == PHASE_OK && worker_stopping(w) ? PHASE_STOPPED : ph;
}
