/*
 * worker_stream: the streaming phase of a capture task: change events ->
 * encode -> sink, filtered events and post-batch resume tokens advancing the
 * position, eager transaction END and heartbeats (debezium-format.md §1.9,
 * §3.4, §4.3; design.md §3).
 */
#include "worker/worker_internal.h"

#include <stdio.h>

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
