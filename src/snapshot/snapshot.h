/*
 * snapshot: the initial snapshot of one replica set (debezium-format.md §5.2,
 * design.md §8, style.md §4.9).
 *
 * 1. snapshot_record_start(): the stream's start position, taken before any
 *    collection is read (a change stream's first event or post-batch resume
 *    token; else the server's operationTime), so streaming afterwards misses
 *    nothing.
 * 2. snapshot_plan(): every captured collection (listDatabases x
 *    listCollections, admin/config/local and system.* excluded, filtered by
 *    encoder_captures() and snapshot.include.collection.list), sorted by
 *    collection name as Debezium does, with its estimated count and its
 *    snapshot.collection.filter.overrides query.
 * 3. snapshot_start(): splits each collection of at least
 *    snapshot.collection.split.min.documents (estimated) into `_id` ranges,
 *    up to one per thread, from a `$sample` of its keys (snapshot/split.h);
 *    then snapshot.max.threads reader threads, each with its own client from
 *    the pool, take the ranges (a whole collection is one range) in plan
 *    order and run find(range AND filter) with batchSize snapshot.fetch.size
 *    and hand copies of the documents to the task thread through a queue
 *    bounded in documents and bytes, in batches (up to 256 documents or
 *    1 MiB: one lock and one wake-up per batch; at once while the task
 *    thread waits on an empty queue; ownership moves with the item,
 *    style.md §4.6.7). The task thread takes the whole queue at once
 *    and reports what it consumed every 64 documents, which is when readers
 *    waiting on the bound resume. The task thread
 *    takes them with snapshot_next(), which also logs progress every 10 s.
 *    The task thread encodes, produces and tracks offsets (single owner).
 *
 * A failure in any reader fails the whole snapshot (snapshot_next returns
 * SNAPSHOT_FAILED); the caller then stores nothing that says "complete".
 *
 * Thread: every function on the task thread; readers are internal.
 */
#ifndef MCDC_SNAPSHOT_SNAPSHOT_H
#define MCDC_SNAPSHOT_SNAPSHOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "capture/resume.h"
#include "common/error.h"
#include "config/config.h"
#include "encode/encode.h"
#include "event/position.h"
#include "snapshot/progress.h"

/* One collection to copy. */
struct snapshot_coll {
    char *db;
    char *coll;
    bson_t *filter;      /* find filter: the override or {}; owned, never NULL once planned
                          * (a pointer: the plan's array grows by realloc) */
    bson_t *owned;       /* NULL, or a hashkey_filter the reader applies to each document
                          * (hashed shard keys: snapshot/hashkey.h); owned by the plan */
    int64_t orphans;     /* documents dropped by `owned` (guarded by the snapshot's lock) */
    int64_t estimated;   /* estimatedDocumentCount, -1 if unknown */
    int64_t done;        /* documents handed over (guarded by the snapshot's lock) */
    int64_t started_ms;  /* monotonic ms when a reader started it, 0 = not yet */
    _Atomic int64_t finished_ms; /* 0 = not finished; set by a reader, read by the task */
    size_t parts;        /* `_id` ranges it is read in (snapshot_start), 1 = whole */
    size_t parts_left;   /* ranges not finished yet (guarded by the snapshot's lock) */
};

struct snapshot_plan {
    struct snapshot_coll *colls;
    size_t count;
    /* Documents are read at readConcern majority (never a w:1 write a failover
     * can roll back), after the cluster time (after_sec, after_inc) when
     * has_after: the snapshot's start position, so that no write before it
     * is missing from the copy while streaming starts after it. The server
     * waits until the commit point reaches that time. */
    bool has_after;
    uint32_t after_sec, after_inc;
    /* snapshot.resumable (the initial snapshot only; set by the caller
     * before snapshot_start): every part is read in `_id` order and the
     * snapshot keeps a progress tracker (snapshot/progress.h) that
     * snapshot_progress_json reads. resume (owned, may be NULL) is an earlier
     * attempt's progress checked by snapshot_resume_check: its finished
     * collections and ranges are skipped, its partial ranges continue after
     * their last key. progress_base (owned, may be NULL): the other extra
     * members of the records' position, written before the progress member. */
    bool resumable;
    struct snapshot_resume *resume;
    char *progress_base;
};

/* A document handed from a reader to the task thread. */
struct snapshot_doc {
    bson_t *doc;    /* owned */
    const char *db; /* borrowed from the plan, valid until snapshot_destroy */
    const char *coll;
    size_t entry; /* the part's progress entry (resumable plans), internal */
    struct snapshot_doc *next;
};

enum snapshot_status {
    SNAPSHOT_DOC = 0, /* *out is a document; free it with snapshot_doc_free */
    SNAPSHOT_WAIT,    /* nothing within the timeout; call again */
    SNAPSHOT_DONE,    /* every collection copied */
    SNAPSHOT_FAILED,  /* a reader failed: fail/err say why */
};

/*
 * Records where streaming starts after the snapshot (§5.2 step 1): opens a
 * change stream with the streaming pipeline (borrowed, may be NULL), takes
 * the first event's position if one arrives within cursor.max.await.time.ms,
 * else the post-batch resume token (sec/ord -1), else `hello`'s
 * operationTime. pos must be initialised; it is replaced. Returns false with
 * fail/err on a failed command.
 */
bool snapshot_record_start(mongoc_client_t *client, const struct mcdc_config *cfg,
                           const bson_t *pipeline, struct mcdc_position *pos,
                           struct resume_failure *fail, struct mcdc_error *err);

/*
 * Lists the collections to copy (§5.2 step 3). enc is borrowed. On success
 * *out is a new plan the caller frees with snapshot_plan_free (or hands to
 * snapshot_start). Returns false with fail/err on a failed command, or err
 * (domain CONFIG) on an invalid filter override or include regex.
 */
bool snapshot_plan(mongoc_client_t *client, const struct mcdc_config *cfg,
                   const struct encoder *enc, struct snapshot_plan **out,
                   struct resume_failure *fail, struct mcdc_error *err);

void snapshot_plan_free(struct snapshot_plan *plan);

struct snapshot;

/*
 * Splits the plan's large collections into `_id` ranges (a failed `$sample`
 * is a WARN and the collection is read whole), then starts min(ranges,
 * snapshot.max.threads) readers on pool (borrowed). Every document matching
 * a collection's filter is handed over exactly once whatever the split.
 * Takes ownership of plan. rs names the readers' threads and log lines.
 * stop (borrowed) makes readers leave early.
 */
struct snapshot *snapshot_start(mongoc_client_pool_t *pool, const struct mcdc_config *cfg,
                                struct snapshot_plan *plan, const char *rs,
                                const atomic_bool *stop);

/*
 * Takes the next document, waiting up to timeout_ms. Logs progress every 10 s
 * (documents done / estimated, %, rate, ETA per collection) and a summary
 * when done.
 */
enum snapshot_status snapshot_next(struct snapshot *snap, int timeout_ms, struct snapshot_doc **out,
                                   struct resume_failure *fail, struct mcdc_error *err);

void snapshot_doc_free(struct snapshot_doc *d);

/*
 * With a resumable plan: the extra members text of the position of record d
 * (the document snapshot_next just gave or an earlier one not yet emitted):
 * the progress after d, that is every document taken before d and d itself
 * (snapshot/progress.h). Call once per record, in the order the records are
 * emitted. The text is valid until the next call; *shared gets the
 * extra_shared hint. NULL for a plan that is not resumable.
 */
const char *snapshot_progress_json(struct snapshot *snap, const struct snapshot_doc *d,
                                   size_t *shared);

/*
 * Checks an earlier attempt's progress r against a new plan: every
 * collection r names must be in the plan and its ranges must be consistent
 * (snapshot_resume_pieces). On success writes into summary (size n) what is
 * resumed ("3 of 7 collections done, 2 resumed in 5 ranges (2 done)") and
 * returns true; else false with err saying why (domain IO).
 */
bool snapshot_resume_check(const struct snapshot_plan *plan, const struct snapshot_resume *r,
                           char *summary, size_t n, struct mcdc_error *err);

/* Documents handed over so far. */
int64_t snapshot_docs_done(struct snapshot *snap);

/*
 * Snapshot progress for the metrics, read under one lock: *done = documents
 * handed over so far, *remaining = documents still expected: for each
 * collection not finished yet max(estimated - done, 0), a finished one
 * counts 0 whatever its estimate said (orphans, deletes during the copy), so
 * the figure is never negative and is 0 once every collection is copied.
 * *remaining is -1 when an unfinished collection has no estimate.
 */
void snapshot_docs_progress(struct snapshot *snap, int64_t *done, int64_t *remaining);

/*
 * Replaces c->estimated (estimatedDocumentCount: every document on this
 * server, orphans and unowned copies included) by the number of documents
 * matching c->filter, counted by the server (countDocuments, i.e. an
 * aggregate $match + $group) within max_time_ms (maxTimeMS). Used for a
 * shard's task once c->filter holds its owned chunks: the chunk ranges are
 * on the shard key, which always has an index, so the count is an index
 * range scan; on a collection too large for that bound (or a failed count)
 * the estimate is kept and the progress figures correct it as collections
 * finish (snapshot_docs_progress). Collections with a client-side owned
 * filter (hashed shard keys) keep their estimate. Returns true when the
 * count replaced the estimate.
 */
bool snapshot_coll_count(mongoc_client_t *client, struct snapshot_coll *c, int64_t max_time_ms);

/* Stops the readers, joins them, frees the queue and the plan. NULL is a no-op. */
void snapshot_destroy(struct snapshot *snap);

#endif
