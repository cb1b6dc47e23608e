/*
 * snapshot/keyrange: `_id` key ranges by BSON type bracket, so that a chunked
 * read of a collection in `_id` order covers every document whatever the
 * types of its keys (debezium-format.md §5.4; issue 9).
 *
 * Why brackets: MongoDB's query operators $gt/$gte/$lt/$lte compare only
 * within one type bracket ("type bracketing": {_id: {$gt: 5}} never matches a
 * string or an ObjectId), while sort({_id: 1}) orders across brackets in the
 * canonical order (MongoDB's "Comparison/Sort Order"): MinKey, Undefined,
 * Null, Numbers, Symbol/String, Object, Array, BinData, ObjectId, Boolean,
 * Date, Timestamp, Regular Expression, DBPointer, JavaScript, JavaScript with
 * scope, MaxKey. A reader that chunks with `$gt: lastKey` alone loses every
 * key outside lastKey's bracket (Debezium's failure on mixed collections).
 * Here a reader walks the brackets in order and chunks within each bracket
 * with a filter that also carries `$type`, so it matches exactly that bracket.
 *
 * NaN: MongoDB's matcher makes every comparison with NaN false except
 * $lte/$gte/$eq against NaN itself, although the index sorts NaN below every
 * other number. A number range `$gt: K, $lte: L` therefore never returns NaN,
 * and `$gt: NaN` returns nothing. NaN keys get a bracket of their own
 * (KEYRANGE_NAN, before KEYRANGE_NUMBER) read with `{_id: NaN}`; the number
 * bracket starts at `$gte: -Infinity`. A unique `_id` index holds at most one
 * NaN (double and decimal NaN are equal keys).
 *
 * Singleton brackets: every MinKey, Undefined, Null, NaN or MaxKey value
 * equals every other of its bracket, so a collection has at most one such
 * `_id`; these brackets are read whole (ranges are ignored for them).
 * Arrays and regexes cannot be an `_id` (the server refuses the insert) and
 * undefined is deprecated; their brackets are kept so that no type is left
 * out, at the cost of one empty indexed query each.
 *
 * Collation: filters and sorts both follow the collection's default
 * collation, so chunking stays consistent under a non-simple collation;
 * keyrange_compare() compares strings by bytes (the simple collation).
 *
 * Thread: every function is pure (no I/O, no shared state).
 */
#ifndef MCDC_SNAPSHOT_KEYRANGE_H
#define MCDC_SNAPSHOT_KEYRANGE_H

#include <stdbool.h>
#include <stdint.h>

#include <bson/bson.h>

#include "common/error.h"
#include "encode/ejson.h"

/* The brackets in MongoDB's sort order (enum order = sort order). */
enum keyrange_bracket {
    KEYRANGE_MINKEY = 0,
    KEYRANGE_UNDEFINED,
    KEYRANGE_NULL,
    KEYRANGE_NAN,    /* NaN of any numeric type (see the header comment) */
    KEYRANGE_NUMBER, /* int32, int64, double, decimal128, NaN excluded */
    KEYRANGE_STRING, /* string and symbol */
    KEYRANGE_OBJECT,
    KEYRANGE_ARRAY,
    KEYRANGE_BINARY, /* every subtype */
    KEYRANGE_OBJECTID,
    KEYRANGE_BOOL,
    KEYRANGE_DATE,
    KEYRANGE_TIMESTAMP,
    KEYRANGE_REGEX,
    KEYRANGE_DBPOINTER,
    KEYRANGE_CODE,
    KEYRANGE_CODEWSCOPE,
    KEYRANGE_MAXKEY,
    KEYRANGE_BRACKET_COUNT
};

/*
 * The bracket of a BSON value (a key or a bound). EOO (no value) counts as
 * KEYRANGE_UNDEFINED, as MongoDB ranks it.
 */
enum keyrange_bracket keyrange_bracket_of(const bson_value_t *v);

/* A short stable name of a bracket ("number", "string", ...), for logs and offsets. */
const char *keyrange_bracket_name(enum keyrange_bracket b);

/* The bracket named name (as keyrange_bracket_name gives); false if none. */
bool keyrange_bracket_from_name(const char *name, enum keyrange_bracket *out);

/*
 * True for the brackets whose values are all equal to each other (MinKey,
 * Undefined, Null, NaN, MaxKey): at most one `_id` each, read whole.
 */
bool keyrange_bracket_singleton(enum keyrange_bracket b);

/*
 * Appends to out the filter that matches exactly the documents whose `_id`
 * is in bracket b, greater than *after (NULL: from the start of b) and at
 * most *upto (NULL: to the end of b), ANDed with extra (borrowed; NULL or
 * empty: none) as {"$and": [range, extra]}. after/upto must be in bracket b
 * (else err, domain INTERNAL); both are ignored for singleton brackets.
 * The range is {_id: {$type: [...], $gt|$gte: ..., $lte: ...}}: $type names
 * the bracket's types (the four numeric types for numbers; string and symbol),
 * the comparison operators keep the _id index bounds tight. out must be
 * initialised and empty. Returns false with err on a bad bound.
 */
bool keyrange_filter(enum keyrange_bracket b, const bson_value_t *after, const bson_value_t *upto,
                     const bson_t *extra, bson_t *out, struct mcdc_error *err);

/*
 * Appends to out the filter for keys greater than *after (NULL: from the
 * lowest key, MinKey included) and at most *upto (NULL: to the highest,
 * MaxKey included), whatever their brackets: {"$or": [one keyrange_filter
 * range per bracket the span touches]}, ANDed with extra (borrowed; NULL or
 * empty: none) as {"$and": [span, extra]}. A span inside one bracket is that
 * bracket's range alone; an empty span (upto not above after) matches
 * nothing ({"_id": {"$in": []}}). The spans (-, p1], (p1, p2], ..., (pn, -)
 * of increasing keys p1 < ... < pn cover every key exactly once, as the
 * parallel initial snapshot uses them. out must be initialised and empty.
 * Returns false with err (domain INTERNAL) only on an internal error.
 */
bool keyrange_span_filter(const bson_value_t *after, const bson_value_t *upto, const bson_t *extra,
                          bson_t *out, struct mcdc_error *err);

/*
 * Appends to out the find options of the next chunk: {sort: {_id: 1},
 * limit: limit} and, when keys_only, projection {_id: 1}. limit > 0.
 * Used with keyrange_filter(b, lastKey, maxKey, extra): find(filter, opts).
 */
void keyrange_chunk_opts(int64_t limit, bool keys_only, bson_t *out);

/*
 * Appends to out the find options that read a bracket's maximum key:
 * {sort: {_id: -1}, projection: {_id: 1}, limit: 1}, used with
 * keyrange_filter(b, NULL, NULL, extra). An empty result means the bracket
 * has no document (matching extra).
 */
void keyrange_max_opts(bson_t *out);

/*
 * Compares two keys in MongoDB's BSON order: <0, 0, >0. Brackets first
 * (enum order); numbers by value across int32/int64/double/decimal128
 * (1 == 1.0 == NumberLong(1) == NumberDecimal("1.00"), -0.0 == 0), NaN below
 * every number and equal to NaN; strings and symbols by bytes; documents and
 * arrays element by element (element type bracket, then field name, then
 * value; the shorter one first when one is a prefix); binaries by length,
 * then subtype, then bytes; ObjectIds by bytes; timestamps by (t, i)
 * unsigned; dates signed; regexes by pattern then flags; DBPointers by
 * namespace length, namespace, then ObjectId; code with scope by code then
 * scope. Exact for everything except decimal128 against double: the double
 * is expanded to 80 significant decimal digits, so a double whose exact
 * expansion is longer and agrees with the decimal on those digits compares
 * as equal (no such double equals a 34-digit decimal; it does not happen for
 * practical keys). Decimal infinities are ordered as numbers.
 */
int keyrange_compare(const bson_value_t *a, const bson_value_t *b);

/*
 * The key as canonical extended JSON (MongoDB's Extended JSON v2 spec) of the
 * one-field document {"_id": v}, for offsets: portable, human readable, every
 * type kept. Written by the project's own writer (encode/ejson.h,
 * EJSON_CANONICAL, `"name": value` and `, ` between members), so the bytes do
 * not depend on the libbson version. Strings are written as the Java driver
 * writes them (invalid UTF-8 becomes U+FFFD). Returns a new string the caller
 * frees with free().
 */
char *keyrange_key_to_json(const bson_value_t *v);

/*
 * Appends to b (the caller's reusable buffer) the text keyrange_key_to_json
 * returns, without allocating a string: for the initial snapshot's progress,
 * written once per record (snapshot/progress.h).
 */
void keyrange_key_write(struct ejson_buf *b, const bson_value_t *v);

/*
 * Parses what keyrange_key_to_json wrote (any extended JSON of a document
 * with exactly one field is accepted) into *out, a deep copy the caller frees
 * with bson_value_destroy. Returns false with err (domain CONFIG) on bad JSON
 * or a document without exactly one field.
 */
bool keyrange_key_from_json(const char *json, bson_value_t *out, struct mcdc_error *err);

#endif
