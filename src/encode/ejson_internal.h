/*
 * encode/ejson_internal: what the extended-JSON writer's two files share
 * (ejson.c: one value per BSON type; ejson_doc.c: documents, arrays and
 * repeated member names). Not part of the module's interface.
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
