/*
 * capture/oversize: cursor.oversize.handling.mode for change events over
 * MongoDB's limit (BSONObjMaxInternalSize, 16 MiB + 16 KiB), as Debezium
 * 2.6+/3.x does it (MongoDbConnectorConfig, ChangeStreamPipelineFactory,
 * SplitEventHandler; debezium-format.md §7.1):
 *
 *   fail   no stage; the server fails the stream with 10334 BSONObjectTooLarge
 *          and the task stops (worker_fail.c words the error).
 *   skip   a first stage with Debezium's predicate: the event passes when
 *          $bsonSize of fullDocument and of fullDocumentBeforeChange are each
 *          <= cursor.oversize.skip.threshold (a missing or null document
 *          passes). Debezium drops the other events with a $match, so nobody
 *          learns of them; mongocdc replaces such an event, on the server, by
 *          a stub of its _id (resume token), operationType, clusterTime, ns,
 *          documentKey and the two sizes (field OVERSIZE_STUB_FIELD), so the
 *          large documents never leave the server but the skip is logged,
 *          counted and the stored position moves past it.
 *   split  {$changeStreamSplitLargeEvent: {}} as the last stage (MongoDB
 *          6.0.9+ and 7.0+; not the 6.1-6.3 rapid releases); the fragments
 *          {_id, splitEvent: {fragment, of}, <fields>} are reassembled here
 *          into one event before it is read (struct split_buffer).
 *
 * Oplog capture (capture/oplog.c) meets no oversized events: an oplog entry
 * is itself at most 16 MiB + 16 KiB and is returned whole by find, so the
 * setting has no effect there and the configuration check refuses skip and
 * split with capture.mode oplog.
 *
 * Thread: the owning capture task.
 */
#ifndef MCDC_CAPTURE_OVERSIZE_H
#define MCDC_CAPTURE_OVERSIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>
#include <mongoc/mongoc.h>

#include "common/error.h"

/* The top-level field of a skip stub (see above). */
#define OVERSIZE_STUB_FIELD "__mongocdc_oversize"

/*
 * Appends to stage (an initialised, empty document) the skip-mode stage:
 * {$replaceWith: {$cond: {if: <Debezium's predicate with threshold bytes>,
 * then: "$$ROOT", else: <stub>}}}. threshold > 0.
 */
void oversize_skip_stage(bson_t *stage, int64_t threshold);

/* Appends to stage (initialised, empty) {$changeStreamSplitLargeEvent: {}}. */
void oversize_split_stage(bson_t *stage);

/*
 * True when doc is a skip stub; then *full_size and *before_size get the
 * $bsonSize of fullDocument and fullDocumentBeforeChange in bytes (-1 when
 * the event had none).
 */
bool oversize_is_stub(const bson_t *doc, int64_t *full_size, int64_t *before_size);

/*
 * Where the top-level fields the capture reads are in one change event:
 * `_id` (the resume token), `clusterTime`, `splitEvent` ($changeStreamSplit-
 * LargeEvent's marker) and the skip stub's field. One pass over the event:
 * the last two are absent from a normal event, and looking each up on its
 * own walked every field of every event (about 3 % of a task's instructions
 * each, callgrind).
 */
struct change_fields {
    const bson_t *doc;    /* the event scanned (borrowed) */
    const uint8_t *data;  /* its bytes when scanned: a new event at the same address differs */
    bool has_id, has_time, has_split, has_stub;
    bson_iter_t id, time, split, stub; /* valid while the event is */
};

/* Fills f from doc (borrowed; f is valid while doc is). */
void change_fields_scan(const bson_t *doc, struct change_fields *f);

/* True when f was filled from doc as it is now. */
bool change_fields_of(const struct change_fields *f, const bson_t *doc);

/* oversize_is_stub from a scan. */
bool oversize_stub_in(const struct change_fields *f, int64_t *full_size, int64_t *before_size);

/*
 * True when a server of this version (versionArray major, minor, patch)
 * supports $changeStreamSplitLargeEvent: 6.0.9 or later in 6.0, 7.0 or later
 * (MongoDB manual "$changeStreamSplitLargeEvent"; 6.1-6.3 lack it).
 */
bool oversize_split_supported(int major, int minor, int patch);

/*
 * Asks the server (buildInfo on client, borrowed) whether it supports the
 * split stage. Returns false with err (MCDC_ERR_CONFIG, not retriable) naming
 * the version and the setting when it does not, or with a retriable
 * MCDC_ERR_MONGO error when buildInfo itself failed.
 */
bool oversize_check_split_server(mongoc_client_t *client, struct mcdc_error *err);

/* Reassembly of one split event's fragments (Debezium SplitEventHandler). */
struct split_buffer {
    bson_t fields;     /* the fragments' fields but _id and splitEvent, in arrival order */
    bson_t merged;     /* the last reassembled event */
    bool active;       /* fragments are buffered, the event is not complete */
    int32_t next;      /* fragment number expected next (1-based) */
    int32_t of;        /* fragments of the buffered event */
    uint64_t events;   /* events reassembled so far */
    uint64_t fragments; /* fragments received so far */
    struct change_fields last; /* the scan of the last document split_add took */
};

enum split_result {
    SPLIT_WHOLE = 0, /* doc is not a fragment: use it as it is */
    SPLIT_MORE,      /* doc was a fragment, buffered: read on */
    SPLIT_DONE,      /* doc completed an event: *merged holds it */
    SPLIT_BROKEN,    /* a fragment out of sequence: why says what */
};

void split_init(struct split_buffer *b);
void split_destroy(struct split_buffer *b);

/* Drops buffered fragments (the stream is reopened from the position before
 * the first of them, so they come again). */
void split_reset(struct split_buffer *b);

/*
 * Takes the next document of the stream (borrowed; copied when it is a
 * fragment). On SPLIT_DONE *merged (owned by b, valid until the next call)
 * is the event: every field of the fragments in the order received, then
 * _id = the last fragment's _id (its resume token is the event's position,
 * as Debezium's mergeEventFragments; last, so the event is not copied once
 * more to put it first). A document that is not a fragment
 * while fragments are buffered, or a fragment other than the next expected
 * (or whose `of` differs), gives SPLIT_BROKEN with why filled.
 */
enum split_result split_add(struct split_buffer *b, const bson_t *doc, const bson_t **merged,
                            char *why, size_t why_size);

#endif
