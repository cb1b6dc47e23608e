/*
 * snapshot/incremental: the incremental (ad hoc) snapshot engine of one
 * capture task (debezium-format.md §5.4; design.md §8).
 *
 * State, as Debezium's MongoDbIncrementalSnapshotContext: a queue of
 * collections (each with its additional condition and the correlation id of
 * the signal that asked for it), the last `_id` sent, the maximum `_id`, the
 * paused flag and the window of the chunk being read. This module reads the
 * chunks and keeps the window; the worker (worker_incremental.c) feeds it
 * the stream, emits the rows and writes the offsets.
 *
 * A chunk is read in `_id` order with incremental.snapshot.chunk.size
 * documents at most and incremental.snapshot.window.max.bytes of documents at
 * most (at least one document). Keys are compared in BSON order across type
 * brackets, so a mixed-type collection is read whole (Debezium's $gt/$lte
 * stay inside one bracket and skip every other `_id` type, §5.4 quirks).
 *
 * Two ways to close a window:
 *   - markers (default): `{_id: "<chunkId>-open", type: "snapshot-window-open",
 *     payload: ""}` is inserted into the signal collection before the read,
 *     and after it either a `-close` document (insert_insert) or the delete
 *     of the `-open` document (insert_delete). The stream sees them in order;
 *     between them a streamed change of a buffered key drops that row (the
 *     streamed change is newer), and at the close the rest is emitted.
 *   - cluster time (read.only, and per-shard tasks of a sharded cluster,
 *     whose own stream a write through mongos does not reach predictably):
 *     the chunk is read with readConcern {level: snapshot, atClusterTime: T};
 *     T = the server's operationTime just before the read. The rows are
 *     emitted as soon as the stream passes T: at the first event after T
 *     (which drops its own key's row: it supersedes it) or at the first
 *     empty batch after the read. Events at or before T are already in the
 *     rows and come first. No write at all.
 *
 * Offsets (§4.2 keys, values portable): incremental_snapshot_collections
 * in the layout's form (3.x: JSON array of {incremental_snapshot_collections_id,
 * ..._additional_condition, ..._correlation_id}; 1.9: "<rs>.<db>.<coll>,..."
 * with the JSON array kept in mongocdc_incremental_snapshot_collections),
 * incremental_snapshot_correlation_id, and the last key sent and the maximum
 * key as canonical extended JSON of {"_id": <key>} under
 * mongocdc_incremental_snapshot_primary_key / _maximum_key: Debezium's own
 * keys hold hex of a Java-serialised Object[], which it fails on when it is
 * anything else, so they are not written (Debezium then restarts the
 * collection from its first key). Read back: mongocdc's keys, else Debezium's
 * list; a Debezium primary key restarts that collection with a WARN.
 *
 * Reading in the background: a chunk is read by a reader thread with a
 * client of its own (snapshot/incremental_bg.h) while the task's thread
 * goes on streaming. incr_job_begin copies what the read needs (a struct
 * incr_job) and puts the engine in INCR_READING; incr_job_run does the
 * reads, markers included, on the reader; incr_job_attach applies the
 * result on the task's thread. A streamed change of the chunk's collection
 * that arrives while the read runs is published at once and its key kept
 * (at most INCR_PENDING_MAX_BYTES of keys): markers, when it comes after
 * the open marker; cluster time, with its time, since T is known only once
 * the read is done. At the attach those keys drop their rows, as a change
 * inside the window does; a cluster-time window whose T the stream has
 * already passed closes at once. For that, the task takes T itself when it
 * hands the read over (incr_job_at): an empty batch answered after it shows
 * the stream passed T even while the rows are still being read. The close marker is written after the read,
 * so a close seen before the attach waits for the result (incr_close_waits),
 * which is then already on its way.
 *
 * Thread: the task's thread only, except incr_job_run (a reader thread,
 * touching only its job).
 */
#ifndef MCDC_SNAPSHOT_INCREMENTAL_H
#define MCDC_SNAPSHOT_INCREMENTAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "common/error.h"
#include "config/config.h"

struct incr;

enum incr_state {
    INCR_IDLE = 0,  /* nothing queued */
    INCR_READY,     /* the next chunk is to be read */
    INCR_READING,   /* a reader thread reads the chunk (incr_job_begin) */
    INCR_WAIT_OPEN, /* chunk read; the stream has not reached the open marker */
    INCR_OPEN,      /* open marker seen; waiting for the close */
    INCR_WAIT_TIME, /* cluster-time window: waiting for the stream to pass T */
    INCR_CLOSED,    /* window closed: the buffer is to be emitted */
};

/* What incr_read_chunk did. */
enum incr_read {
    INCR_READ_WINDOW = 0, /* a non-empty chunk is in the window */
    INCR_READ_COLL_DONE,  /* the current collection has no more keys (it left the queue) */
    INCR_READ_FAILED,     /* err says why */
    INCR_READ_DISCARDED,  /* the result was dropped (stopped, or too many keys changed during
                             the read): the engine is READY again or moved on */
};

/* The most bytes of streamed keys kept while a chunk is read (BSON
 * {_id: v} documents). More changes of the collection during one read
 * discard the read: the chunk is read again (nothing was emitted of it). */
#define INCR_PENDING_MAX_BYTES (16u * 1024u * 1024u)

struct incr_job;

/*
 * New engine for one task. cfg borrowed (outlives it). task names log lines.
 * cluster_time: windows by cluster time (read.only or a per-shard task),
 * else markers in signal.data.collection. Never NULL.
 */
struct incr *incr_new(const struct mcdc_config *cfg, const char *task, bool cluster_time);
void incr_destroy(struct incr *s); /* NULL is a no-op */

/*
 * Restores the state from an offset value's extra members (JSON object text,
 * the position's extra_json; NULL or no incremental keys = idle). A value
 * with the keys but unreadable is an error (domain IO): it is not silently
 * dropped. The restored snapshot resumes after the last key sent.
 */
bool incr_restore(struct incr *s, const char *extra_json, struct mcdc_error *err);

/*
 * The incremental-snapshot offset members as a JSON object text, or NULL when
 * idle. Reflects the rows sent so far. Borrowed: valid until the next call
 * that changes the state.
 */
const char *incr_offset_json(struct incr *s);

/* How many leading bytes of the last incr_offset_json text are the queued
 * list (they repeat until the queue changes; a hint for the in-flight
 * tracker, mcdc_position.extra_shared); 0 when idle. */
size_t incr_offset_shared_len(const struct incr *s);

enum incr_state incr_state(const struct incr *s);
bool incr_paused(const struct incr *s);
bool incr_uses_cluster_time(const struct incr *s);

/* Queues db.coll with condition cond (a query document, borrowed and copied;
 * NULL = none) for the signal id (copied). A collection already queued or
 * being read is queued again at the end and read again in full with its own
 * condition, as Debezium's AbstractIncrementalSnapshotContext appends every
 * requested collection to its queue. Starts the engine when idle. */
void incr_enqueue(struct incr *s, const char *db, const char *coll, const bson_t *cond,
                  const char *signal_id);

/*
 * The largest incremental-snapshot offset members (incr_offset_json, bytes)
 * a signal may create. The queued list rides in every offset record
 * (Debezium's incremental_snapshot_collections, §4.2), and with
 * offsets.storage kafka one record over the offsets topic's
 * max.message.bytes (Kafka's default 1048588) is refused by the broker: the
 * task could then never write its position again, and every restart would
 * re-read the signal and fail the same way. Refusing at read time keeps the
 * value Debezium's shape (a compact encoding would no longer be its offsets)
 * and leaves half of the default for the resume token, keys and correlation
 * ids. About 2,900 collections of short names with a short signal id fit;
 * a larger request is split over several signals sent one after another.
 */
#define INCR_OFFSET_MAX_BYTES (512u * 1024u)

/* Collections queued (the current one included). */
size_t incr_queued(const struct incr *s);

/* Removes the n collections queued last (a refused signal's), never the
 * current one while a window of it is open. Idle when none is left. */
void incr_drop_last(struct incr *s, size_t n);

/* The current collection ("db.coll") and the signal id, or NULL when idle. */
const char *incr_current(const struct incr *s);
const char *incr_signal_id(const struct incr *s);

/* Whether a collection of signal signal_id is still queued (the current one
 * included): when none is, that signal's incremental snapshot is complete,
 * even while another signal's collections are still read. */
bool incr_signal_queued(const struct incr *s, const char *signal_id);

/*
 * stop-snapshot: removes every queued collection whose "db.coll" matches one
 * of the n regexes (case-insensitive, anchored; n = 0: all). The current
 * collection stops between chunks: a window being read is closed and emitted
 * first. Returns how many collections were removed; *current set when the
 * current one was among them.
 */
size_t incr_stop(struct incr *s, char *const *regexes, size_t n, bool *current);

/* A read the server refused (a bad condition, no privilege): drops the
 * window, the current collection and every queued collection of the same
 * signal (that signal's snapshot is aborted); other signals' collections stay
 * queued and are read next (state READY), as a collection queued behind is
 * read "after what is queued before it". Returns how many were dropped. */
size_t incr_abort(struct incr *s);

/* Anchored, case-insensitive regex match of ns ("db.coll") against re (a
 * data-collections entry); an invalid regex compares as a literal. */
bool incr_ns_matches(const char *re, const char *ns);

/* pause-snapshot / resume-snapshot (Debezium: the pause takes effect after
 * the current window; resume re-reads from the last key sent). */
void incr_pause(struct incr *s);
void incr_resume(struct incr *s);

/*
 * Begins the read of the next chunk of the current collection (state
 * INCR_READY, not paused): a job holding copies of what the read needs,
 * owned by the caller (to incr_job_run on a reader, then incr_job_attach or
 * incr_job_free); the engine is INCR_READING. owned: a query document ANDed
 * with every read (the documents a shard owns), or NULL; a hashkey_filter
 * (hashed shard key) is instead tested on each document read, so a chunk of
 * orphans only gives an empty window (snapshot/hashkey.h). NULL when the
 * state is not READY or nothing is queued.
 */
struct incr_job *incr_job_begin(struct incr *s, const bson_t *owned);

/*
 * The reads of job j with client (the reader's own; any thread; touches only
 * j and client). With markers, inserts the open marker before and the close
 * marker (or the delete of the open one) after the read; with the cluster
 * time, reads at T = the server's operationTime. The first chunk of a
 * collection also reads its maximum key (with the condition). The chunk is
 * read in `_id` order within one BSON type bracket (snapshot/keyrange.h).
 * cancel (NULL: none) is tested between documents: once set, the job ends
 * failed, to be discarded. Errors are in the job, reported by the attach.
 */
void incr_job_run(struct incr_job *j, mongoc_client_t *client, const atomic_bool *cancel);

/*
 * Cluster-time windows: T, taken by the task itself (incr_cluster_time_now)
 * just after incr_job_begin and before its next getMore, so that an empty
 * batch answered during the read already shows the stream passed T (the
 * rows then go out as soon as they are attached, instead of after one more
 * empty batch). The read then uses this T. No-op for a marker window or a
 * job the engine no longer waits for.
 */
void incr_job_at(struct incr *s, struct incr_job *j, uint32_t sec, uint32_t inc);

/* The server's operationTime now, by a ping with client (the cluster time a
 * snapshot read at atClusterTime uses; MongoDB's causal consistency). False
 * with err when the server gives none (not a replica set, before 5.0) or
 * the ping fails (err->retriable for a lost connection or an election). */
bool incr_cluster_time_now(mongoc_client_t *client, uint32_t *sec, uint32_t *inc,
                           struct mcdc_error *err);

/*
 * Applies a finished job (taken, freed) on the task's thread. Returns
 * INCR_READ_WINDOW (state WAIT_OPEN, OPEN or CLOSED with markers by what the
 * stream has shown; WAIT_TIME or CLOSED with the cluster time),
 * INCR_READ_COLL_DONE (the collection left the queue; READY or IDLE),
 * INCR_READ_FAILED (err: the server's refusal or a lost connection, the
 * messages of a read on the task's thread; READY, so a retry re-reads) or
 * INCR_READ_DISCARDED (READY, IDLE, or a job the engine no longer waits for).
 */
enum incr_read incr_job_attach(struct incr *s, struct incr_job *j, struct mcdc_error *err);

/* Frees a job that will not be attached (NULL is a no-op). */
void incr_job_free(struct incr_job *j);

/* The read in flight will not be attached (the stream stopped): READY again;
 * the chunk is read anew, from the last key sent. No-op unless READING. */
void incr_job_abandon(struct incr *s);

/* The stream showed the window's close while the read result is not
 * attached yet: the caller waits for the result and attaches it now. */
bool incr_close_waits(const struct incr *s);

/*
 * A streamed insert or delete in the signal collection: the window markers.
 * op_insert: an insert (doc: its fullDocument), else a delete (doc: its
 * documentKey). Returns true when it was a marker of this engine's current
 * chunk (the window opened or closed), false otherwise.
 */
bool incr_on_marker(struct incr *s, bool op_insert, const bson_t *doc);

/*
 * A streamed data event of db.coll (lengths given) with document key key
 * (borrowed) at cluster time (sec, inc) (has_time false: unknown). Drops the
 * buffered row of that key while a marker window is open, or, for a
 * cluster-time window, when the event is after T. Returns true when a
 * cluster-time window's T has been passed (the window is then CLOSED).
 */
bool incr_on_event(struct incr *s, const char *db, size_t db_len, const char *coll, size_t coll_len,
                   const bson_t *key, bool has_time, uint32_t sec, uint32_t inc);

/* The stream answered an empty batch after the chunk was read (or, while it
 * is read, after T was taken: incr_job_at): every event up to the server's
 * time of that answer (later than T) has been seen, so a cluster-time window
 * closes (at the attach, for a read still running). (A post-batch token's time cannot serve: a
 * high-water mark at T sorts before the events of T, and an idle server
 * need not move it past T.) */
void incr_on_idle(struct incr *s);

/* Rows left in the closed window, in `_id` order: n and row i (NULL for a
 * dropped row). Borrowed until incr_window_done. */
size_t incr_window_size(const struct incr *s);
const bson_t *incr_window_row(const struct incr *s, size_t i);

/* Row i was produced: it becomes the last key sent (in the offsets). */
void incr_window_sent(struct incr *s, size_t i);

/*
 * The closed window is emitted: the chunk's end becomes the last key sent,
 * the buffer is freed and the engine goes back to READY (or stays paused).
 * Logs progress (% of the estimated count, rows/s, ETA) every 10 s and at
 * the end of a collection.
 */
void incr_window_done(struct incr *s);

/* The database and collection of the current collection (borrowed). */
const char *incr_db(const struct incr *s);
const char *incr_coll(const struct incr *s);

/* The last key sent (maximum false) or the maximum key as canonical extended
 * JSON of {"_id": ...}, malloc'd (caller frees), or NULL when not known. */
char *incr_key_text(const struct incr *s, bool maximum);

/* Rows emitted for the current collection; its estimated count (-1 unknown). */
int64_t incr_rows_sent(const struct incr *s);

#endif
