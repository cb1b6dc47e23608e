/*
 * encode/ejson_buf: the growable output buffer of the extended-JSON writer.
 * Callers keep one per worker and reset it per event, so after warm-up the
 * writer appends into memory it already has (growth doubles the capacity).
 */
#include "encode/ejson.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

void ejson_buf_reset(struct ejson_buf *buf)
{
    buf->len = 0;
    buf->keys_top = 0;
}

void ejson_buf_free(struct ejson_buf *buf)
{
    free(buf->data);
    free(buf->keys);
    free(buf->shape);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
    buf->keys = NULL;
    buf->keys_cap = 0;
    buf->keys_top = 0;
    buf->shape = NULL;
    buf->shape_len = 0;
    buf->shape_cap = 0;
}

void ejson_buf_grow(struct ejson_buf *buf, size_t extra)
{
    size_t need = buf->len + extra + 1; /* room for a NUL at any time */
    size_t cap = buf->cap ? buf->cap : 256;
    while (cap < need) {
        cap *= 2;
    }
    buf->data = xrealloc(buf->data, cap);
    buf->cap = cap;
}

void ejson_buf_append(struct ejson_buf *buf, const char *s, size_t n)
{
    if (n == 0) {
        return; /* s may be NULL */
    }
    if (buf->cap - buf->len <= n) {
        ejson_buf_grow(buf, n);
    }
    memcpy(buf->data + buf->len, s, n);
    buf->len += n;
}

char *ejson_buf_steal(struct ejson_buf *buf, size_t *len)
{
    char *out = xmalloc(buf->len + 1);
    if (buf->len) {
        memcpy(out, buf->data, buf->len);
    }
    out[buf->len] = '\0';
    if (len) {
        *len = buf->len;
    }
    return out;
}
