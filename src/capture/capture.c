/*
 * capture: change stream open/next/resume-token with libmongoc
 * (mongo-sim-spec.md §3, debezium-format.md §4.3).
 */
#include "capture/capture.h"

#include <string.h>

#include "capture/oversize.h"
#include "common/log.h"
#include "common/xalloc.h"

struct capture {
    mongoc_change_stream_t *stream;
    bson_error_t error;
    bson_t reply; /* copy of the error reply */
    bool has_error;
    struct split_buffer split; /* fragments of $changeStreamSplitLargeEvent */
    bool last_split;           /* the last event returned was reassembled */
};

static void append_options(bson_t *opts, const struct mcdc_config *cfg,
                           const struct mcdc_position *from)
{
    struct resume_start start;

    switch (cfg->capture_mode) {
    case MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL:
    case MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL_WITH_PRE_IMAGE:
        BSON_APPEND_UTF8(opts, "fullDocument",
                         cfg->full_update_type == MCDC_FULL_UPDATE_POST_IMAGE ? "whenAvailable"
                                                                              : "updateLookup");
        break;
    default:
        break;
    }
    if (cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_WITH_PRE_IMAGE ||
        cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL_WITH_PRE_IMAGE)
        BSON_APPEND_UTF8(opts, "fullDocumentBeforeChange", "whenAvailable");
    if (cfg->cursor_max_await_time_ms > 0)
        BSON_APPEND_INT64(opts, "maxAwaitTimeMS", cfg->cursor_max_await_time_ms);
    if (cfg->cursor_batch_size > 0)
        BSON_APPEND_INT32(opts, "batchSize", (int32_t)cfg->cursor_batch_size);

    resume_start_point(from, cfg->capture_start_op_time, &start);
    switch (start.kind) {
    case RESUME_START_AFTER_TOKEN:
        BSON_APPEND_DOCUMENT(opts, "resumeAfter", start.token);
        break;
    case RESUME_START_AT_OPTIME:
        BSON_APPEND_TIMESTAMP(opts, "startAtOperationTime", start.sec, start.ord);
        break;
    case RESUME_START_NOW:
    default:
        break;
    }
}

void capture_failure_from(const bson_error_t *error, const bson_t *reply,
                          struct resume_failure *fail, struct mcdc_error *err)
{
    struct resume_failure f;
    enum resume_action action;

    memset(&f, 0, sizeof f);
    f.domain = error->domain;
    f.code = error->code;
    if (reply != NULL && !bson_empty(reply)) {
        f.label_resumable = mongoc_error_has_label(reply, "ResumableChangeStreamError");
        f.label_non_resumable = mongoc_error_has_label(reply, "NonResumableChangeStreamError");
    }
    action = resume_classify(&(struct resume_failure){f.domain, f.code, error->message,
                                                      f.label_resumable, f.label_non_resumable});
    mcdc_error_from_bson(err, error->code, error->message, action == RESUME_ACTION_RETRY);
    f.message = err->msg;
    if (fail != NULL)
        *fail = f;
}

struct capture *capture_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                             const bson_t *pipeline, const struct mcdc_position *from,
                             struct resume_failure *fail, struct mcdc_error *err)
{
    bson_t opts = BSON_INITIALIZER;
    bson_t wrapped = BSON_INITIALIZER;
    /* aligned: bson_t members */
    struct capture *cap = xzalloc_aligned(_Alignof(struct capture), sizeof *cap);
    const bson_t *reply = NULL;
    bson_error_t error;

    append_options(&opts, cfg, from);
    if (pipeline != NULL)
        BSON_APPEND_ARRAY(&wrapped, "pipeline", pipeline);
    else {
        bson_t empty = BSON_INITIALIZER;
        BSON_APPEND_ARRAY(&wrapped, "pipeline", &empty);
        bson_destroy(&empty);
    }
    cap->stream = mongoc_client_watch(client, &wrapped, &opts);
    bson_init(&cap->reply);
    split_init(&cap->split);
    bson_destroy(&opts);
    bson_destroy(&wrapped);

    if (mongoc_change_stream_error_document(cap->stream, &error, &reply)) {
        capture_failure_from(&error, reply, fail, err);
        capture_destroy(cap);
        return NULL;
    }
    return cap;
}

void capture_destroy(struct capture *cap)
{
    if (cap == NULL)
        return;
    mongoc_change_stream_destroy(cap->stream);
    bson_destroy(&cap->reply);
    split_destroy(&cap->split);
    free(cap);
}

enum capture_status capture_next(struct capture *cap, const bson_t **doc)
{
    const bson_t *reply = NULL, *got = NULL, *merged = NULL;
    char why[200];

    if (cap->has_error)
        return CAPTURE_ERROR;
    cap->last_split = false;
    /* Fragments of a split event are read one after the other (mongoc's own
     * resume after a network error continues from the last fragment's
     * token, so the next one follows); only the whole event is returned. */
    while (mongoc_change_stream_next(cap->stream, &got)) {
        switch (split_add(&cap->split, got, &merged, why, sizeof why)) {
        case SPLIT_WHOLE:
            *doc = got;
            return CAPTURE_EVENT;
        case SPLIT_DONE:
            *doc = merged;
            cap->last_split = true;
            return CAPTURE_EVENT;
        case SPLIT_MORE:
            LOG_DEBUG("split event: fragment %d of %d received", (int)cap->split.next - 1,
                      (int)cap->split.of);
            continue;
        case SPLIT_BROKEN:
        default:
            cap->has_error = true;
            bson_reinit(&cap->reply);
            /* 280 ChangeStreamFatalError: not resumable, the task stops */
            bson_set_error(&cap->error, MONGOC_ERROR_SERVER, 280, "%s", why);
            return CAPTURE_ERROR;
        }
    }
    if (mongoc_change_stream_error_document(cap->stream, &cap->error, &reply)) {
        cap->has_error = true;
        bson_reinit(&cap->reply);
        if (reply != NULL)
            bson_copy_to_excluding_noinit(reply, &cap->reply, "", NULL);
        return CAPTURE_ERROR;
    }
    return CAPTURE_IDLE;
}

const bson_t *capture_resume_token(struct capture *cap)
{
    /* Between fragments the stream's token is a fragment's: a position
     * stored there would resume inside the event, whose first fragments
     * would then never be read. */
    if (cap->split.active)
        return NULL;
    return mongoc_change_stream_get_resume_token(cap->stream);
}

bool capture_last_was_split(const struct capture *cap, uint64_t *fragments)
{
    if (fragments != NULL)
        *fragments = cap->split.fragments;
    return cap->last_split;
}

void capture_failure(struct capture *cap, struct resume_failure *fail, struct mcdc_error *err)
{
    capture_failure_from(&cap->error, &cap->reply, fail, err);
}

bool capture_event_position(const bson_t *doc, struct mcdc_position *pos)
{
    struct change_fields f;
    change_fields_scan(doc, &f);
    return capture_event_position_in(&f, pos);
}

const struct change_fields *capture_fields(const struct capture *cap, const bson_t *doc,
                                           struct change_fields *scratch)
{
    if (cap != NULL && change_fields_of(&cap->split.last, doc))
        return &cap->split.last;
    change_fields_scan(doc, scratch);
    return scratch;
}

bool capture_event_position_in(const struct change_fields *f, struct mcdc_position *pos)
{
    bson_iter_t it;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    bson_t view;

    /* clear releases what pos owns; init leaves it empty with nothing allocated. */
    position_clear(pos);
    position_init(pos);
    pos->sec = -1;
    pos->ord = -1;
    it = f->time;
    if (f->has_time && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        uint32_t t, i;
        bson_iter_timestamp(&it, &t, &i);
        pos->sec = t;
        pos->ord = i;
    }
    it = f->id;
    if (!f->has_id || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&view, data, len))
        return false;
    bson_destroy(&pos->resume_token);
    bson_copy_to(&view, &pos->resume_token);
    pos->has_resume_token = true;
    return true;
}
