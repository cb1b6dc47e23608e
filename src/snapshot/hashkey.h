/*
 * snapshot/hashkey: MongoDB's hashed shard key values, and the client-side
 * ownership filter of a hashed-sharded collection's snapshot (issue 8).
 *
 * A hashed shard key {f: "hashed"} places a document by the 64-bit hash of
 * f's value, so the chunk bounds of such a collection (config.chunks min/max)
 * are NumberLong hash values, MinKey and MaxKey. The hash is MongoDB's
 * BSONElementHasher::hash64 with seed 0: the first 8 bytes, little-endian, of
 * MD5 over the seed (int32 LE), then the element's canonical type (int32 LE)
 * and its value: numbers (int32, int64, double, decimal) as one int64 LE
 * (doubles truncated toward zero, decimals rounded half to even, NaN as 0,
 * out of range clamped to the int64 limits, a double of exactly 2^63 as
 * INT64_MIN: BSONElement::safeNumberLongForHash) so that equal values of
 * different numeric types hash alike;
 * documents and arrays as each element's canonical type, field name with its
 * NUL and value, then an end marker (type 0, no name); code with scope as the
 * code's C string then its scope; every other type as its raw BSON value
 * bytes. Canonical types: MinKey -1, undefined 0, null 5, numbers 10, string
 * and symbol 15, object 20, array 25, binary 30, ObjectId 35, bool 40, date
 * and timestamp 45, regex 50, DBPointer 55, code 60, code with scope 65,
 * MaxKey 127. Verified against the expected values of MongoDB's
 * hasher_test.cpp (tests/unit/test_hashkey.c).
 *
 * Why client-side: a find cannot compare a document's hashed key with a
 * range (the hash exists only in the hashed index; $toHashedIndexKey is 7.0+
 * only), and reading through mongos instead would funnel every shard's
 * snapshot through one router and lose the per-shard start positions
 * (topology/chunks.h). So a shard reads all its documents of the collection
 * and drops those whose key hashes outside the chunks it owns (orphans).
 *
 * Thread: every function is pure (no I/O, no shared state).
 */
#ifndef MCDC_SNAPSHOT_HASHKEY_H
#define MCDC_SNAPSHOT_HASHKEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

/* BSONElementHasher::hash64 of the element under it (any BSON type), with
 * seed (0 for shard keys and hashed indexes). */
int64_t hashkey_hash64(const bson_iter_t *it, int32_t seed);

/* True when a shard key pattern (config.collections `key`) has a field whose
 * value is the string "hashed". */
bool hashkey_pattern_hashed(const bson_t *pattern);

/*
 * Appends to out the ownership filter of a hashed-sharded collection: the n
 * half-open ranges [mins[i], maxs[i]) (config.chunks bounds, fields in
 * pattern order) as {"$hashedShardKey": {"key": pattern, "ranges":
 * [{"min": .., "max": ..}, ...]}}. Not a query: the server would refuse it;
 * readers test it with hashkey_is_filter and apply it with hashkey_owns.
 */
void hashkey_filter(const bson_t *pattern, const bson_t *const *mins, const bson_t *const *maxs,
                    size_t n, bson_t *out);

/* True when f is a filter built by hashkey_filter. */
bool hashkey_is_filter(const bson_t *f);

/*
 * True when doc's shard key (pattern fields in order, dotted paths followed;
 * a missing field counts as null; hashed fields replaced by their hash64 as
 * NumberLong) lies in one of f's ranges (BSON order: keyrange_compare).
 * False for a malformed f.
 */
bool hashkey_owns(const bson_t *f, const bson_t *doc);

#endif
