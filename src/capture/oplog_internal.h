/*
 * capture/oplog_internal: the oplog reader's state and what its two files
 * share (oplog.c: edges, tailable cursor, transaction-link reads;
 * oplog_entry.c: decoding entries into items). Not part of the module's
 * interface.
 *
 * Thread: the owning capture task.
 */
#ifndef MCDC_CAPTURE_OPLOG_INTERNAL_H
#define MCDC_CAPTURE_OPLOG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "capture/oplog.h"
#include "common/error.h"

struct oplog_reader {
    mongoc_client_t *client;
    mongoc_collection_t *coll;
    mongoc_cursor_t *cursor;
    const struct mcdc_config *cfg;
    bson_t query; /* the caller's extra conditions */

    uint32_t sec, ord;     /* ts of the last entry read: where a reopened cursor starts */
    bool started;          /* sec/ord valid */
    int64_t start_tord;    /* stored position inside a transaction */
    uint32_t skip_sec, skip_ord;
    int64_t skip_tord;     /* operations of the txn at skip ts already emitted */

    bson_t entry;      /* the current top-level entry (owned copy) */
    bson_t **chain;    /* partialTxn entries of the current transaction (owned copies) */
    size_t n_chain;
    bson_t **ops;      /* the current transaction's operations (owned copies) */
    size_t n_ops, next_op;
    bool txn_open;
    char stxnid[96];
    bool has_stxnid;
    int64_t h;
    bool has_h; /* the entry has `h` (MongoDB < 4.4) */
    int64_t t;
    bool has_t; /* the entry has `t` (its term) */

    /* The majority commit point (oplog_majority.c): entries past it are held. */
    struct oplog_commit_point cp;
    bool gate_off;          /* the server reports no commit point: entries pass as read */
    bson_t held;            /* the entry read but not yet majority-committed (owned copy) */
    bool has_held;
    int64_t hold_backoff_ms; /* the next wait between two commit-point reads */
    int64_t held_t;          /* the held entry's term (-1: none) */
    uint32_t held_last_sec, held_last_ord; /* the newest write seen in that term */

    bson_t decoded;
    bool has_decoded;

    bson_error_t error;
    bson_t reply;
    bool has_error;
    struct mcdc_error local; /* errors found here (malformed entries) */
    bool local_error;
};

/* Copied whole into a position's offset field. */
_Static_assert(sizeof((struct oplog_reader *)0)->stxnid ==
                   sizeof((struct mcdc_position *)0)->stxnid,
               "the reader's and the offset's stxnid have one size");

/* The Timestamp at key in doc as (*sec, *ord); (0, 0) when absent or not a
 * Timestamp. */
static inline void oplog_ts_of(const bson_t *doc, const char *key, uint32_t *sec, uint32_t *ord)
{
    bson_iter_t it;
    *sec = *ord = 0;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_TIMESTAMP(&it))
        bson_iter_timestamp(&it, sec, ord);
}

/*
 * Writes entry's session id (Debezium 1.9's stxnid) into buf (n bytes,
 * NUL-terminated), or "" when it has none. SourceInfo.extractSessionTxnId@v1.9.8:
 * an entry whose `h` is absent or 0 (MongoDB 4.2+) and that has txnNumber gets
 * "<lsid uuid>:<txnNumber>" (MongoUtil.getOplogSessionTransactionId).
 * oplog_entry.c.
 */
void oplog_entry_stxnid(const bson_t *entry, char *buf, size_t n);

/*
 * Takes the top-level entry doc (borrowed; copied into r->entry) and fills
 * item with its first (or only) item. Returns CAPTURE_EVENT, or
 * CAPTURE_ERROR with the reason in r (oplog_failure). oplog_entry.c.
 */
enum capture_status oplog_take_entry(struct oplog_reader *r, const bson_t *doc,
                                     struct oplog_item *item);

/* Fills item with the open transaction's next operation (r->txn_open and
 * r->next_op < r->n_ops). Returns CAPTURE_EVENT or CAPTURE_ERROR.
 * oplog_entry.c. */
enum capture_status oplog_next_txn_op(struct oplog_reader *r, struct oplog_item *item);

/* (s1, o1) > (s2, o2) in Timestamp order. */
static inline bool oplog_ts_after(uint32_t s1, uint32_t o1, uint32_t s2, uint32_t o2)
{
    return s1 > s2 || (s1 == s2 && o1 > o2);
}

/*
 * doc was just read from the cursor (borrowed). Returns false when it may be
 * taken now (at or before the commit point, or no gate); true when it is
 * past the commit point even after reading the point again: it is copied
 * into r->held and must wait (oplog_release_held). A failed commit-point read
 * also returns true, with the failure recorded in r (has_error), so that the
 * next release reports it. oplog_majority.c.
 */
bool oplog_hold_if_uncommitted(struct oplog_reader *r, const bson_t *doc);

/*
 * Waits, up to cursor.max.await.time.ms, for the commit point to reach the
 * held entry, reading it again at growing intervals (1 ms doubling up to
 * 50 ms). CAPTURE_EVENT: the entry was taken into item (oplog_take_entry);
 * CAPTURE_IDLE: still held; CAPTURE_ERROR: the commit point could not be read
 * (see oplog_failure). oplog_majority.c.
 */
enum capture_status oplog_release_held(struct oplog_reader *r, struct oplog_item *item);

/*
 * Rollback check of a start position (oplog_open): the entry at from's ts
 * must still be in the oplog, with from's term (when known) and `h` (when
 * both have one). When it is not, a failover rolled it back: WARN with the
 * range, and r->sec/ord (and h) move to the common point, the newest entry
 * older than from, so that tailing continues with the new primary's history
 * after it. Returns false with fail/err on a read failure. oplog_majority.c.
 */
bool oplog_check_start(struct oplog_reader *r, const struct mcdc_position *from,
                       struct resume_failure *fail, struct mcdc_error *err);

/* Frees the current transaction's entries and operations and closes it. oplog.c. */
void oplog_free_txn(struct oplog_reader *r);

/*
 * Reads the entry at Timestamp(sec, ord) (a partialTxn or prepare link) with
 * a plain find; *out is an owned copy. Returns false with the reason in r
 * (a server error, history lost: code 286, or a detached reader). oplog.c.
 */
bool oplog_fetch_entry(struct oplog_reader *r, uint32_t sec, uint32_t ord, bson_t **out);

#endif
