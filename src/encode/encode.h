/*
 * encode: turns a change record into Kafka records (key, value, topic) in
 * Debezium's exact bytes (debezium-format.md §1-§3), with no I/O.
 *
 * This header is the contract other modules build on; the encoder owns the
 * extended-JSON writer (ejson.h), the envelope table per dialect, schemas,
 * topic names and the field filters.
 */
#ifndef MCDC_ENCODE_ENCODE_H
#define MCDC_ENCODE_ENCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"
#include "config/config.h"
#include "event/event.h"
#include "event/record.h" /* struct mcdc_record(s), the encoder's output */

struct encoder;

/*
 * Builds an encoder for cfg (borrowed; must outlive the encoder). Compiles the
 * filters (PCRE2). Returns NULL and fills err (domain CONFIG) on a bad regex.
 */
struct encoder *encoder_new(const struct mcdc_config *cfg, struct mcdc_error *err);

/* Frees the encoder; NULL is a no-op. */
void encoder_destroy(struct encoder *enc);

/*
 * True if the namespace db.coll is captured (debezium-format.md §7.2): the
 * signal collection always; otherwise never admin/config/local, and db must
 * pass database.include/exclude.list and "db.coll" collection.include/
 * exclude.list (anchored, case-insensitive regexes, or case-insensitive
 * literals with filters.match.mode literal). db and coll are NUL-terminated.
 */
bool encoder_captures(const struct encoder *enc, const char *db, const char *coll);

/*
 * Encodes ev into out (out->count records, caller owns key/value of each and
 * must release them with records_release() unless handed on). ts_us_now is the
 * connector wall clock in microseconds since the epoch, read once per event:
 * the envelope's top-level ts_ms is ts_us_now / 1000 (floored), and for 3.x
 * snapshot reads source.ts_ms / ts_us / ts_ns are that same instant at ms /
 * µs / µs×1000 precision (Debezium takes Instant.now() per snapshot record,
 * debezium-format.md §1.5; the Java clock has µs resolution on Linux). With
 * extended.headers.enabled the data record and its tombstone carry the four
 * __debezium.context.* headers (§1.7); transaction and heartbeat records carry
 * none. Records, in order: the END of the previous
 * transaction and the BEGIN of a new one (provide.transaction.metadata,
 * debezium-format.md §3.4), the data record on <prefix>.<db>.<coll>, and a
 * tombstone (same key, value NULL) after a delete when tombstones.on.delete
 * (§1.6); in oplog mode an event with oplog_txn_last set is followed by its
 * transaction's END, as Debezium 1.9 emits it right after the last operation
 * of an applyOps (§3.5). An event whose namespace is not captured (encoder_captures) or whose
 * operation is in skipped.operations yields no records and returns true.
 * The same field selection (field.exclude.list, field.renames, §7.2) applies
 * to snapshot reads and streamed events. Returns false and fills err (domain
 * ENCODE) if the event cannot be encoded: a field rename onto an existing
 * field fails the event as in Debezium (the message names the collection, the
 * document's _id and the field); out is then empty.
 */
bool encoder_encode(struct encoder *enc, const struct mcdc_event *ev, int64_t ts_us_now,
                    struct mcdc_records *out, struct mcdc_error *err);

/*
 * Sets the runId header value (debezium-format.md §1.7: Debezium 3.3+ draws a
 * random UUID each time a task starts). run_id is copied; it should be a
 * UUID's canonical 36-character text. encoder_new() already sets a fresh
 * UUID (version 7, RFC 9562 §5.7: the time in ms and getrandom() bits, as
 * Debezium 3.6 draws it), so a task that
 * builds a new encoder on each start gets a new runId; this setter exists for
 * tests and for callers that share one runId. No effect on records already
 * built.
 */
void encoder_set_run_id(struct encoder *enc, const char *run_id);

/* The current runId text (borrowed, valid until the next encoder_set_run_id
 * or encoder_destroy). */
const char *encoder_run_id(const struct encoder *enc);

/*
 * Builds one heartbeat record (debezium-format.md §1.9) into out: topic
 * <topic.heartbeat.prefix>.<topic.prefix>, key {"serverName": <topic.prefix>},
 * value {"ts_ms": ts_ms} (ts_ms in ms since the epoch), with Kafka Connect
 * schemas when enabled. out->count is 1; the caller owns key/value as for
 * encoder_encode. Never fails today (err kept for the contract).
 */
bool encoder_heartbeat(struct encoder *enc, int64_t ts_ms, struct mcdc_records *out,
                       struct mcdc_error *err);

/*
 * Eager transaction END (mongocdc option transaction.eager.end, off by
 * default; Debezium waits for the next emitted data event). The capture loop
 * calls this whenever the stream reaches a position that is not an emitted
 * data event (a filtered or non-data event, a post-batch resume token) with
 * that position's clusterTime (ts_sec, ts_inc). Every event of one MongoDB
 * transaction carries the commit's clusterTime, so a later position proves
 * the open transaction complete: its END record (ts_ms = ts_ms, ms) goes into
 * out and true is returned. Returns false with out empty when the option or
 * transaction metadata is off, no transaction is open, or the position is not
 * past it.
 */
bool encoder_transaction_passed(struct encoder *enc, uint32_t ts_sec, uint32_t ts_inc,
                                int64_t ts_ms, struct mcdc_records *out);

/*
 * Builds the server-side change-stream $match stage into stage_out (which
 * this function bson_init()s; the caller bson_destroy()s it):
 *   {$match: {$and: [{$or: [{$and: [<namespace conditions>]},
 *                           {"ns.db": <signal db>, "ns.coll": <signal coll>}]},
 *                    {operationType: {$in: [insert, update, replace, delete
 *                                            minus skipped.operations]}}]}}
 * Namespace conditions: "ns.db" $nin [admin, config, local]; literal mode:
 * "ns.db" $in/$nin and "ns" $in/$nin [{db, coll}] (case-sensitive, as
 * Debezium's pipeline); regex mode: "ns.db" against the anchored alternation
 * /^(?:(?:e1)|(?:e2))$/i (or $not of it) and, for collection lists, an $expr
 * $regexMatch on $concat("$ns.db", ".", "$ns.coll") (MongoDB 4.2+). Unlike
 * Debezium's (§7.2) the regexes are anchored, so the server sends exactly
 * what encoder_captures() keeps (up to Java/PCRE regex dialect differences).
 * Returns true; err is kept for the contract.
 */
bool encoder_build_stream_match(const struct encoder *enc, bson_t *stage_out,
                                struct mcdc_error *err);

/*
 * The oplog counterpart of encoder_build_stream_match for capture.mode oplog
 * (debezium-format.md §1.4, §7.2; mongo-sim-spec.md §5.1): fills query_out
 * (bson_init()ed here; the caller bson_destroy()s it) with conditions on
 * oplog entries, whose `ns` is the string "db.coll":
 *   {$or: [{op: {$in: [i, u, d minus skipped.operations c/u/d]},
 *           $and: [{ns: {$not: /^(?:admin|config|local)\./}},
 *                  <database list: ns /^(?:(?:p1)|(?:p2))\./i or its $not>,
 *                  <collection list: ns /^(?:(?:p1)|(?:p2))$/i or its $not>]},
 *          {ns: "<signal db>.<signal coll>"}]}
 * Literal mode (filters.match.mode literal) quotes the names and matches them
 * case-sensitively. The oplog reader adds ts, fromMigrate and the no-op and
 * applyOps branches; operations inside applyOps are checked client-side
 * (encoder_captures). Returns true; err is kept for the contract.
 */
bool encoder_build_oplog_query(const struct encoder *enc, bson_t *query_out,
                               struct mcdc_error *err);

/* Topic names (debezium-format.md §3.1-3.2), borrowed from the encoder and
 * valid until encoder_destroy(): the data topic of db.coll (sanitised,
 * cached), the transaction topic and the heartbeat topic. */
const char *encoder_topic(struct encoder *enc, const char *db, const char *coll);
const char *encoder_transaction_topic(const struct encoder *enc);
const char *encoder_heartbeat_topic(const struct encoder *enc);

/*
 * `mongocdc encode ...` subcommand (debezium-format.md §2): reads documents
 * from stdin and prints their extended JSON. argv[0] is "encode". Returns the
 * process exit code.
 */
int encode_cli_main(int argc, char **argv);

#endif
