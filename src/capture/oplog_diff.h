/*
 * oplog_diff: the MongoDB 5.0+ `$v: 2` update diff of an oplog entry turned
 * into the `$v: 1` modifier form ({$set: {<dotted path>: value},
 * $unset: {<dotted path>: true}}) that Debezium 1.9 oplog consumers parse
 * in `patch` (debezium-format.md §1.4). Debezium 1.9 refuses MongoDB 5.0+ in
 * oplog mode (DBZ-4415); mongocdc decodes instead.
 *
 * The diff format is the server's (src/mongo/db/update/
 * document_diff_serialization.h, mongo-sim-spec.md §3.7): an object diff has
 * `d` {field: false} (removed), `u` {field: value} (changed), `i` {field:
 * value} (added) and `s<field>` (a sub-diff of that field); an array diff has
 * `a: true`, optional `l: <new length>` (truncation), `u<n>` (element n set)
 * and `s<n>` (sub-diff of element n).
 *
 * An array truncation (`l: n`) has no $set/$unset form without the whole new
 * array, which the diff does not carry; Debezium defines no output for it
 * (1.9 refuses 5.0+). It becomes {$push: {<path>: {$each: [], $slice: n}}},
 * the modifier that keeps the first n elements: a MongoDB update that a
 * consumer applying `patch` (e.g. the MongoDB sink's Debezium oplog handler)
 * can run as is, unless the same diff also sets elements of that array (then
 * $set and $push name one path, which one MongoDB update refuses as a
 * conflict; applied in order $set, $unset, $push it gives the post-image).
 *
 * Thread: pure functions.
 */
#ifndef MCDC_CAPTURE_OPLOG_DIFF_H
#define MCDC_CAPTURE_OPLOG_DIFF_H

#include <stdbool.h>

#include <bson/bson.h>

#include "common/error.h"

enum oplog_diff_result {
    OPLOG_DIFF_DECODED = 0, /* *out holds the $v: 1 form */
    OPLOG_DIFF_NOT_V2,      /* o is not a $v: 2 diff (a $v: 1 update or a replacement) */
    OPLOG_DIFF_MALFORMED,     /* err says what is wrong */
};

/*
 * Decodes the update `o` of an oplog `u` entry. On OPLOG_DIFF_DECODED, out
 * (uninitialised on entry) is bson_init()ed and filled with
 * {"$v": 1, "$set": {...}, "$unset": {...}, "$push": {...}} in the diff's
 * order (each operator left out when empty; `$push` holds only truncations);
 * the caller bson_destroy()s it. Element
 * changes become element paths ("items.2", "items.0.qty"); nested object
 * changes become dotted paths ("addr.zip"). For every other result out is
 * untouched; OPLOG_DIFF_MALFORMED fills err (domain ENCODE) naming the bad
 * member.
 */
enum oplog_diff_result oplog_diff_to_v1(const bson_t *o, bson_t *out, struct mcdc_error *err);

#endif
