/*
 * worker_fail: what a capture task does with an event it cannot take and
 * with a failed stream: event.processing.failure.handling.mode for events
 * that cannot be encoded (Debezium's EventProcessingFailureHandlingMode), the
 * oversized-event error, and the mapping of capture failures to phases.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "common/log.h"

void worker_event_id(const struct mcdc_event *ev, char *out, size_t size)
{
    pipeline_event_id(ev, out, size);
}

enum phase worker_event_failed(struct worker *w, const struct mcdc_event *ev,
                               const struct mcdc_position *pos, const struct mcdc_error *err)
{
    struct mcdc_error out = MCDC_ERROR_INIT;
    enum pipeline_status st =
        pipeline_event_failed(w->pipe, ev, worker_incremental_stamp(w, pos), err, &out);

    if (st != PIPELINE_OK)
        w->err = out;
    return worker_phase_of(st);
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
