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

/* Frees the current transaction's entries and operations and closes it. oplog.c. */
void oplog_free_txn(struct oplog_reader *r);

/*
 * Reads the entry at Timestamp(sec, ord) (a partialTxn or prepare link) with
 * a plain find; *out is an owned copy. Returns false with the reason in r
 * (a server error, history lost: code 286, or a detached reader). oplog.c.
 */
bool oplog_fetch_entry(struct oplog_reader *r, uint32_t sec, uint32_t ord, bson_t **out);

#endif
