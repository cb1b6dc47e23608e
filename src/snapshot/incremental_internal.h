/*
 * snapshot/incremental internals shared by incremental.c (state, window,
 * offsets) and incremental_read.c (the reads and markers). Not a contract.
 */
#ifndef MCDC_SNAPSHOT_INCREMENTAL_INTERNAL_H
#define MCDC_SNAPSHOT_INCREMENTAL_INTERNAL_H

#include "snapshot/incremental.h"

/* One queued collection. */
struct incr_item {
    char *db, *coll, *ns; /* ns = "db.coll" */
    bson_t *cond;         /* additional condition; empty = none; owned, never NULL. A pointer:
                           * the queue moves items (realloc, shifts) and a bson_t past its
                           * inline size points into itself */
    char *signal_id;
};

/* One buffered row. doc NULL = dropped by a streamed change. */
struct incr_row {
    bson_t *doc;
    uint64_t hash; /* of the _id value's type and bytes */
};

/* A streamed change of the chunk's collection seen while its chunk was read
 * (state INCR_READING): the key, and the event's cluster time (cluster-time
 * windows compare it with T, known once the read is done). */
struct incr_pending {
    bson_t *key; /* {_id: v} */
    uint32_t sec, inc;
    bool has_time;
};

/*
 * One chunk read, handed from the task's thread to a reader thread and back
 * (incremental.h, "Reading in the background"). The inputs are copies of the
 * engine's state when the read began; the reader touches nothing else, and
 * incr_job_attach applies the outputs on the task's thread.
 */
struct incr_job {
    /* inputs */
    const struct mcdc_config *cfg;
    char *db, *coll, *ns;
    bson_t cond, owned, last_key;
    bool cluster_time, need_estimate, hashed_owned;
    bool has_at; /* cluster time: T taken by the task before the read (incr_job_at) */
    int bracket;
    char chunk_id[40];
    /* in and out: the maximum key (read by the first chunk of a collection) */
    bson_t max_key;
    /* outputs */
    enum incr_read result;
    struct mcdc_error err;
    uint32_t at_sec, at_inc;
    bson_t chunk_end;
    int64_t estimated;
    bson_t **docs;
    size_t ndocs, docs_cap, bytes;
};

struct incr {
    const struct mcdc_config *cfg;
    char task[128];
    bool cluster_time;
    enum incr_state state;
    bool paused;
    bool stop_current; /* stop-snapshot arrived during a window: stop after it */

    struct incr_item *queue;
    size_t count, cap;

    bson_t last_key;  /* {_id: <last key sent>}; empty = from the start */
    bson_t max_key;   /* {_id: <max>}; empty = not read yet */
    bson_t chunk_end; /* {_id: <last key read in the window>} */
    int bracket;      /* bracket being read (keyrange.h), -1: the last key's */

    char chunk_id[40];
    uint32_t at_sec, at_inc; /* cluster-time window: T; marker window: the cluster time after
                                the open marker, which the majority chunk read must reach */

    struct incr_row *rows;
    size_t nrows, rows_cap;
    size_t *slots; /* open addressing over rows, index + 1; 0 = empty */
    size_t nslots;
    size_t window_bytes;

    int64_t sent;       /* rows emitted for the current collection */
    int64_t superseded; /* its rows dropped for a streamed change */
    int64_t estimated;  /* its estimatedDocumentCount, -1 unknown */
    int64_t started_ms; /* monotonic */
    int64_t last_log_ms;

    /* background read (state INCR_READING) */
    bool win_opened, win_close_seen; /* markers seen before the read result */
    struct incr_pending *pending;    /* streamed keys to drop from the read result */
    size_t npending, pending_cap, pending_bytes;
    bool pending_overflow;        /* too many: the result is discarded, the chunk re-read */
    bool at_known;                /* cluster time: T is known (incr_job_at) */
    bool passed_t;                /* ... and an empty batch came after it: the stream passed T */
    bool has_seen;                /* the latest streamed cluster time since the read began */
    uint32_t seen_sec, seen_inc;

    char *offset_json;
    bool offset_dirty;
    /* The queue's member of offset_json, as libbson writes it
     * ("\"incremental_snapshot_collections\" : \"...\""), rebuilt only when
     * queue_gen moves: rows change the keys, not the list, and a long list
     * rebuilt and escaped for every row made each row cost its size. */
    char *colls_member;
    uint64_t queue_gen, colls_gen;
};

/* Drops the buffered row whose _id equals key's _id ({_id: v}). */
void incr_drop_key(struct incr *s, const bson_t *key);

/* A streamed data event while the chunk is read (state INCR_READING):
 * remembers key when it may supersede a row of the read (incremental_job.c). */
void incr_pending_event(struct incr *s, bool same_ns, const bson_t *key, bool has_time,
                        uint32_t sec, uint32_t inc);

/* Frees the remembered keys. */
void incr_pending_free(struct incr *s);

/* FNV-1a of an _id value's type byte and value bytes. */
uint64_t incr_key_hash(const bson_iter_t *id);

/* Queues db.coll (no duplicates) without starting the engine. */
void incr_push_item(struct incr *s, const char *db, const char *coll, const bson_t *cond,
                    const char *signal_id);

/* Adds a read document (taken) to the window. */
void incr_window_add(struct incr *s, bson_t *doc);

/* Frees the rows and the index. */
void incr_window_clear(struct incr *s);

/* Pops the current collection (finished or stopped); resets the keys. */
void incr_pop_current(struct incr *s);

/* The current collection has no more keys: logs its summary and pops it. */
void incr_collection_finished(struct incr *s);

#endif
