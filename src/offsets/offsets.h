/*
 * offsets: where each capture task stands (design.md §7, debezium-format.md
 * §4). The position value itself is event's (event/position.h); here: its
 * offset-value JSON, and two parts:
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
#include "event/position.h" /* struct mcdc_position, its lifecycle and cluster time */

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
 * Who wrote a stored offset value, told by the fields present
 * (debezium-format.md §4.2): "mongocdc_capture_mode" = mongocdc; an "h" key
 * (SourceInfo.lastOffset@v1.9.8 always writes it, null for change-stream
 * positions) = Debezium 1.x; neither = Debezium 2.x/3.x.
 */
enum offset_writer {
    OFFSET_WRITER_MONGOCDC = 0,
    OFFSET_WRITER_DEBEZIUM_1X,
    OFFSET_WRITER_DEBEZIUM_2X_3X,
};

/* "mongocdc", "Debezium 1.x" or "Debezium 2.x-3.x" (static). */
const char *offset_writer_name(enum offset_writer w);

/* The writer of an offset value (JSON text), by the rule above; a value that
 * is not a JSON object counts as mongocdc's. */
enum offset_writer offset_value_writer(const char *value_json);

/*
 * The value as the configured layout's Debezium reads it (§4.2), compact JSON,
 * malloc'd; caller frees. dialect MCDC_DIALECT_3_X: position_to_json (resume
 * token as Base64 of its BSON, the 2.7+ form). MCDC_DIALECT_1_9: the 1.9
 * form: resume_token the hex `_data` string (a token without a string
 * `_data` keeps the Base64 form, which 1.9 cannot use but mongocdc can), and
 * "h" always present (null unless an oplog entry gave one), as
 * SourceInfo.lastOffset@v1.9.8 writes it, and sec/ord of a token-only
 * position (-1) taken from the token's time (1.9 never wrote -1 and would
 * judge Timestamp(-1, -1) older than the oplog: a new snapshot); every other
 * key as position_to_json.
 */
char *position_to_json_dialect(const struct mcdc_position *pos, enum mcdc_dialect dialect);

/* The cluster time of a position: position_time (event/position.h), under
 * the name the offsets' callers have used. */
static inline uint64_t offset_position_time(const struct mcdc_position *pos)
{
    return position_time(pos);
}

/*
 * Opens the store configured by cfg (borrowed; outlives the store):
 * offsets.storage file (offsets.file.path; the folder must exist; an
 * unreadable or corrupt file is an error here, domain IO, naming the path) or
 * kafka (offsets.topic, default "mongocdc-offsets", through the kafka: map;
 * a missing topic is created compacted when the broker allows). Entries are
 * keyed by the Kafka Connect offsets key [name, partition] (§4.1) as
 * Connect's JsonConverter (schemas.enable=false) writes it: compact, the
 * partition map in Java HashMap order ("rs" before "server_id"), e.g.
 * ["inventory-connector",{"server_id":"dbserver1"}] or
 * ["inventory-connector",{"rs":"rs0","server_id":"dbserver1"}]; name is
 * mcdc_config_connector_name(cfg), server_id topic.prefix.
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

/*
 * The partition rs of the configured layout for a task (the rs argument of
 * load and save): NULL = {server_id}. Debezium 2.6+ (dialect 3.x) keeps one
 * partition {server_id} for a replica set and for merged (mongos) mode;
 * 1.x (dialect 1.9) {rs, server_id} per replica set, and for merged mode the
 * 2.2-2.5 sharded-mode partition rs "cluster"; per-shard tasks always
 * {rs, server_id} (Debezium 1.x's per-replica-set partitions).
 * rs: the task's replica set (shard) name; merged, per_shard: the task kind.
 * Returns rs, "cluster" (static) or NULL.
 */
const char *offsets_layout_partition(const struct mcdc_config *cfg, const char *rs, bool merged,
                                     bool per_shard);

/*
 * The Kafka Connect offsets-topic key of a replica set's partition:
 * ["<name>",{"rs":"<rs>","server_id":"<server_id>"}] with JsonConverter's
 * exact (compact) spacing and HashMap member order. name is the connector
 * name, server_id topic.prefix. rs NULL gives the single partition of
 * Debezium 2.6+ ["<name>",{"server_id":"<server_id>"}] (one stream for the
 * whole deployment, §4.1). Caller frees.
 */
char *offsets_partition_key(const char *name, const char *server_id, const char *rs);

/*
 * Whether key is a MongoDB connector partition key ["<name>",{..."server_id":
 * "<id>"...}] (Connect's JsonConverter array of the connector name and the
 * partition map): *name and *server_id get malloc'd copies (caller frees),
 * *rs a malloc'd copy of "rs" or NULL. False for any other key (other
 * connectors sharing a Connect offsets topic).
 */
bool offsets_parse_key(const char *key, char **name, char **server_id, char **rs);

/*
 * Every partition form either Debezium line or mongocdc may have written for
 * this task's source (§4.4 offset consolidation), the layout's own first:
 * replica set: {server_id}, {rs, server_id}, {rs: "cluster", server_id};
 * merged: {server_id}, {rs: "cluster", server_id}; per-shard: {rs,
 * server_id}. Fills forms (NULL entries = {server_id}, the others borrowed
 * from rs or static) and returns how many (at most 3).
 */
size_t offsets_partition_forms(const struct mcdc_config *cfg, const char *rs, bool merged,
                               bool per_shard, const char *forms[3]);

/*
 * Where a load found its position: the exact key (malloc'd; caller frees
 * through offset_origin_clear) and the writer of its value.
 */
struct offset_origin {
    char *key;
    enum offset_writer writer;
};
void offset_origin_clear(struct offset_origin *o);

/*
 * Loads the newest stored position among forms[0..n) (each NULL = the
 * partition {server_id}, else {rs: forms[i], server_id}), each looked up
 * under both connector names [name, ...] and [topic.prefix, ...] (mongocdc
 * before `name` existed), into pos (initialised by the caller). Newest = the
 * greatest offset_position_time; on a tie the earlier form, and name before
 * topic.prefix, wins. *found false when none. origin (may be NULL) gets the
 * key and writer of the one taken. The store is read once, however many
 * keys are tried. Every key naming this source that is under another
 * connector name or server_id (another `name` or topic.prefix) is WARNed
 * about once per handle and kept for offset_store_foreign(). False with err
 * on I/O, Kafka (retriable) or a corrupt value of a key that is tried.
 */
bool offset_store_load_forms(struct offset_store *store, const char *const *forms, size_t n,
                             struct mcdc_position *pos, bool *found,
                             struct offset_origin *origin, struct mcdc_error *err);

/* offset_store_load_forms with the one form rs (NULL: {server_id}). */
bool offset_store_load(struct offset_store *store, const char *rs, struct mcdc_position *pos,
                       bool *found, struct mcdc_error *err);

/*
 * The keys of Debezium/mongocdc MongoDB partitions (a map with "server_id")
 * the last load saw under another connector name or server_id than this
 * source's (name or topic.prefix, and topic.prefix): n gets their count; the
 * array and strings are borrowed until the next load or close.
 */
const char *const *offset_store_foreign(const struct offset_store *store, size_t *n);

/* Flags of offset_store_save_flags. */
enum {
    /* Store even a position older than the stored one (operator tools such
     * as `mongocdc offsets set`, or a deliberate start from an older
     * position); logged at WARN instead of refused. */
    OFFSET_SAVE_ALLOW_BACKWARDS = 1u << 0,
};

/*
 * Durably stores pos for rs (NULL: the {server_id} partition, as load) under
 * [name, partition], in the value form of the configured dialect
 * (position_to_json_dialect). file = temp file, fsync, rename, fsync of the
 * folder; kafka = produce and wait for the acknowledgement up to
 * offsets.flush.timeout.ms (retriable error on timeout).
 * A position never moves backwards silently: when the position stored under
 * that key (as this handle last loaded or saved it; read once otherwise) has
 * a later offset_position_time than pos, the save is refused with an ERROR
 * log and err (domain IO, code ERANGE, not retriable) unless flags has
 * OFFSET_SAVE_ALLOW_BACKWARDS. Positions without a known time are not
 * compared.
 */
bool offset_store_save_flags(struct offset_store *store, const char *rs,
                             const struct mcdc_position *pos, unsigned flags,
                             struct mcdc_error *err);
/*
 * Exactly-once (exactly.once.support): the kafka store writes each record
 * through fn instead of its own producer: fn(ctx, topic, key, value_json,
 * err) produces it into the open Kafka transaction of the records it covers
 * (pipeline/pipeline_txn.c), and the save counts as done when fn returns
 * true; the transaction's commit makes it durable, an abort takes it back
 * (the caller then reopens the store). Loads then wait until the offsets
 * topic is stable up to its end (no open transaction before it), reading
 * committed records only, as Kafka Connect's exactly-once source workers
 * do (KIP-618). fn NULL: back to the store's own producer. File store:
 * ignored.
 */
typedef bool (*offset_store_writer)(void *ctx, const char *topic, const char *key,
                                    const char *value_json, struct mcdc_error *err);
void offset_store_set_writer(struct offset_store *store, offset_store_writer fn, void *ctx);

/* offset_store_save_flags with flags 0. */
bool offset_store_save(struct offset_store *store, const char *rs, const struct mcdc_position *pos,
                       struct mcdc_error *err);

/*
 * Raw entries, for operator tools: every key of the store with its last value
 * (value_json NULL: deleted, a Kafka tombstone). offset_store_scan fills
 * *entries (malloc'd array of malloc'd strings, keys in first-seen order;
 * free with offset_entries_free) and *n. offset_store_put writes value_json
 * (NULL deletes the key: a tombstone in Kafka, the member removed from the
 * file) under key as given, with no check at all: the caller chose it.
 * Errors as load and save.
 */
struct offset_entry {
    char *key;
    char *value_json;
};
bool offset_store_scan(struct offset_store *store, struct offset_entry **entries, size_t *n,
                       struct mcdc_error *err);
void offset_entries_free(struct offset_entry *entries, size_t n);
bool offset_store_put(struct offset_store *store, const char *key, const char *value_json,
                      struct mcdc_error *err);

/* Deletes the entry of rs (NULL: {server_id}) under [name, partition]: an
 * operator's reset. Same as offset_store_put(key, NULL). */
bool offset_store_remove(struct offset_store *store, const char *rs, struct mcdc_error *err);

#endif
