/*
 * encode/ejson_names_internal: the repeated-member-name table of the
 * extended-JSON writer (ejson_names.c), shared with the member loop
 * (ejson_doc.c). Not part of the module's interface.
 *
 * Debezium's documents are maps (BsonDocument, Document): a name repeated in
 * one BSON document is printed once, at its first position, with its last
 * value. Names are equal when Java decodes them to the same string. While
 * the member loop writes a document, a hash table of its names (in
 * buf->keys, one region per nesting level, stacked) detects a repeat; the
 * document is then rewound and written again by names_write_collapsed. An
 * entry is (hash high 32 bits) << 32 | EMITTED flag | offset of the element
 * in the document (never 0: the length prefix comes first).
 */
#ifndef MCDC_ENCODE_EJSON_NAMES_INTERNAL_H
#define MCDC_ENCODE_EJSON_NAMES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encode/ejson.h"

#define NAME_HASH_K1 UINT64_C(0x9e3779b97f4a7c15)
#define NAME_HASH_K2 UINT64_C(0xff51afd7ed558ccd)

/* The names table of one document: size entries at buf->keys + base. */
struct names {
    size_t base;
    size_t size;
    size_t count;
};

/* Opens a table on top of buf->keys for a document of len bytes (its
 * members' names are added with names_add / names_add_ascii); close it with
 * names_close once the document is written. Aborts on out-of-memory. */
void names_open(struct ejson_buf *buf, struct names *t, uint32_t len);

/* Releases t's region of buf->keys (tables close in reverse order). */
static inline void names_close(struct ejson_buf *buf, const struct names *t)
{
    buf->keys_top = t->base;
}

/*
 * Adds the member named k (n bytes, inside the document data of len bytes;
 * the name's type byte is at k - 1). Returns false if the name, as Java
 * decodes it, was seen before in this document (the entry then points at
 * this later element). Any name; aborts on out-of-memory.
 */
bool names_add(struct ejson_buf *buf, struct names *t, const uint8_t *data, uint32_t len,
               const char *k, size_t n);

/*
 * The hash of a name of n < 16 bytes given as two little-endian words w0
 * (bytes 0..7) and w1 (bytes 8..15), each with the bytes past n zeroed: the
 * value names_add computes for the same bytes (ejson_names.c: name_hash).
 */
static inline uint64_t name_hash16(uint64_t w0, uint64_t w1, size_t n)
{
    uint64_t h = ((uint64_t)n * NAME_HASH_K1 ^ w0) * NAME_HASH_K2;
    if (n > 8) {
        h = (h ^ w1) * NAME_HASH_K2;
    }
    return h ^ (h >> 29);
}

/*
 * names_add for an ASCII name of n < 16 bytes (no byte >= 0x80, so Java's
 * string has the same bytes) whose hash h is name_hash16's. Probes inline;
 * a full table or an entry with the same hash tag goes through names_add.
 */
static inline bool names_add_ascii(struct ejson_buf *buf, struct names *t, const uint8_t *data,
                                   uint32_t len, const char *k, size_t n, uint64_t h)
{
    if ((t->count + 1) * 2 > t->size) {
        return names_add(buf, t, data, len, k, n);
    }
    uint64_t *slots = buf->keys + t->base;
    size_t mask = t->size - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        uint64_t e = slots[i];
        if (e == 0) {
            slots[i] = (h & ~UINT64_C(0xffffffff)) | (uint64_t)((const uint8_t *)k - 1 - data);
            t->count++;
            return true;
        }
        if ((e >> 32) == (h >> 32)) {
            return names_add(buf, t, data, len, k, n); /* same tag: compare the names */
        }
    }
}

/*
 * Writes the document data (len bytes) that repeats a name: each name once,
 * at its first position, with its last value. t holds every name with the
 * offset of its last element (the member loop ran to the end).
 */
void names_write_collapsed(struct ejson_buf *buf, struct names *t, const uint8_t *data,
                           uint32_t len, enum ejson_mode mode, enum ejson_separators sep);

#endif
