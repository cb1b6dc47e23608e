/*
 * encode/ejson_internal: what the extended-JSON writer's files share
 * (ejson.c: one value per BSON type; ejson_doc.c: documents and arrays;
 * ejson_names.c: repeated member names; jstring.c: string escaping). Not
 * part of the module's interface.
 */
#ifndef MCDC_ENCODE_EJSON_INTERNAL_H
#define MCDC_ENCODE_EJSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "encode/ejson.h"

static inline void reserve(struct ejson_buf *buf, size_t n)
{
    if (buf->cap - buf->len <= n) {
        ejson_buf_grow(buf, n);
    }
}

/* Appends n bytes; inlined so that literals become a few stores. */
static inline void put(struct ejson_buf *buf, const char *s, size_t n)
{
    reserve(buf, n);
    memcpy(buf->data + buf->len, s, n);
    buf->len += n;
}

/* Appends a literal (sizeof - 1 bytes). */
#define PUT_LIT(buf, lit) put((buf), (lit), sizeof(lit) - 1)

#define EJSON_ONES UINT64_C(0x0101010101010101)
#define EJSON_HIGHS UINT64_C(0x8080808080808080)

/* Non-zero if some byte of x is zero; the lowest set bit marks the first
 * zero byte exactly (the classic SWAR test). */
static inline uint64_t has_zero_byte(uint64_t x)
{
    return (x - EJSON_ONES) & ~x & EJSON_HIGHS;
}

/* True if all eight bytes of w are ASCII that Java writes unescaped in a
 * string: 0x20..0x7e except '"' and '\\' (jstring.c). */
static inline bool plain_ascii8(uint64_t w)
{
    uint64_t ctl = (w - EJSON_ONES * 0x20) & ~w & EJSON_HIGHS; /* some byte < 0x20 */
    uint64_t high = (w | (w + EJSON_ONES)) & EJSON_HIGHS;      /* some byte >= 0x7f */
    uint64_t quote = has_zero_byte(w ^ (EJSON_ONES * '"'));
    uint64_t bslash = has_zero_byte(w ^ (EJSON_ONES * '\\'));
    return (ctl | high | quote | bslash) == 0;
}

static inline void put_sep(struct ejson_buf *buf, enum ejson_separators sep)
{
    if (sep == EJSON_SEP_COMPACT) {
        PUT_LIT(buf, ",");
    } else {
        PUT_LIT(buf, ", ");
    }
}

/*
 * Writes the members of the (sub-)document or array at data (len bytes,
 * borrowed) as `{...}` or `[...]`, in mode with sep between members; a
 * malformed sub-document is written empty. Defined in ejson_doc.c.
 */
void ejson_write_members(struct ejson_buf *buf, const uint8_t *data, uint32_t len, bool array,
                         enum ejson_mode mode, enum ejson_separators sep);

#endif
