/*
 * worker_fail: what a capture task does with an event it cannot take and
 * with a failed stream: event.processing.failure.handling.mode for events
 * that cannot be encoded (Debezium's EventProcessingFailureHandlingMode), the
 * oversized-event error, and the mapping of capture failures to phases.
 */
#include "worker/worker_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "common/log.h"
#include "encode/ejson.h"

void worker_event_id(const struct mcdc_event *ev, char *out, size_t size)
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

enum phase worker_event_failed(struct worker *w, const struct mcdc_event *ev,
                               const struct mcdc_position *pos, const struct mcdc_error *err)
{
    char what[300], id[200] = "unknown";

    snprintf(what, sizeof what, "%.*s.%.*s", (int)ev->db_len, ev->db ? ev->db : "",
             (int)ev->coll_len, ev->coll ? ev->coll : "");
    worker_event_id(ev, id, sizeof id);
    if (w->cfg->failure_mode == MCDC_FAILURE_FAIL) {
        w->err = *err;
        mcdc_error_prefix(&w->err,
                          "cannot encode a change of %s %s (event.processing.failure.handling."
                          "mode warn or skip moves past it)",
                          what, id);
        return PHASE_FATAL;
    }
    w->failed_events++;
    if (w->cfg->failure_mode == MCDC_FAILURE_WARN)
        LOG_WARN("skipping a change of %s %s that cannot be encoded: %s (%llu so far)", what, id,
                 err->msg, (unsigned long long)w->failed_events);
    else
        LOG_INFO("skipping a change of %s %s that cannot be encoded: %s (%llu so far)", what, id,
                 err->msg, (unsigned long long)w->failed_events);
    inflight_advance(w->inf, worker_incremental_stamp(w, pos));
    return PHASE_OK;
}

/*
 * 10334 BSONObjectTooLarge on a change stream: the event after the stored
 * position, assembled by the server, is over MongoDB's 16 MiB BSON limit
 * (MongoDB "Change Events": "change stream events are limited to 16 MiB").
 * The server's text (truncated by the driver) is replaced by one that gives
 * the size, where the stream stands and what can be done.
 */
static void oversize_error(struct worker *w, const char *server_text)
{
    char d[128];
    long long size = -1;
    const char *p = server_text ? strstr(server_text, "BSONObj size: ") : NULL;
    if (p)
        size = strtoll(p + strlen("BSONObj size: "), NULL, 10);
    if (w->stream_pos.has_resume_token || w->stream_pos.sec > 0)
        resume_describe_position(&w->stream_pos, d, sizeof d);
    else
        snprintf(d, sizeof d, "the stream's start"); /* nothing stored yet */
    char sz[64] = "", advice[400];
    if (size > 0)
        snprintf(sz, sizeof sz, " (%lld bytes)", size);
    /* What can still move past it depends on the mode already in force. */
    switch (w->cfg->oversize_mode) {
    case MCDC_OVERSIZE_SKIP:
        /* The skip stage drops events by the size of each document, the
         * event counts them together (and its other fields). */
        snprintf(advice, sizeof advice,
                 "no document of it is over cursor.oversize.skip.threshold (%lld bytes): lower "
                 "it, use mode split, or exclude its collection",
                 (long long)w->cfg->oversize_skip_threshold);
        break;
    case MCDC_OVERSIZE_SPLIT:
        snprintf(advice, sizeof advice,
                 "the server could not split it (one field over the limit): "
                 "cursor.oversize.handling.mode skip moves past it, or exclude its collection");
        break;
    default:
        snprintf(advice, sizeof advice,
                 "cursor.oversize.handling.mode split or skip moves past it, or exclude its "
                 "collection (collection.exclude.list)");
        break;
    }
    mcdc_error_set(&w->err, MCDC_ERR_MONGO, 10334,
                   "change event after %s is over MongoDB's 16 MiB limit%s, on every resume: %s",
                   d, sz, advice);
}

enum phase worker_phase_from_failure(struct worker *w, const struct resume_failure *fail,
                                     const struct mcdc_error *err)
{
    w->err = *err;
    if (fail->code == 10334 &&
        (fail->domain == MONGOC_ERROR_SERVER || fail->domain == MONGOC_ERROR_QUERY ||
         fail->domain == MONGOC_ERROR_COMMAND))
        oversize_error(w, fail->message);
    switch (resume_classify(fail)) {
    case RESUME_ACTION_RETRY:
        return PHASE_RETRY;
    case RESUME_ACTION_HISTORY_LOST:
        return PHASE_HISTORY_LOST;
    case RESUME_ACTION_FATAL:
    default:
        return PHASE_FATAL;
    }
}
