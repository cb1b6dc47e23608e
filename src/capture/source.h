/*
 * source: one interface over the two ways a task reads changes, a change
 * stream (capture.h) and the oplog (oplog.h), so the worker has one
 * streaming loop for both (design.md §3). Each step of a source is one
 * change with its position and whether to emit it, or the end of a batch,
 * or a failure already classified for the reconnect logic (resume.h).
 *
 * What a source does for the loop: position extraction (a change event's
 * _id and clusterTime; an oplog item's ts and transaction index), event
 * building (event.h), recognising the skip stubs of
 * cursor.oversize.handling.mode skip (oversize.h) and events reassembled
 * from split fragments, and, for a change stream that starts from a
 * position stored by oplog capture, not emitting the operations at that
 * time that oplog capture already emitted (debezium-format.md §4.4).
 *
 * Thread: one source is used by one thread (the task's).
 */
#ifndef MCDC_CAPTURE_SOURCE_H
#define MCDC_CAPTURE_SOURCE_H

#include <stdbool.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "capture/oplog.h"
#include "capture/resume.h"
#include "common/error.h"
#include "config/config.h"
#include "event/event.h"
#include "event/position.h"

/* What one source_next() step yielded. */
enum source_step {
    /* A change: ch->ev and ch->pos. ch->emit says whether it is a data change
     * to produce records for; false: a change whose position is only passed
     * (a DDL event, an oplog no-op or transaction link, an operation already
     * emitted before a mode switch). */
    SOURCE_CHANGE = 0,
    /* A cursor.oversize.handling.mode skip stub (oversize.h): ch->raw (the
     * stub), ch->pos, ch->full_size and ch->before_size (bytes, -1: none).
     * No record; the position is passed. */
    SOURCE_OVERSIZE,
    /* A change that cannot be read as an event: ch->ev (what could be read),
     * ch->pos and ch->err; event.processing.failure.handling.mode decides. */
    SOURCE_UNREADABLE,
    /* The batch ended with no change (the stream is alive, only quiet).
     * ch->pos is set (has_pos) when the source's position moved on without
     * a change (a change stream's post-batch resume token): pass it so the
     * stored position does not age out of the oplog. */
    SOURCE_IDLE,
    /* The source failed: ch->fatal (ch->err is final) or ch->fail and
     * ch->err to classify (resume_classify). The source is done. */
    SOURCE_FAILED,
};

/*
 * One step's contents, owned by the source and valid until the next
 * source_next() or source_close(). Members not named by the step are
 * unspecified.
 */
struct source_change {
    struct mcdc_event *ev;     /* views into the source's buffers */
    struct mcdc_position *pos; /* the position after the change */
    bool has_pos;             /* SOURCE_IDLE: pos is a position to pass */
    bool emit;                /* SOURCE_CHANGE: a data change to produce */
    bool split;               /* SOURCE_CHANGE: reassembled from split fragments */
    const bson_t *raw;        /* the change-stream document (NULL: oplog) */
    int64_t full_size, before_size; /* SOURCE_OVERSIZE */
    bool fatal;                     /* SOURCE_FAILED: err is final, not classified */
    struct resume_failure fail;     /* SOURCE_FAILED: fail.message points into err */
    struct mcdc_error err;          /* SOURCE_UNREADABLE, SOURCE_FAILED */
};

struct mcdc_source;

/* The implementation of a source (source_stream.c, source_oplog.c). */
struct source_ops {
    const char *name; /* "change stream", "oplog" */
    enum source_step (*next)(struct mcdc_source *s, struct source_change *ch);
    bool (*start_position)(struct mcdc_source *s, struct mcdc_position *pos);
    void (*close)(struct mcdc_source *s);
};

struct mcdc_source {
    const struct source_ops *ops;
    struct source_change ch; /* the last step's contents */
};

/*
 * A cluster-wide change stream on client (borrowed; must outlive the
 * source) as capture_open() opens it: cfg (borrowed), pipeline (the stages
 * after $changeStream, NULL none; copied), from (the stored position, NULL
 * or empty: capture.start.op.time or now; copied). A from written by oplog
 * capture (oplog set, no resume token) starts at its operation time, and
 * the operations at that time already emitted (the entry, or the first
 * from->tord operations of its transaction) come as changes not to emit
 * (debezium-format.md §4.4; said at INFO). NULL with fail and err when the
 * opening aggregate failed.
 */
struct mcdc_source *source_stream_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                                       const bson_t *pipeline, const struct mcdc_position *from,
                                       struct resume_failure *fail, struct mcdc_error *err);

/*
 * The oplog tailed on client (borrowed; must outlive the source) as
 * oplog_open() opens it: cfg (borrowed), query (conditions on entries,
 * NULL none; copied), from (the stored position or NULL: now). held
 * (borrowed, may be NULL) gets, at source_close(), the entries the reader
 * read but held back as not majority-committed (oplog_held_entries). NULL
 * with fail and err when the reader cannot open (history lost included).
 */
struct mcdc_source *source_oplog_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                                      const bson_t *query, const struct mcdc_position *from,
                                      struct oplog_held *held, struct resume_failure *fail,
                                      struct mcdc_error *err);

/*
 * Waits up to cursor.max.await.time.ms for the next step; *ch points to its
 * contents (owned by s, valid until the next call; the caller may set
 * ch->ev.rs and read the rest). Returns the step.
 */
enum source_step source_next(struct mcdc_source *s, struct source_change **ch);

/*
 * Where the source starts when no position was stored: a change stream's
 * first resume token, the newest oplog entry at open. Fills pos
 * (initialised; old contents freed) and returns true; false (pos
 * untouched) when the source has none yet.
 */
bool source_start_position(struct mcdc_source *s, struct mcdc_position *pos);

/* "change stream" or "oplog", for logs. */
const char *source_name(const struct mcdc_source *s);

/* Closes the cursor and frees s. NULL is a no-op. */
void source_close(struct mcdc_source *s);

/* For implementations: s->ch reset for a new step (ev and pos kept). */
void source_change_reset(struct source_change *ch);

#endif
