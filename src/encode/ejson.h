/*
 * encode/ejson: MongoDB Extended JSON writer that produces the exact bytes of
 * the MongoDB Java driver's org.bson.json.JsonWriter as Debezium configures it
 * (debezium-format.md §2). Walks BSON with bson_iter_t; never uses libbson's
 * bson_as_*_extended_json (different bytes, slower).
 *
 * Output goes into a growable buffer the caller reuses across events, so the
 * steady state allocates nothing.
 */
#ifndef MCDC_ENCODE_EJSON_H
#define MCDC_ENCODE_EJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <bson/bson.h>

enum ejson_mode {
    EJSON_STRICT = 0, /* JsonMode.STRICT: $numberLong, $date as $numberLong, ... */
    EJSON_RELAXED,    /* JsonMode.RELAXED */
    /* JsonMode.EXTENDED: canonical Extended JSON v2 (MongoDB's "Extended JSON
     * (v2)" specification), every number typed ($numberInt, $numberLong,
     * $numberDouble), $date as {"$numberLong": ...}, $dbPointer. Not a
     * Debezium output: the project's own stored values (key-range bounds in
     * offsets), which must parse back to the same BSON types with
     * bson_init_from_json and read the same whichever libbson wrote them. */
    EJSON_CANONICAL,
    EJSON_MODE_COUNT
};

enum ejson_separators {
    EJSON_SEP_COMPACT = 0, /* `"k": v` and `,` between members (Debezium's documents) */
    EJSON_SEP_DEFAULT,     /* `"k": v` and `, ` between members (non-indented default) */
    EJSON_SEP_COUNT
};

/* A growable output buffer. Zero-initialise, reuse, free with ejson_buf_free.
 * Not shared between threads (one per worker). keys is the writer's scratch
 * space (hash tables of member names, to find repeated names: see
 * ejson_write_document); like data it grows with the largest document
 * written and is kept across events, so the steady state allocates nothing. */
struct ejson_buf {
    char *data;
    size_t len;
    size_t cap;
    uint64_t *keys;
    size_t keys_cap; /* entries */
    size_t keys_top; /* entries in use by the documents being written */
    /* The member names of the last top-level document written, when they
     * were distinct, short and needed no escape (two words per name): a
     * document whose names match them skips the hash table and the escape
     * check. Kept across events like keys. */
    uint64_t *shape;
    size_t shape_len; /* names */
    size_t shape_cap; /* names */
};

/* Empties buf (len = 0), keeping its memory. */
void ejson_buf_reset(struct ejson_buf *buf);
/* Frees buf's memory and zeroes it; buf itself is the caller's. */
void ejson_buf_free(struct ejson_buf *buf);
/* Appends n bytes of s (copied; s may be NULL when n is 0). Aborts on
 * out-of-memory (xalloc). */
void ejson_buf_append(struct ejson_buf *buf, const char *s, size_t n);
/* Ensures room for extra more bytes plus a NUL (capacity doubles, starting at
 * 256). Aborts on out-of-memory (xalloc). */
void ejson_buf_grow(struct ejson_buf *buf, size_t extra);
/* Returns a copy of the buffer's bytes as a new malloc'd, NUL-terminated
 * string that the caller frees with free(); *len (if not NULL) gets the
 * length without the NUL. buf is unchanged and stays reusable. */
char *ejson_buf_steal(struct ejson_buf *buf, size_t *len);

/* Appends s (n bytes of UTF-8, borrowed, may contain NUL) as a JSON string
 * with quotes, escaped as the Java driver's writer escapes (debezium-format.md
 * §2.2; character classes of Java 17, see jstring.c). Never fails: invalid
 * UTF-8 decodes as JDK 17's String does (one U+FFFD per malformed sequence)
 * and each replacement is counted in ejson_invalid_utf8_count(). */
void ejson_write_string(struct ejson_buf *buf, const char *s, size_t n);

/* Appends s[0..n) (borrowed; bytes passed through, n without a NUL) as a
 * JSON string the way Jackson, in Kafka Connect's JsonConverter, writes a
 * Connect string: quotes, \" and \\, short escapes for \b \f \n \r \t,
 * \u00XX (uppercase hex) for the other controls, every other byte raw. The
 * envelope's own string fields and Debezium's notification records are
 * written this way; document text inside them uses ejson_write_string. */
void json_append_string(struct ejson_buf *out, const char *s, size_t n);

/* Same as ejson_write_string, for a string inside a larger buffer: readable
 * is the number of bytes that may be read from s (>= n; for example up to
 * the end of the enclosing BSON document), which lets short strings be
 * checked and copied eight bytes at a time. */
void ejson_write_string_bounded(struct ejson_buf *buf, const char *s, size_t n, size_t readable);

/* Appends the whole document doc (borrowed) in mode with sep, exactly as
 * Debezium's settings make the Java driver print it (debezium-format.md
 * §2.1-§2.3). Never fails: a malformed sub-document prints as {} or [] and
 * the walk stops where libbson's iterator stops.
 *
 * Repeated field names: Debezium holds documents as org.bson BsonDocument
 * (or Document in 1.9), which are maps, so a name that occurs twice in one
 * BSON (sub-)document is printed once, at its first position, with the value
 * of its last occurrence. The writer does the same at every level (arrays
 * have no names; a code-with-scope's scope is a document). */
void ejson_write_document(struct ejson_buf *buf, const bson_t *doc, enum ejson_mode mode,
                          enum ejson_separators sep);

/* Appends the value iter is positioned on (any BSON type; iter borrowed and
 * not advanced), as the Java writer renders a value inside a document
 * (§2.3). For the envelope's own fields (lsid, updatedFields values). */
void ejson_write_value(struct ejson_buf *buf, const bson_iter_t *iter, enum ejson_mode mode,
                       enum ejson_separators sep);

/* Appends the key text of doc (debezium-format.md §1.1): the RELAXED compact
 * rendering of its _id value, i.e. what Debezium's `{"_": <_id>}` trick leaves
 * after cutting `{"_": ` and the final `}` (the last _id if the name repeats,
 * as a map lookup finds it). Returns false (nothing appended) when doc has no
 * _id. */
bool ejson_write_key(struct ejson_buf *buf, const bson_t *doc);

/* Java's Double.toString(v) into out (at least 32 bytes, not NUL-terminated);
 * returns the length. NaN/Infinity/-Infinity spelled as Java does. The digits
 * are JDK 17's, which are not always the shortest (JDK-4511638; jdouble.c). */
size_t ejson_java_double(double v, char *out);

/* Decimal128.toString() of the Java driver (IEEE 754-2008 string form, with
 * non-canonical coefficients printed in full as the driver does) into out (at
 * least 48 bytes, not NUL-terminated); returns the length. */
size_t ejson_decimal128_string(const bson_decimal128_t *dec, char *out);

/* True if Java's writer emits the UTF-16 code unit raw (no \u escape) in a
 * JSON string; false for `"` `\` and characters escaped by category
 * (debezium-format.md §2.2). Thread-safe. */
bool ejson_java_char_is_raw(uint32_t unit);

/* True if s (n bytes) is UTF-8 that JDK 17's String(bytes, UTF_8) decodes
 * without a replacement (no overlong forms, surrogates or truncation). */
bool ejson_utf8_valid_java(const char *s, size_t n);

/* The string JDK 17 decodes from s (n bytes), encoded back as UTF-8 into out
 * (at least 3 * n bytes): s itself when valid, otherwise each malformed
 * sequence becomes U+FFFD (EF BF BD). Returns the length. Not counted in
 * ejson_invalid_utf8_count(). Used to compare member names as Java does. */
size_t ejson_java_utf8(const char *s, size_t n, char *out);

/* Total invalid UTF-8 sequences replaced by U+FFFD since the process
 * started, all threads (a relaxed atomic counter; for metrics and logs). */
uint64_t ejson_invalid_utf8_count(void);

#endif
