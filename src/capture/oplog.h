/*
 * oplog: legacy capture by tailing `local.oplog.rs` of one replica set (or of
 * one shard's replica set: a reader is per task), Debezium 1.9's oplog mode
 * (debezium-format.md §1.4, §3.5; mongo-sim-spec.md §5).
 *
 * A tailable, awaitData find on local.oplog.rs sorted $natural, starting
 * after a stored Timestamp(sec, ord) (`ts > T`), or at T (`ts >= T`) skipping
 * the first `tord` operations of that entry's transaction when the stored
 * position is inside one. The query also carries the caller's namespace and
 * operation conditions (encoder_build_oplog_query), `fromMigrate` does not
 * exist, and keeps no-ops (position only) and applyOps entries (unpacked here;
 * their inner operations are filtered by the caller).
 *
 * Only majority-committed entries are yielded (a write past the commit point
 * can still be rolled back by a failover, MongoDB's replication README,
 * "Rollback"): an entry read past hello's lastWrite.majorityOpTime is held
 * until the point passes it (oplog_majority.c says why hello). A stored or
 * carried-over start position that is no longer in the oplog (rolled back) is
 * reported at WARN and tailing continues after the common point.
 *
 * Each call of oplog_next() yields one item: a data operation (i/u/d: event
 * filled, emit true) or a position-only step (no-op, a skipped command, a
 * partialTxn link): emit false. Transactions (applyOps, including partialTxn
 * chains walked back through prevOpTime) yield one item per inner operation
 * in order, every one at the committing entry's ts with tord = 1, 2, ...
 *
 * Thread: the owning capture task (the client is not thread-safe).
 */
#ifndef MCDC_CAPTURE_OPLOG_H
#define MCDC_CAPTURE_OPLOG_H

#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "capture/capture.h"
#include "capture/resume.h"
#include "common/error.h"
#include "config/config.h"
#include "event/event.h"
#include "event/position.h"

struct oplog_reader;

/*
 * A replica set member's replication state as hello reports it
 * (lastWrite: MongoDB's hello.idl / replication_info.cpp): the majority
 * commit point and the member's last write.
 */
struct oplog_commit_point {
    bool known;                  /* the reply had lastWrite.majorityOpTime */
    uint32_t maj_sec, maj_ord;   /* lastWrite.majorityOpTime.ts */
    int64_t maj_t;               /* its term */
    uint32_t last_sec, last_ord; /* lastWrite.opTime.ts: the member's newest entry */
    int64_t last_t;              /* its term */
};

/*
 * Runs hello on the server server_id (0: the primary) through client and
 * fills cp. Returns true (cp->known false when the reply has no
 * lastWrite.majorityOpTime, e.g. not a replica set member), or false with
 * fail/err on a failure (as capture_failure_from). Source: hello.idl
 * lastWrite {opTime, majorityOpTime}.
 */
bool oplog_commit_point(mongoc_client_t *client, uint32_t server_id, struct oplog_commit_point *cp,
                        struct resume_failure *fail, struct mcdc_error *err);

/*
 * What a reader held back when it was destroyed: its one entry read but not
 * yet majority-committed (any false when none), with its term, and the last
 * write the server reported meanwhile (the end of what was past the point).
 */
struct oplog_held {
    bool any;
    uint32_t sec, ord;
    int64_t t;
    bool has_t;
    uint32_t last_sec, last_ord;
};

/* Fills held from r (before oplog_destroy). */
void oplog_held_entries(const struct oplog_reader *r, struct oplog_held *held);

/*
 * After a failover: was the held entry rolled back? Reads the entry at
 * held's ts through client; returns true with *rolled_back set (the entry is
 * gone, or has another term), false with fail/err on a read failure.
 */
bool oplog_held_rolled_back(mongoc_client_t *client, const struct oplog_held *held,
                            bool *rolled_back, struct resume_failure *fail, struct mcdc_error *err);

struct oplog_item {
    struct mcdc_event ev;     /* valid when emit; views into the reader's buffers */
    bool emit;                /* a data operation (i/u/d) */
    struct mcdc_position pos; /* the position after this item (oplog = true); owned by the item,
                                 position_init()ed by oplog_item_init */
};

/* Initialises / releases an item's owned position. */
void oplog_item_init(struct oplog_item *item);
void oplog_item_clear(struct oplog_item *item);

/*
 * Opens the tailing cursor on client (borrowed; must outlive the reader).
 * query is extra conditions on oplog entries (a document whose members are
 * and-ed with the reader's own; NULL = none; copied). from: the stored
 * position (sec > 0; its tord > 0 means inside that entry's transaction), or
 * NULL / no timestamp to start after the newest entry ("now").
 * cfg: cursor.max.await.time.ms, cursor.batch.size and
 * oplog.update.raw.diff (false: $v: 2 diffs become $v: 1; true: kept raw).
 *
 * Before tailing from a stored position the oldest entry is read: when it is
 * newer than from (the entries in between were truncated), NULL is returned
 * with fail/err as history lost (code 286, "...no longer in the oplog...").
 * Other failures: NULL with fail (if not NULL) and err from libmongoc (fail's
 * message points into err).
 */
struct oplog_reader *oplog_open(mongoc_client_t *client, const struct mcdc_config *cfg,
                                const bson_t *query, const struct mcdc_position *from,
                                struct resume_failure *fail, struct mcdc_error *err);

/* Kills the cursor and frees the reader. NULL is a no-op. */
void oplog_destroy(struct oplog_reader *r);

/*
 * The position the reader starts from: from as given, or the newest entry at
 * open when starting "now" (store it before producing anything, so a restart
 * resumes there). Fills pos (initialised; old contents freed).
 */
void oplog_start_position(const struct oplog_reader *r, struct mcdc_position *pos);

/*
 * Waits up to cursor.max.await.time.ms for the next item. CAPTURE_EVENT:
 * item filled (item->ev borrowed until the next oplog_* call). CAPTURE_IDLE:
 * nothing new. CAPTURE_ERROR: see oplog_failure(); a getMore failing with 136
 * CappedPositionLost (the oplog wrapped past the cursor) classifies as
 * history lost. Malformed entries are errors too (fatal: domain ENCODE).
 */
enum capture_status oplog_next(struct oplog_reader *r, struct oplog_item *item);

/*
 * A reader without a connection, for entries handed in by oplog_feed (unit
 * tests, fuzzing): cfg as for oplog_open (borrowed). Free with
 * oplog_destroy. A transaction whose entries must be read back
 * (a partialTxn chain, a prepared transaction's commit) is an ENCODE error.
 */
struct oplog_reader *oplog_detached(const struct mcdc_config *cfg);

/*
 * Processes entry (one document of local.oplog.rs; copied) as oplog_next
 * does the next entry of its cursor, returning its first item; the further
 * operations of a transaction come from oplog_next (which returns
 * CAPTURE_IDLE on a detached reader once they are done). Returns
 * CAPTURE_EVENT or CAPTURE_ERROR (a malformed entry: see oplog_failure).
 */
enum capture_status oplog_feed(struct oplog_reader *r, const bson_t *entry,
                               struct oplog_item *item);

/* After CAPTURE_ERROR: as capture_failure(). */
void oplog_failure(struct oplog_reader *r, struct resume_failure *fail, struct mcdc_error *err);

/*
 * Reads the ts of the oldest (newest = false) or newest (true) entry of
 * local.oplog.rs through client. Returns true with sec and ord set, false with
 * err (domain MONGO, retriable per resume_classify) on a failure or an empty
 * oplog. The snapshot's start position in oplog mode is the newest entry read
 * before any collection is copied (debezium-format.md §1.5, 1.9 ts_ms rule).
 */
bool oplog_edge(mongoc_client_t *client, bool newest, uint32_t *sec, uint32_t *ord,
                struct resume_failure *fail, struct mcdc_error *err);

/*
 * As oplog_edge(newest = true), and also writes into stxnid (at most
 * stxnid_size bytes, NUL-terminated) the newest entry's 1.9 session id:
 * "<uuid>:<txnNumber>" (oplog_stxnid) when the entry has no `h` or h 0 and
 * carries lsid and txnNumber (a retryable write, or a transaction's applyOps),
 * as SourceInfo.extractSessionTxnId@v1.9.8 gives it; "" otherwise (and on
 * failure). Debezium 1.9's snapshot position is this entry
 * (MongoDbSnapshotChangeEventSource.determineSnapshotOffsets), so every
 * snapshot record's source.stxnid and offset carry the id.
 */
bool oplog_newest(mongoc_client_t *client, uint32_t *sec, uint32_t *ord, char *stxnid,
                  size_t stxnid_size, struct resume_failure *fail, struct mcdc_error *err);

/*
 * "<uuid>:<txnNumber>", Debezium 1.9's oplog transaction id (§3.5): uuid is
 * lsid.id formatted as a UUID string; for a binary lsid.id it is Java's
 * UUID.nameUUIDFromBytes (MD5, version 3) of its bytes, as 1.9 does with
 * the driver's Binary. Writes at most n bytes (NUL-terminated) into buf;
 * returns false when lsid has no id.
 */
bool oplog_stxnid(const bson_t *lsid, int64_t txn_number, char *buf, size_t n);

#endif
