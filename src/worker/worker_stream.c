/*
 * worker_stream: the streaming phase of a capture task, one loop for both
 * capture modes over a source (capture/source.h: a change stream, or the
 * oplog opened by worker_oplog.c): changes -> signals -> order gate ->
 * encode -> sink; filtered changes, no-ops and post-batch resume tokens
 * advancing the position; eager transaction END, heartbeats, deliveries
 * and offsets, the primary check and draining between steps
 * (debezium-format.md §1.9, §3.4, §4.3; design.md §3).
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "capture/source.h"
#include "common/clock.h"
#include "common/log.h"

/*
 * A position that is not an emitted data event (a filtered event, a
 * post-batch resume token): closes an open transaction eagerly when
 * transaction.eager.end is on, else just advances the position.
 */
enum phase worker_pass_position(struct worker *w, const struct mcdc_position *pos)
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
    if (have && encoder_transaction_passed(pipeline_encoder(w->pipe), sec, ord,
                                           (int64_t)sec * 1000, &recs))
        return worker_produce(w, &recs, pos, "a transaction END");
    pipeline_pass(w->pipe, worker_incremental_stamp(w, pos));
    return PHASE_OK;
}

/* Held longer than this: one INFO naming the donor shard. */
#define GATE_LOG_MS 2000

/*
 * The per-document order gate (topology/gate.h): a document that came to
 * this shard with a chunk migration is published here only after the donor
 * shard's task has had every earlier event acknowledged. Keeps serving this
 * task's own deliveries while it waits.
 */
/* dst = the first len bytes of src (NULL: none), cut at a NUL and at cap - 1
 * bytes, NUL-terminated: snprintf's "%.*s" without the format parsing, on
 * every event's namespace. */
static void name_copy(char *dst, size_t cap, const char *src, size_t len)
{
    len = src != NULL ? strnlen(src, len < cap - 1 ? len : cap - 1) : 0;
    memcpy(dst, src != NULL ? src : "", len);
    dst[len] = '\0';
}

static enum phase hold_for_donor(struct worker *w, const struct mcdc_event *ev)
{
    char db[256], coll[256];
    void *donor = NULL;
    const char *donor_name = NULL;
    uint64_t need;
    int64_t since;
    bool told = false;
    enum phase ph = PHASE_OK;

    if (!ev->has_document_key || !ev->has_cluster_time)
        return PHASE_OK;
    snprintf(db, sizeof db, "%.*s", (int)ev->db_len, ev->db ? ev->db : "");
    snprintf(coll, sizeof coll, "%.*s", (int)ev->coll_len, ev->coll ? ev->coll : "");
    need = w->gate.check(w->gate.ctx, db, coll, &ev->document_key,
                         ((uint64_t)ev->ts_sec << 32) | ev->ts_inc, &donor, &donor_name);
    if (need == 0 || w->gate.passed(w->gate.ctx, donor, need))
        return PHASE_OK;
    since = mcdc_clock_mono_ms();
    w->gate_waits++;
    while (!w->gate.passed(w->gate.ctx, donor, need)) {
        if (worker_stopping(w))
            return PHASE_STOPPED;
        /* With exactly-once the other tasks go by committed positions: what
         * this task has produced commits now, so none waits on the other. */
        ph = worker_service(w, pipeline_exactly_once(w->pipe));
        if (ph != PHASE_OK)
            return ph;
        /* Everything this task produced before the held event is
         * acknowledged: its watermark may move to just before the held
         * event, so shards each holding an event never wait on each other
         * for ever: every need is before its held event, so the holder of
         * the earliest one is released, whether it waits for one donor or
         * for every other shard (topology/gate.c, gate_task_passed). */
        if (pipeline_pending(w->pipe) == 0)
            w->gate.publish(w->gate.ctx, (((uint64_t)ev->ts_sec << 32) | ev->ts_inc) - 1);
        if (!told && mcdc_clock_mono_ms() - since >= GATE_LOG_MS) {
            LOG_INFO("%s.%s: a document that moved here waits until the events of %s up to "
                     "Timestamp(%u, %u) are acknowledged (per-document order)",
                     db, coll, donor_name ? donor_name : "?", (unsigned)(need >> 32),
                     (unsigned)(need & 0xffffffffu));
            told = true;
        }
        if (!worker_pause_ms(w, 5))
            return PHASE_STOPPED;
    }
    w->gate_wait_ms += mcdc_clock_mono_ms() - since;
    return PHASE_OK;
}

/* Histogram bucket of a duration: 8 buckets per power of two of nanoseconds
 * (about 9 % wide), so percentiles need no stored samples. */
static size_t gate_bucket(int64_t ns)
{
    uint64_t v = ns > 1 ? (uint64_t)ns : 1;
    unsigned hi = 63u - (unsigned)__builtin_clzll(v);
    size_t b = (size_t)hi * 8 + (hi >= 3 ? (size_t)((v >> (hi - 3)) & 7u) : 0);
    return b < WORKER_GATE_BUCKETS ? b : WORKER_GATE_BUCKETS - 1;
}

double worker_gate_percentile_us(const struct worker *w, double q)
{
    uint64_t want, seen = 0;

    if (w->gate_checked == 0)
        return 0.0;
    want = (uint64_t)(q * (double)w->gate_checked);
    if (want >= w->gate_checked)
        want = w->gate_checked - 1;
    for (size_t b = 0; b < WORKER_GATE_BUCKETS; b++) {
        seen += w->gate_hist[b];
        if (seen > want) {
            unsigned hi = (unsigned)(b / 8), sub = (unsigned)(b % 8);
            double lo = hi >= 3 ? (double)(1ull << hi) * (1.0 + sub / 8.0) : (double)(1ull << hi);
            return lo / 1000.0;
        }
    }
    return 0.0;
}

/* The gate's added latency per checked event (chunk lookup, and the wait
 * when held) goes into a histogram; finish() logs p50/p99. */
enum phase worker_hold_for_donor(struct worker *w, const struct mcdc_event *ev)
{
    int64_t t0 = mcdc_clock_mono_ns();
    enum phase ph = hold_for_donor(w, ev);
    w->gate_hist[gate_bucket(mcdc_clock_mono_ns() - t0)]++;
    w->gate_checked++;
    return ph;
}

/* heartbeat.interval.ms: a heartbeat record carrying the current position
 * (debezium-format.md §1.9), so consumers see liveness and offsets move. */
enum phase worker_maybe_heartbeat(struct worker *w, int64_t *last_ms)
{
    struct mcdc_records recs = {.count = 0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    const struct mcdc_position *pos = NULL;

    if (w->cfg->heartbeat_interval_ms <= 0 ||
        mcdc_clock_mono_ms() - *last_ms < w->cfg->heartbeat_interval_ms)
        return PHASE_OK;
    *last_ms = mcdc_clock_mono_ms();
    if (w->stream_pos.has_resume_token || w->stream_pos.sec > 0)
        pos = &w->stream_pos;
    if (!encoder_heartbeat(pipeline_encoder(w->pipe), mcdc_clock_wall_ms(), &recs, &err)) {
        w->err = err;
        return PHASE_FATAL;
    }
    return worker_produce(w, &recs, pos, "a heartbeat");
}

/* INFO for a drop, rename or dropDatabase of a captured namespace: no record
 * is produced for them (Debezium emits none), but an operator must be able
 * to see why a captured collection went quiet. doc: the change event (NULL:
 * none, the new name of a rename is then "?"). */
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
    if (ev->coll == NULL || !encoder_captures(pipeline_encoder(w->pipe), db, coll))
        return;
    if (!strcmp(t, "drop")) {
        LOG_INFO("captured collection %s.%s was dropped", db, coll);
    } else if (!strcmp(t, "rename")) {
        const char *to_db = "?", *to_coll = "?";
        if (doc != NULL && bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "to.db", &it) &&
            BSON_ITER_HOLDS_UTF8(&it))
            to_db = bson_iter_utf8(&it, NULL);
        if (doc != NULL && bson_iter_init(&it, doc) && bson_iter_find_descendant(&it, "to.coll", &it) &&
            BSON_ITER_HOLDS_UTF8(&it))
            to_coll = bson_iter_utf8(&it, NULL);
        LOG_INFO("captured collection %s.%s was renamed to %s.%s%s", db, coll, to_db, to_coll,
                 encoder_captures(pipeline_encoder(w->pipe), to_db, to_coll) ? ""
                                                          : " (not captured under its new name)");
    }
}

enum phase worker_store_start(struct worker *w, struct mcdc_source *src)
{
    struct mcdc_position pos;
    enum phase ph = PHASE_OK;

    position_init(&pos);
    if (source_start_position(src, &pos)) {
        pipeline_pass(w->pipe, &pos);
        position_copy(&w->stream_pos, &pos);
        ph = worker_service(w, true);
    }
    position_clear(&pos);
    return ph;
}

/* The change-stream source from w->stream_pos, after the checks it needs;
 * the start stored when nothing was. */
static enum phase open_change_stream(struct worker *w, struct mcdc_source **out)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum phase ph;
    char d[128];
    bool from_stored = w->stream_pos.has_resume_token || w->stream_pos.sec > 0;

    ph = worker_await_server(w);
    if (ph == PHASE_OK && from_stored)
        ph = worker_check_stored_time(w);
    if (ph == PHASE_OK)
        ph = worker_oversize_ready(w);
    if (ph != PHASE_OK)
        return ph;
    /* No stored position: capture.start.op.time when set, else now (§4.3). */
    *out = source_stream_open(w->client, w->cfg, w->has_pipeline ? &w->pipeline : NULL,
                              &w->stream_pos, &fail, &err);
    if (*out == NULL)
        return worker_phase_from_failure(w, &fail, &err);
    resume_describe_position(&w->stream_pos, d, sizeof d);
    metrics_set_state(w->m, METRICS_STATE_STREAMING);
    if (from_stored)
        LOG_INFO("streaming changes from %s", d);
    else if (w->cfg->capture_start_op_time >= 0)
        LOG_INFO("streaming changes from capture.start.op.time Timestamp(%u, %u)",
                 (unsigned)((uint64_t)w->cfg->capture_start_op_time >> 32),
                 (unsigned)((uint64_t)w->cfg->capture_start_op_time & 0xffffffffu));
    else
        LOG_INFO("streaming changes from now (no stored position)");
    /* Store where this stream starts before any record is produced: if no
     * record is acknowledged before a restart (a broker outage, a crash),
     * the task must resume here, not from a later "now". */
    return from_stored ? PHASE_OK : worker_store_start(w, *out);
}

/* A change the source yielded (SOURCE_CHANGE): counted, handed to the
 * signals, then emitted or only its position passed. */
static enum phase on_change(struct worker *w, struct source_change *ch)
{
    struct mcdc_event *ev = ch->ev;
    bool emit = ch->emit;
    enum phase ph;

    ev->rs = w->rs;
    metrics_progress(w->m);
    metrics_event_seen(w->m, worker_metrics_op(ev->op));
    metrics_set_source_time_ms(w->m, ev->has_wall_time      ? ev->wall_time_ms
                                     : ev->has_cluster_time ? (int64_t)ev->ts_sec * 1000
                                                            : 0);
    /* A signal is handled before its position is passed, so no stored
     * position is past a signal whose request is not in it. */
    ph = worker_signal_event(w, ev, ch->pos);
    if (ph != PHASE_OK)
        return ph; /* the position stays before the signal */
    if (emit) {
        char db[256], coll[256];
        name_copy(db, sizeof db, ev->db, ev->db_len);
        name_copy(coll, sizeof coll, ev->coll, ev->coll_len);
        emit = encoder_captures(pipeline_encoder(w->pipe), db, coll);
    }
    if (emit && w->has_gate)
        ph = worker_hold_for_donor(w, ev);
    if (emit && ph == PHASE_OK) {
        metrics_event_emitted(w->m, worker_metrics_op(ev->op));
        metrics_collection_event(w->m, ev->db, ev->db_len, ev->coll, ev->coll_len,
                                 worker_metrics_op(ev->op));
        ph = worker_emit(w, ev, ch->pos);
    } else if (ph == PHASE_OK) {
        log_namespace_event(w, ch->raw, ev);
        /* Not captured: no record, but the position moves past it. */
        metrics_event_filtered(w->m, worker_metrics_op(ev->op));
        w->skipped++;
        ph = worker_pass_position(w, ch->pos);
    }
    position_copy(&w->stream_pos, ch->pos);
    return ph;
}

/* The end of a batch: the stream is alive, only quiet; a position the
 * source moved on to without a change (a post-batch resume token) is
 * passed, so the stored position never ages out of the oplog. */
static enum phase on_idle(struct worker *w, const struct source_change *ch)
{
    enum phase ph = PHASE_OK;
    uint32_t sec = 0, ord = 0;

    metrics_progress(w->m);
    /* transaction.boundary poll: nothing more is ready, the transaction ends */
    pipeline_batch_end(w->pipe);
    if (!ch->has_pos)
        return PHASE_OK;
    ph = worker_pass_position(w, ch->pos);
    position_copy(&w->stream_pos, ch->pos);
    if (ch->pos->has_resume_token && resume_token_time(&ch->pos->resume_token, &sec, &ord))
        metrics_set_source_time_ms(w->m, (int64_t)sec * 1000);
    return ph;
}

/* One step of the source, then the work between steps: signals and
 * incremental snapshot windows, heartbeat, deliveries and offsets, drain. */
static enum phase stream_step(struct worker *w, struct mcdc_source *src, int64_t *last_heartbeat_ms)
{
    struct source_change *ch;
    enum source_step step = source_next(src, &ch);
    enum phase ph = PHASE_OK;

    if (step != SOURCE_FAILED) {
        w->attempts = 0;
        w->history_lost_runs = 0; /* the source reads: its history is there */
    }
    if (step == SOURCE_CHANGE || step == SOURCE_OVERSIZE || step == SOURCE_UNREADABLE)
        w->events++;
    if (ch->split) {
        w->split_events++;
        metrics_add(w->m, METRICS_EVENTS_SPLIT, 1);
    }
    switch (step) {
    case SOURCE_CHANGE:
        ph = on_change(w, ch);
        break;
    case SOURCE_OVERSIZE:
        ph = worker_oversize_skipped(w, ch->raw, ch->pos, ch->full_size, ch->before_size);
        position_copy(&w->stream_pos, ch->pos);
        break;
    case SOURCE_UNREADABLE:
        ph = worker_event_failed(w, ch->ev, ch->pos, &ch->err);
        position_copy(&w->stream_pos, ch->pos);
        break;
    case SOURCE_IDLE:
        ph = on_idle(w, ch);
        break;
    case SOURCE_FAILED:
    default:
        if (ch->fatal) {
            w->err = ch->err;
            return PHASE_FATAL;
        }
        return worker_phase_from_failure(w, &ch->fail, &ch->err);
    }
    if (ph == PHASE_OK) /* signals, incremental snapshot windows */
        ph = worker_incremental(w, step == SOURCE_CHANGE ? ch->ev : NULL, step == SOURCE_IDLE);
    if (ph == PHASE_OK)
        ph = worker_maybe_heartbeat(w, last_heartbeat_ms);
    if (ph == PHASE_OK)
        ph = worker_service(w, false);
    if (ph == PHASE_OK)
        ph = worker_drain_step(w);
    return ph;
}

enum phase worker_stream(struct worker *w)
{
    struct mcdc_source *src = NULL;
    int64_t last_heartbeat_ms = mcdc_clock_mono_ms();
    enum phase ph = worker_uses_oplog(w) ? worker_oplog_open(w, &src) : open_change_stream(w, &src);

    if (src == NULL)
        return ph;
    while (!worker_stopping(w) && ph == PHASE_OK && (ph = worker_primary_check(w)) == PHASE_OK)
        ph = stream_step(w, src, &last_heartbeat_ms);
    worker_incremental_stream_end(w);
    source_close(src);
    return ph == PHASE_OK && worker_stopping(w) ? PHASE_STOPPED : ph;
}
