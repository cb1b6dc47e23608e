/*
 * capture: a change stream on one replica set, opened from a stored position
 * (design.md §3, debezium-format.md §4.3) with libmongoc's
 * mongoc_client_watch (cluster-wide stream, so new databases and collections
 * are seen without reopening).
 *
 * The capture object is a thin, sticky-error wrapper (style.md §4.4):
 * capture_next() returns an event, "idle" (an empty getMore: the post-batch
 * resume token may have moved), or an error; after an error the caller asks
 * capture_failure() what happened and resume_classify() what to do. mongoc
 * already resumes resumable getMore errors inside next() (mongo-sim-spec.md
 * §3.13); what reaches us needs a new stream.
 *
 * Thread: the owning capture task (the client is not thread-safe).
 */
#ifndef MCDC_CAPTURE_CAPTURE_H
#define MCDC_CAPTURE_CAPTURE_H

#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "capture/resume.h"
#include "common/error.h"
#include "config/config.h"
#include "event/position.h"

struct change_fields; /* capture/oversize.h */

struct capture;

enum capture_status {
    CAPTURE_EVENT = 0, /* *doc is the next change event */
    CAPTURE_IDLE,      /* no event within maxAwaitTimeMS; the resume token may have advanced */
    CAPTURE_ERROR,     /* the stream failed; see capture_failure() */
};

/*
 * Opens a cluster-wide change stream on client (borrowed; must outlive the
 * capture) with the options of cfg: capture.mode (fullDocument updateLookup
 * for change_streams_update_full, whenAvailable when
 * capture.mode.full.update.type is post_image; fullDocumentBeforeChange
 * whenAvailable for the *_with_pre_image modes), cursor.max.await.time.ms,
 * cursor.batch.size, and the start point of `from` (NULL = now) decided by
 * resume_start_point(). pipeline is the stages after $changeStream as a BSON
 * array document (e.g. [{$match: ...}]) or NULL; it is copied.
 *
 * Returns the capture, or NULL when the opening aggregate failed: then fail
 * (if not NULL) and err describe the error (fail->message points into err).
 */
struct capture *capture_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                             const bson_t *pipeline, const struct mcdc_position *from,
                             struct resume_failure *fail, struct mcdc_error *err);

/* Closes the stream (killCursors). NULL is a no-op. */
void capture_destroy(struct capture *cap);

/*
 * Waits up to cursor.max.await.time.ms for the next event. On CAPTURE_EVENT
 * *doc is borrowed and valid until the next capture_* call. Fragments of a
 * split event are read and reassembled first (they may span several
 * getMores: CAPTURE_IDLE in between); fragments out of sequence end the
 * stream with CAPTURE_ERROR (code 280, not resumable).
 */
enum capture_status capture_next(struct capture *cap, const bson_t **doc);

/*
 * The stream's current resume token (the post-batch resume token after an
 * empty batch, else the last event's _id), borrowed until the next call; NULL
 * when the server sent none, and while fragments of a split event are
 * buffered (the position stays before the event's first fragment).
 * mongoc_change_stream_get_resume_token.
 */
const bson_t *capture_resume_token(struct capture *cap);

/*
 * True when the event the last capture_next returned was reassembled from
 * $changeStreamSplitLargeEvent fragments (capture/oversize.h: the pipeline
 * ends with that stage under cursor.oversize.handling.mode split; the event
 * then carries the last fragment's _id). *fragments (if not NULL) gets the
 * fragments this capture has received in all.
 */
bool capture_last_was_split(const struct capture *cap, uint64_t *fragments);

/*
 * After CAPTURE_ERROR: fills fail (message points into err, which must stay
 * alive as long as fail is used) and err (domain MONGO, retriable when
 * resume_classify says retry).
 */
void capture_failure(struct capture *cap, struct resume_failure *fail, struct mcdc_error *err);

/*
 * Fills fail/err from a libmongoc error and its server reply (reply may be
 * NULL). Shared with the snapshot, which runs find/listCollections commands.
 */
void capture_failure_from(const bson_error_t *error, const bson_t *reply,
                          struct resume_failure *fail, struct mcdc_error *err);

/*
 * Fills pos with the position after change event doc: its clusterTime as
 * sec/ord and its _id as the resume token. Returns false when doc has no
 * document _id (mongoc refuses those, so this is a broken invariant).
 */
bool capture_event_position(const bson_t *doc, struct mcdc_position *pos);

/* capture_event_position from a scan of the event (capture/oversize.h). */
bool capture_event_position_in(const struct change_fields *f, struct mcdc_position *pos);

/*
 * The top-level fields of doc, an event the last capture_next returned: the
 * scan capture_next already made of it when it is the document it read (not
 * a reassembled split event), else a scan into scratch. Borrowed, valid while
 * doc is. cap may be NULL (a scan into scratch).
 */
const struct change_fields *capture_fields(const struct capture *cap, const bson_t *doc,
                                           struct change_fields *scratch);

#endif
