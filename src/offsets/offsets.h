/*
 * offsets: where each capture task stands (design.md §7, debezium-format.md
 * §4). Two parts:
 *   - inflight: an ordered tracker of produced records; the committed position
 *     advances only over a prefix of acknowledged records (at-least-once).
 *   - store: durable per-replica-set offset values, `file` (temp file, fsync,
 *     rename, fsync of the folder) or `kafka` (compacted topic, Kafka Connect
 *     offsets format).
 *
 * Thread: worker (each task owns its tracker and store handle).
 */
#ifndef MCDC_OFFSETS_OFFSETS_H
#define MCDC_OFFSETS_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"
#include "config/config.h"

/*
 * A stream position: the Debezium offset value fields (§4.2). Owned values:
 * resume_token is a copy (bson_t) the position owns.
 */
struct mcdc_position {
    int64_t sec;         /* clusterTime seconds, -1 when known only from a resume token */
    int64_t ord;         /* clusterTime increment, -1 when unknown */
    bson_t resume_token; /* the full resume-token document; empty if none */
    bool has_resume_token;
    bool initsync;      /* an initial snapshot is in progress */
    bool oplog;         /* written by legacy oplog capture mode */
    int64_t h;          /* oplog h (1.9), valid if has_h */
    bool has_h;         /* h known; written as null otherwise (1.9 on MongoDB 4.4+) */
    int64_t tord;       /* oplog transaction order, 0 when none */
    char stxnid[96];    /* 1.9 oplog session id "<uuid>:<txnNumber>" (oplog_stxnid), "" when none */
    char *lsid;         /* STRICT JSON of lsid, NULL when none */
    int64_t txn_number; /* valid when lsid != NULL */
    char *extra_json;   /* other keys (transaction, incremental snapshot) as a JSON object text, or
                           NULL */
};

/* Sets pos to "no position": sec = ord = -1, empty token, no strings. */
void position_init(struct mcdc_position *pos);
/* Frees what pos owns and re-initialises it. */
void position_clear(struct mcdc_position *pos);
/* Deep copy of src into dst (both initialised; dst's old contents are freed). */
void position_copy(struct mcdc_position *dst, const struct mcdc_position *src);

/*
 * The Kafka Connect offset value (debezium-format.md §4.2) as compact JSON,
 * malloc'd; caller frees. Keys: sec, ord, h (null unless has_h) and tord (oplog positions only),
 * stxnid (when set, with or without initsync, as SourceInfo.lastOffset@v1.9.8 writes it),
 * initsync (only when true), resume_token (Base64 of the token's BSON bytes,
 * 2.7+ form), lsid and txnNumber (when lsid is set), the extra_json members,
 * and "mongocdc_capture_mode": "oplog" | "change_streams" (which capture mode
 * wrote it; Debezium ignores unknown keys).
 */
char *position_to_json(const struct mcdc_position *pos);

/*
 * Parses an offset value into pos (initialised by the caller; replaced only
 * on success). Accepts what position_to_json writes and what Debezium writes:
 * resume_token as Base64 of BSON, or the old (<=2.6) hex `_data` string, which
 * becomes {"_data": "<hex>"} (Debezium's lastResumeTokenDoc fallback); `h`
 * null or absent (has_h false); stxnid a string (null: none; one longer than
 * the field is kept in extra_json); unknown keys are kept in extra_json. Without
 * mongocdc_capture_mode the shape decides (§4.4): a resume token means change
 * streams, no token means oplog (Debezium 1.x values are sec/ord/h, h null on
 * MongoDB 4.4+). Returns false with err (domain IO, EINVAL) on invalid JSON, a key
 * of the wrong type, a duplicated key, sec/ord outside -1 (unknown) ..
 * 2^32-1 (a BSON Timestamp's unsigned 32-bit fields), or a value with no
 * usable position (no non-empty resume_token and not both sec > 0 and
 * ord >= 0, e.g. `{}`): such an entry is corruption, never "stream from now".
 */
bool position_from_json(const char *json, struct mcdc_position *pos, struct mcdc_error *err);

/* ---- in-flight tracker ---- */
struct inflight;

struct inflight *inflight_new(void);
void inflight_destroy(struct inflight *inf);

/*
 * Registers the next produced record with the position reached once it (and
 * every earlier record) is delivered. Takes a copy of pos (no allocation in
 * steady state: slots reuse their buffers). pos NULL: the record does not move
 * the position; use it for every record of an event but the last (a
 * transaction END/BEGIN before the data record, the data record before its
 * tombstone), so the event's position is committed only once all of its
 * records are acknowledged. Returns the cookie (never NULL) to pass as the
 * sink's opaque; it stays valid until acknowledged and committed.
 */
void *inflight_add(struct inflight *inf, const struct mcdc_position *pos);

/* Marks the record with this cookie acknowledged (any order). An unknown
 * cookie is logged and ignored. */
void inflight_ack(struct inflight *inf, void *cookie);

/*
 * Advances the committable position without a record (a post-batch resume
 * token, a filtered event): committable at once when nothing is in flight,
 * else once every earlier record is acked. Consecutive advances behind a
 * stalled record share one slot (the newest wins), so a long broker outage
 * with an idle stream does not grow the tracker. Takes a copy of pos; NULL
 * is a no-op.
 */
void inflight_advance(struct inflight *inf, const struct mcdc_position *pos);

/*
 * Newest position whose predecessors are all acknowledged, or NULL if it has
 * not changed since the last call. Borrowed; valid until the next inflight_*
 * call. O(records popped).
 */
const struct mcdc_position *inflight_committable(struct inflight *inf);

/* Records registered and not yet popped by inflight_committable(). */
size_t inflight_pending(const struct inflight *inf);

/* ---- store ---- */
struct offset_store;

/*
 * Opens the store configured by cfg (borrowed; outlives the store):
 * offsets.storage file (offsets.file.path; the folder must exist; an
 * unreadable or corrupt file is an error here, domain IO, naming the path) or
 * kafka (offsets.topic, default "mongocdc-offsets", through the kafka: map;
 * a missing topic is created compacted when the broker allows). Entries are
 * keyed by the Kafka Connect partition key
 * ["<topic.prefix>",{"rs":"<rs>","server_id":"<topic.prefix>"}] (§4.1).
 * Returns NULL with err (CONFIG for settings, IO for the file).
 */
struct offset_store *offset_store_open(const struct mcdc_config *cfg, struct mcdc_error *err);
/*
 * As offset_store_open, for reading only: the file store does not take the
 * run-long lock, so a running daemon's positions can be read (mongocdc
 * check); offset_store_save on it fails (domain INTERNAL). A daemon that
 * writes meanwhile replaces the file atomically, so a load sees the old or
 * the new file, never a torn one.
 */
struct offset_store *offset_store_open_read_only(const struct mcdc_config *cfg,
                                                 struct mcdc_error *err);
/* Closes the store; NULL is a no-op. */
void offset_store_close(struct offset_store *store);

/* Loads the stored position of replica set rs into pos (initialised by the
 * caller); rs NULL: the partition {server_id} of one stream for the whole
 * deployment (Debezium 2.6+, debezium-format.md §4.1; mongos merged mode).
 * *found false when none. False with err on I/O, Kafka (retriable)
 * or a corrupt value. */
bool offset_store_load(struct offset_store *store, const char *rs, struct mcdc_position *pos,
                       bool *found, struct mcdc_error *err);

/* Durably stores pos for rs (NULL: the {server_id} partition, as load): file = temp file, fsync, rename, fsync of the
 * folder; kafka = produce and wait for the acknowledgement up to
 * offsets.flush.timeout.ms (retriable error on timeout). */
bool offset_store_save(struct offset_store *store, const char *rs, const struct mcdc_position *pos,
                       struct mcdc_error *err);

/* ---- raw entries (the `mongocdc offsets` command) ---- */

/* One stored entry: the partition key and the offset value, both as the
 * JSON text stored (malloc'd, owned by the list). */
struct offset_entry {
    char *key;
    char *value;
};

struct offset_entries {
    struct offset_entry *items;
    size_t count;
};

/* Frees every entry and empties the list; NULL is a no-op. */
void offset_entries_free(struct offset_entries *list);

/*
 * Every entry of the store, whatever its name or partition form (other
 * daemons', Debezium's, other connectors' sharing a Kafka Connect offsets
 * topic), with its newest value; deleted entries (a null value, a Kafka
 * tombstone) are left out. out is empty on entry. False with err as
 * offset_store_load.
 */
bool offset_store_list(struct offset_store *store, struct offset_entries *out,
                       struct mcdc_error *err);

/*
 * Stores value_json (an offset value as JSON text, not checked here) under
 * the partition key key exactly as given; value_json NULL deletes the entry
 * (file: the member is removed; kafka: a tombstone, as Kafka Connect's
 * OffsetStorageWriter writes for a null offset). Fails on a read-only store.
 */
bool offset_store_put_raw(struct offset_store *store, const char *key, const char *value_json,
                          struct mcdc_error *err);

#endif
