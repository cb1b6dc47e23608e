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
    EJSON_MODE_COUNT
};

enum ejson_separators {
    EJSON_SEP_COMPACT = 0, /* `"k": v` and `,` between members (Debezium's documents) */
    EJSON_SEP_DEFAULT,     /* `"k": v` and `, ` between members (non-indented default) */
    EJSON_SEP_COUNT
};

/* A growable output buffer. Zero-initialise, reuse, free with ejson_buf_free. */
struct ejson_buf {
    char *data;
    size_t len;
    size_t cap;
};

void ejson_buf_reset(struct ejson_buf *buf);          /* len = 0, keeps memory */
void ejson_buf_free(struct ejson_buf *buf);           /* frees memory */
void ejson_buf_append(struct ejson_buf *buf, const char *s, size_t n);
/* Ensures room for extra more bytes plus a NUL (capacity doubles, starting at
 * 256). Aborts on out-of-memory (xalloc). */
void ejson_buf_grow(struct ejson_buf *buf, size_t extra);
/* Returns the buffer's bytes as a new malloc'd NUL-terminated string (len in *len). */
char *ejson_buf_steal(struct ejson_buf *buf, size_t *len);

/* Appends s (n bytes of UTF-8) as a JSON string with quotes, escaped as Java's
 * writer escapes (debezium-format.md §2.2). Invalid UTF-8 becomes U+FFFD and
 * is counted in ejson_invalid_utf8_count(). */
void ejson_write_string(struct ejson_buf *buf, const char *s, size_t n);

/* Appends the whole document doc. */
void ejson_write_document(struct ejson_buf *buf, const bson_t *doc, enum ejson_mode mode,
                          enum ejson_separators sep);

/* Appends the value at iter (any BSON type), as the Java writer renders a
 * value inside a document (the key text uses this for _id). */
void ejson_write_value(struct ejson_buf *buf, const bson_iter_t *iter, enum ejson_mode mode,
                       enum ejson_separators sep);

/* Total invalid UTF-8 sequences replaced since start (all threads). */
uint64_t ejson_invalid_utf8_count(void);

#endif
