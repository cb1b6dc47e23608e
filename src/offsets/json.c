/*
 * offsets/json: the small JSON writer behind the offset
 * values (debezium-format.md §4.2) and the Kafka Connect partition keys
 * (§4.1). Parsing goes through libbson (bson_new_from_json), which takes any
 * JSON spacing, so values written by other versions or other writers read the
 * same; writing is ours so the bytes are compact and predictable (libbson
 * pads with spaces, and its padding changed between versions).
 *
 * Thread: any.
 */
#include "offsets/offsets_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/xalloc.h"
#include "encode/ejson.h"

void jbuf_init(struct jbuf *b)
{
    b->cap = 64;
    b->len = 0;
    b->data = xmalloc(b->cap);
    b->data[0] = '\0';
}

void jbuf_free(struct jbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static void reserve(struct jbuf *b, size_t n)
{
    if (b->len + n + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (b->len + n + 1 > cap)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void jbuf_putn(struct jbuf *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void jbuf_puts(struct jbuf *b, const char *s)
{
    jbuf_putn(b, s, strlen(s));
}

void jbuf_putc(struct jbuf *b, char c)
{
    jbuf_putn(b, &c, 1);
}

void jbuf_i64(struct jbuf *b, int64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRId64, v);
    jbuf_putn(b, tmp, (size_t)n);
}

/* Jackson's escaping (Kafka Connect's JsonConverter writes the offsets):
 * encode's writer of that dialect. */
void jbuf_str(struct jbuf *b, const char *s, size_t n)
{
    struct ejson_buf tmp = {0};
    json_append_string(&tmp, s, n);
    jbuf_putn(b, tmp.data, tmp.len);
    ejson_buf_free(&tmp);
}

static void put_container(struct jbuf *b, const bson_iter_t *iter, bool array)
{
    bson_iter_t child;
    jbuf_putc(b, array ? '[' : '{');
    if (bson_iter_recurse(iter, &child)) {
        bool first = true;
        while (bson_iter_next(&child)) {
            if (!first)
                jbuf_putc(b, ',');
            first = false;
            if (!array) {
                jbuf_str(b, bson_iter_key(&child), bson_iter_key_len(&child));
                jbuf_putc(b, ':');
            }
            jbuf_bson_value(b, &child);
        }
    }
    jbuf_putc(b, array ? ']' : '}');
}

void jbuf_bson_value(struct jbuf *b, const bson_iter_t *iter)
{
    switch (bson_iter_type(iter)) {
    case BSON_TYPE_UTF8: {
        uint32_t n = 0;
        const char *s = bson_iter_utf8(iter, &n);
        jbuf_str(b, s, n);
        break;
    }
    case BSON_TYPE_INT32:
        jbuf_i64(b, bson_iter_int32(iter));
        break;
    case BSON_TYPE_INT64:
        jbuf_i64(b, bson_iter_int64(iter));
        break;
    case BSON_TYPE_BOOL:
        jbuf_puts(b, bson_iter_bool(iter) ? "true" : "false");
        break;
    case BSON_TYPE_NULL:
        jbuf_puts(b, "null");
        break;
    case BSON_TYPE_DOUBLE: {
        char tmp[40];
        snprintf(tmp, sizeof tmp, "%.17g", bson_iter_double(iter));
        jbuf_puts(b, tmp);
        break;
    }
    case BSON_TYPE_DOCUMENT:
        put_container(b, iter, false);
        break;
    case BSON_TYPE_ARRAY:
        put_container(b, iter, true);
        break;
    default: {
        /* Not produced by a JSON parse; kept readable rather than dropped,
         * as canonical extended JSON from the project's writer (bytes that
         * do not depend on the libbson version, and that parse back to the
         * same type). */
        struct ejson_buf e = {0};
        ejson_write_value(&e, iter, EJSON_CANONICAL, EJSON_SEP_DEFAULT);
        jbuf_putn(b, e.data, e.len);
        ejson_buf_free(&e);
    }
    }
}

void jbuf_bson_members(struct jbuf *b, const bson_t *doc, bool *first)
{
    bson_iter_t iter;
    if (!bson_iter_init(&iter, doc))
        return;
    while (bson_iter_next(&iter)) {
        if (!*first)
            jbuf_putc(b, ',');
        *first = false;
        jbuf_str(b, bson_iter_key(&iter), bson_iter_key_len(&iter));
        jbuf_putc(b, ':');
        jbuf_bson_value(b, &iter);
    }
}

char *jbuf_steal(struct jbuf *b)
{
    char *s = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

char *offsets_partition_key(const char *name, const char *server_id, const char *rs)
{
    struct jbuf b;
    jbuf_init(&b);
    jbuf_putc(&b, '[');
    jbuf_str(&b, name, strlen(name));
    if (rs != NULL) {
        jbuf_puts(&b, ",{\"rs\":");
        jbuf_str(&b, rs, strlen(rs));
        jbuf_puts(&b, ",\"server_id\":");
    } else {
        jbuf_puts(&b, ",{\"server_id\":");
    }
    jbuf_str(&b, server_id, strlen(server_id));
    jbuf_puts(&b, "}]");
    return jbuf_steal(&b);
}

bool offsets_parse_key(const char *key, char **name, char **server_id, char **rs)
{
    /* Wrapped in an object: the JSON reader wants a document at the top. */
    size_t n = strlen(key);
    char *wrapped = xmalloc(n + 8);
    bson_iter_t it, arr, map;
    bool ok = false;
    memcpy(wrapped, "{\"k\":", 5);
    memcpy(wrapped + 5, key, n);
    memcpy(wrapped + 5 + n, "}", 2);
    bson_t *doc = key[0] == '[' ? bson_new_from_json((const uint8_t *)wrapped, -1, NULL) : NULL;
    free(wrapped);
    *name = *server_id = *rs = NULL;
    if (doc == NULL)
        return false;
    if (bson_iter_init_find(&it, doc, "k") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &arr) && bson_iter_next(&arr) && BSON_ITER_HOLDS_UTF8(&arr)) {
        const char *nm = bson_iter_utf8(&arr, NULL);
        if (bson_iter_next(&arr) && BSON_ITER_HOLDS_DOCUMENT(&arr) &&
            bson_iter_recurse(&arr, &map)) {
            bson_iter_t m2 = map;
            if (bson_iter_find(&map, "server_id") && BSON_ITER_HOLDS_UTF8(&map)) {
                *name = xstrdup(nm);
                *server_id = xstrdup(bson_iter_utf8(&map, NULL));
                if (bson_iter_find(&m2, "rs") && BSON_ITER_HOLDS_UTF8(&m2))
                    *rs = xstrdup(bson_iter_utf8(&m2, NULL));
                ok = true;
            }
        }
    }
    bson_destroy(doc);
    return ok;
}
