/*
 * event: the internal change record (design.md §4). Change streams, the legacy
 * oplog and snapshots all produce this one shape; everything downstream
 * (encode, sink, offsets) sees only it.
 *
 * A struct mcdc_event is a *view*: its bson_t members are borrowed from the
 * document it was parsed from (a change-stream event, an oplog entry or a
 * snapshot document) and are valid only as long as that document is. Copy
 * what must outlive it.
 *
 * Thread: plain data; owned by the thread that fills it.
 */
#ifndef MCDC_EVENT_EVENT_H
#define MCDC_EVENT_EVENT_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"

enum mcdc_op {
    MCDC_OP_INSERT = 0, /* Debezium "c" */
    MCDC_OP_UPDATE,     /* "u" with updateDescription (or patch in oplog mode) */
    MCDC_OP_REPLACE,    /* "u" with after, no updateDescription */
    MCDC_OP_DELETE,     /* "d" */
    MCDC_OP_READ,       /* "r": snapshot or incremental-snapshot row */
    MCDC_OP_COUNT
};

/* source.snapshot values this connector produces (debezium-format.md §1.5). */
enum mcdc_snapshot_flag {
    MCDC_SNAP_FALSE = 0,
    MCDC_SNAP_TRUE,
    MCDC_SNAP_LAST,
    MCDC_SNAP_INCREMENTAL,
    MCDC_SNAP_FLAG_COUNT
};

struct mcdc_event {
    enum mcdc_op op;
    const char *op_type; /* change events: operationType (borrowed), NULL otherwise */
    enum mcdc_snapshot_flag snapshot;

    const char *db; /* namespace database (borrowed) */
    size_t db_len;
    const char *coll; /* namespace collection (borrowed) */
    size_t coll_len;

    /* documentKey (change streams), {_id: ...} (oplog/snapshot); always has _id. */
    bson_t document_key;
    bool has_document_key;

    bson_t full_document; /* after; insert, replace, update with lookup/post-image, read */
    bool has_full_document;
    bson_t before; /* pre-image (fullDocumentBeforeChange) */
    bool has_before;

    /* updateDescription (change streams, op UPDATE) */
    bson_t updated_fields; /* document of dotted paths */
    bool has_updated_fields;
    bson_t removed_fields; /* array of strings */
    bool has_removed_fields;
    bson_t truncated_arrays; /* array of {field, newSize} */
    bool has_truncated_arrays;

    /* legacy oplog mode (1.9 dialect): patch = o (update), filter = o2 / o */
    bson_t oplog_patch;
    bool has_oplog_patch;
    bson_t oplog_filter;
    bool has_oplog_filter;
    int64_t oplog_h;          /* oplog `h` (0 on MongoDB 4.2), valid if oplog_has_h */
    bool oplog_has_h;         /* the entry has `h` (absent on 4.4+: source.h is null) */
    int64_t oplog_tord;       /* 1-based index inside applyOps, 0 = none */
    const char *oplog_stxnid; /* "<uuid>:<txnNumber>" or NULL */
    bool oplog_txn_last;      /* last operation of its applyOps: its END follows it */

    /* position */
    uint32_t ts_sec; /* clusterTime.t; valid if has_cluster_time */
    uint32_t ts_inc; /* clusterTime.i */
    bool has_cluster_time;
    int64_t wall_time_ms; /* wallTime (MongoDB >= 6.0); valid if has_wall_time */
    bool has_wall_time;
    bson_t resume_token; /* _id of the change event; the position after it */
    bool has_resume_token;

    /* transaction */
    bson_t lsid;
    bool has_lsid;
    int64_t txn_number;
    bool has_txn_number;

    const char *rs; /* replica-set name of the capture task (borrowed, long-lived) */
};

/*
 * Initialises ev as an empty event (all has_* false, pointers NULL, op INSERT,
 * snapshot FALSE). Cheap; no allocation.
 */
void event_init(struct mcdc_event *ev);

/*
 * Parses one change-stream event document (MongoDB "Change Events" reference;
 * mongo-sim-spec.md §3.5-3.9) into ev, which is overwritten entirely (set
 * ev->rs afterwards). doc must outlive ev: every bson_t member is a view over
 * doc's bytes. Reads operationType, ns.db/ns.coll, documentKey, fullDocument
 * and fullDocumentBeforeChange (null leaves has_* false), updateDescription
 * {updatedFields, removedFields, truncatedArrays}, clusterTime, wallTime, _id
 * (the resume token), lsid and txnNumber; other members are ignored.
 * Returns true and sets *emit = true for insert/update/replace/delete;
 * returns true with *emit = false for other operation types (drop, rename,
 * invalidate, DDL...), which callers skip after still advancing the position
 * (clusterTime and the resume token are filled for them too); returns false
 * and fills err (domain ENCODE) when a required field is missing or has the
 * wrong type (no operationType, a data event without ns or documentKey._id,
 * insert/replace without fullDocument, update without updatedFields).
 */
bool event_from_change(const bson_t *doc, struct mcdc_event *ev, bool *emit,
                       struct mcdc_error *err);

/*
 * Fills ev (overwritten entirely) as a snapshot read (op READ) of document doc
 * from db.coll with source.snapshot = flag. doc, db and coll are borrowed and
 * must outlive ev; full_document and document_key both view the whole
 * document (the key uses only its _id). doc must contain _id, else returns
 * false with err (domain ENCODE). The caller sets the position (ts_sec/ts_inc,
 * has_cluster_time) and rs afterwards.
 */
bool event_from_snapshot_doc(const bson_t *doc, const char *db, const char *coll,
                             enum mcdc_snapshot_flag flag, struct mcdc_event *ev,
                             struct mcdc_error *err);

/* Debezium's op letter (debezium-format.md §1.3): "c", "u" (update and
 * replace), "d" or "r". Returns a static string. */
const char *event_op_letter(enum mcdc_op op);

#endif
