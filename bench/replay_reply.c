/*
 * replay_reply.c: the replay server's reply building blocks (a benchmark
 * tool): the hello of a replica-set primary or a mongos, $clusterTime, the
 * cursor table, and the batches of change events and snapshot documents
 * copied from the templates (replay_data.c) and patched in place, so that
 * every resume token and clusterTime is unique and increasing over the run
 * and every snapshot _id unique in its collection.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay_server.h"

static void token_hex(char *out, size_t cap, uint64_t n)
{
    snprintf(out, cap, "82%08X%08X%s", G.t0, (uint32_t)n, REPLAY_TOKEN_TAIL);
}

void append_ts(bson_t *b, const char *k, uint64_t n)
{
    bson_append_timestamp(b, k, -1, G.t0, (uint32_t)n);
}

void append_cluster_time(bson_t *r, struct server *s)
{
    bson_t ct, sig;
    uint8_t zero[20] = {0};
    uint64_t n;

    pthread_mutex_lock(&s->mu);
    n = s->served;
    pthread_mutex_unlock(&s->mu);
    bson_append_document_begin(r, "$clusterTime", 12, &ct);
    append_ts(&ct, "clusterTime", n);
    bson_append_document_begin(&ct, "signature", 9, &sig);
    bson_append_binary(&sig, "hash", 4, BSON_SUBTYPE_BINARY, zero, 20);
    BSON_APPEND_INT64(&sig, "keyId", 0);
    bson_append_document_end(&ct, &sig);
    bson_append_document_end(r, &ct);
    append_ts(r, "operationTime", n);
}

void hello_reply(struct conn *c, const bson_t *cmd, bson_t *r, bool legacy)
{
    struct server *s = c->s;
    bson_t sub, sub2, arr;
    bson_oid_t pid, eid;
    char host[64];
    uint64_t n;
    bson_iter_t it;

    bson_oid_init_from_string(&pid, "6b12be2ff4c7158c52ab1434");
    bson_oid_init_from_string(&eid, "7fffffff0000000000000001");
    snprintf(host, sizeof host, "127.0.0.1:%d", s->port);
    if (bson_iter_init_find(&it, cmd, "helloOk"))
        BSON_APPEND_BOOL(r, "helloOk", true);
    bson_append_document_begin(r, "topologyVersion", 15, &sub);
    BSON_APPEND_OID(&sub, "processId", &pid);
    BSON_APPEND_INT64(&sub, "counter", 0);
    bson_append_document_end(r, &sub);
    BSON_APPEND_BOOL(r, legacy ? "ismaster" : "isWritablePrimary", true);
    if (s->mongos) {
        BSON_APPEND_UTF8(r, "msg", "isdbgrid");
    } else {
        bson_append_array_begin(r, "hosts", 5, &arr);
        BSON_APPEND_UTF8(&arr, "0", host);
        bson_append_array_end(r, &arr);
        BSON_APPEND_UTF8(r, "setName", s->set_name);
        BSON_APPEND_INT32(r, "setVersion", 1);
        BSON_APPEND_BOOL(r, "secondary", false);
        BSON_APPEND_UTF8(r, "primary", host);
        BSON_APPEND_UTF8(r, "me", host);
        BSON_APPEND_OID(r, "electionId", &eid);
        pthread_mutex_lock(&s->mu);
        n = s->served;
        pthread_mutex_unlock(&s->mu);
        bson_append_document_begin(r, "lastWrite", 9, &sub);
        bson_append_document_begin(&sub, "opTime", 6, &sub2);
        append_ts(&sub2, "ts", n);
        BSON_APPEND_INT64(&sub2, "t", 1);
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DATE_TIME(&sub, "lastWriteDate", (int64_t)G.t0 * 1000);
        bson_append_document_begin(&sub, "majorityOpTime", 14, &sub2);
        append_ts(&sub2, "ts", n);
        BSON_APPEND_INT64(&sub2, "t", 1);
        bson_append_document_end(&sub, &sub2);
        BSON_APPEND_DATE_TIME(&sub, "majorityWriteDate", (int64_t)G.t0 * 1000);
        bson_append_document_end(r, &sub);
    }
    BSON_APPEND_INT32(r, "maxBsonObjectSize", 16777216);
    BSON_APPEND_INT32(r, "maxMessageSizeBytes", 48000000);
    BSON_APPEND_INT32(r, "maxWriteBatchSize", 100000);
    BSON_APPEND_DATE_TIME(r, "localTime", (int64_t)time(NULL) * 1000);
    BSON_APPEND_INT32(r, "logicalSessionTimeoutMinutes", 30);
    BSON_APPEND_INT32(r, "connectionId", c->id);
    BSON_APPEND_INT32(r, "minWireVersion", 0);
    BSON_APPEND_INT32(r, "maxWireVersion", 17);
    BSON_APPEND_BOOL(r, "readOnly", false);
    BSON_APPEND_DOUBLE(r, "ok", 1.0);
}

struct cursor *cursor_new(struct server *s, enum cursor_kind kind)
{
    for (int i = 0; i < MAX_CURSORS; i++) {
        if (s->cursors[i].kind == CUR_FREE) {
            struct cursor *cu = &s->cursors[i];
            memset(cu, 0, sizeof *cu);
            cu->kind = kind;
            cu->id = s->next_cursor++;
            return cu;
        }
    }
    return NULL;
}

struct cursor *cursor_find(struct server *s, int64_t id)
{
    for (int i = 0; i < MAX_CURSORS; i++)
        if (s->cursors[i].kind != CUR_FREE && s->cursors[i].id == id)
            return &s->cursors[i];
    return NULL;
}

/*
 * Copies elements k, k + 1, ... (wrapping around t) of t, n of them, as the
 * elements "0".."n-1" of a batch into dst (NULL: only measured). With move
 * set, move[i] is how far the bytes of the i-th copied element moved
 * (new offset - old offset, inside the elements), which relocates the
 * template's patch offsets. Returns the length of the elements. With k 0 and
 * no wrap the copy is the template's first n elements as they are.
 */
static size_t copy_elems(const struct tmpl *t, size_t k, size_t n, uint8_t *dst, int64_t *move)
{
    size_t w = 0;

    if (k == 0 && n <= t->n) {
        size_t len = n ? t->end[n - 1] : 0;
        if (dst)
            memcpy(dst, t->elems, len);
        if (move)
            memset(move, 0, n * sizeof *move);
        return len;
    }
    for (size_t i = 0; i < n; i++) {
        size_t j = (k + i) % t->n, s = j ? t->end[j - 1] : 0;
        size_t oldkl = strlen((const char *)t->elems + s + 1), vlen = t->end[j] - s - 2 - oldkl;
        char key[24];
        size_t kl = (size_t)snprintf(key, sizeof key, "%zu", i);
        if (dst) {
            dst[w] = t->elems[s];
            memcpy(dst + w + 1, key, kl + 1);
            memcpy(dst + w + 2 + kl, t->elems + s + 2 + oldkl, vlen);
        }
        if (move)
            move[i] = (int64_t)(w + 2 + kl) - (int64_t)(s + 2 + oldkl);
        w += 2 + kl + vlen;
    }
    return w;
}

/* Appends `field`: n elements of t from element k on (copy_elems). */
static void append_batch(bson_t *cur, const char *field, const struct tmpl *t, size_t k, size_t n)
{
    size_t len = copy_elems(t, k, n, NULL, NULL);
    uint8_t *buf = malloc(len + 5);
    int32_t total = (int32_t)(len + 5);
    bson_t arr;

    memcpy(buf, &total, 4);
    copy_elems(t, k, n, buf + 4, NULL);
    buf[4 + len] = 0;
    if (!bson_init_static(&arr, buf, len + 5))
        replay_die("bad batch template");
    bson_append_array(cur, field, -1, &arr);
    free(buf);
}

/* offset of the elements of cursor.<field> inside r */
static uint8_t *batch_at(bson_t *r, const char *field)
{
    bson_iter_t it, sub;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, r, "cursor") || !bson_iter_recurse(&it, &sub) ||
        !bson_iter_find(&sub, field))
        replay_die("batch not found in reply");
    bson_iter_array(&sub, &len, &data);
    return (uint8_t *)data + 4;
}

static void hex8(uint8_t *w, uint32_t v)
{
    static const char H[] = "0123456789ABCDEF";
    for (int k = 7; k >= 0; k--) {
        w[k] = (uint8_t)H[v & 15];
        v >>= 4;
    }
}

size_t stream_tmpl_first(const struct cursor *cu)
{
    return G.rate > 0 ? (size_t)((cu->pos - cu->pos0) % cu->tmpl->n) : 0;
}

/* cursor document of a change stream: events (pos, pos + n] */
void stream_cursor(bson_t *r, struct cursor *cu, const char *field, size_t n)
{
    bson_t cur, tok;
    char t[160];

    bson_append_document_begin(r, "cursor", 6, &cur);
    append_batch(&cur, field, cu->tmpl, stream_tmpl_first(cu), n);
    token_hex(t, sizeof t, cu->pos + n);
    bson_append_document_begin(&cur, "postBatchResumeToken", 20, &tok);
    BSON_APPEND_UTF8(&tok, "_data", t);
    bson_append_document_end(&cur, &tok);
    BSON_APPEND_INT64(&cur, "id", cu->id);
    BSON_APPEND_UTF8(&cur, "ns", "admin.$cmd.aggregate");
    bson_append_document_end(r, &cur);
}

void stream_patch(bson_t *r, const struct cursor *cu, const char *field, size_t k, uint64_t first,
                  size_t n)
{
    const struct tmpl *t = cu->tmpl;
    uint8_t *base = batch_at(r, field);
    int64_t *move = malloc((n ? n : 1) * sizeof *move);

    copy_elems(t, k, n, NULL, move);
    for (size_t i = 0; i < n; i++) {
        size_t j = (k + i) % t->n;
        uint32_t inc = (uint32_t)(first + i);
        hex8(base + (int64_t)t->patch[j] + move[i], inc);
        /* Timestamp: increment, then seconds */
        memcpy(base + (int64_t)t->patch2[j] + move[i], &inc, 4);
    }
    free(move);
}

void snap_cursor(bson_t *r, struct cursor *cu, const char *field, size_t n)
{
    bson_t cur;
    bson_append_document_begin(r, "cursor", 6, &cur);
    append_batch(&cur, field, &G.snap, 0, n);
    BSON_APPEND_INT64(&cur, "id", cu->pos + n < cu->end ? cu->id : 0);
    BSON_APPEND_UTF8(&cur, "ns", cu->ns);
    bson_append_document_end(r, &cur);
}

void snap_patch(bson_t *r, const char *field, uint64_t first, size_t n)
{
    uint8_t *base = batch_at(r, field);
    for (size_t j = 0; j < n; j++) {
        int64_t id = (int64_t)(first + j);
        memcpy(base + G.snap.patch[j], &id, 8);
    }
}

/* the $sample stage's size in the aggregate cmd, or 0 when it is not a
 * [{$sample: ...}, ...] pipeline */
static int64_t sample_size(const bson_t *cmd)
{
    bson_iter_t p, st, s0, sz;
    if (!bson_iter_init_find(&p, cmd, "pipeline") || !bson_iter_recurse(&p, &st) ||
        !bson_iter_next(&st) || !BSON_ITER_HOLDS_DOCUMENT(&st) || !bson_iter_recurse(&st, &s0) ||
        !bson_iter_find(&s0, "$sample") || !BSON_ITER_HOLDS_DOCUMENT(&s0) ||
        !bson_iter_recurse(&s0, &sz) || !bson_iter_find(&sz, "size") ||
        !BSON_ITER_HOLDS_NUMBER(&sz))
        return 0;
    return bson_iter_as_int64(&sz);
}

bool sample_reply(const bson_t *cmd, const char *db, const char *coll, bson_t *r)
{
    int64_t size = sample_size(cmd);
    bson_t cur, arr, d;
    char ns[160];

    if (size <= 0 || strcmp(db, "bench") != 0 || G.docs == 0)
        return false;
    if ((uint64_t)size > G.docs)
        size = (int64_t)G.docs;
    bson_append_document_begin(r, "cursor", 6, &cur);
    bson_append_array_begin(&cur, "firstBatch", 10, &arr);
    for (int64_t i = 0; i < size; i++) {
        char k[24];
        /* evenly spread over 0..docs-1, in a shuffled order as $sample's */
        int64_t j = (i * 7919) % size;
        snprintf(k, sizeof k, "%lld", (long long)i);
        bson_append_document_begin(&arr, k, -1, &d);
        BSON_APPEND_INT64(&d, "_id", (int64_t)((uint64_t)j * G.docs / (uint64_t)size));
        bson_append_document_end(&arr, &d);
    }
    bson_append_array_end(&cur, &arr);
    BSON_APPEND_INT64(&cur, "id", 0);
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    BSON_APPEND_UTF8(&cur, "ns", ns);
    bson_append_document_end(r, &cur);
    return true;
}

/* narrows [*lo, *hi) by the numeric _id bounds anywhere in filter document it */
static void id_bounds(bson_iter_t *it, bool in_id, uint64_t *lo, uint64_t *hi)
{
    while (bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        bson_iter_t sub;
        if (in_id && BSON_ITER_HOLDS_NUMBER(it)) {
            double v = bson_iter_as_double(it);
            uint64_t f = v < 0 ? 0 : (uint64_t)v; /* the _ids are integers */
            uint64_t c = v < 0 ? 0 : (double)f < v ? f + 1 : f;
            if (!strcmp(k, "$gt") && f + 1 > *lo)
                *lo = v < 0 ? 0 : f + 1;
            else if (!strcmp(k, "$gte") && c > *lo)
                *lo = c;
            else if (!strcmp(k, "$lt") && c < *hi)
                *hi = c;
            else if (!strcmp(k, "$lte") && (v < 0 ? 0 : f + 1) < *hi)
                *hi = v < 0 ? 0 : f + 1;
        } else if ((BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) &&
                   bson_iter_recurse(it, &sub)) {
            id_bounds(&sub, in_id || !strcmp(k, "_id"), lo, hi);
        }
    }
}

void find_id_range(const bson_t *cmd, uint64_t *lo, uint64_t *hi)
{
    bson_iter_t it, f;
    if (bson_iter_init_find(&it, cmd, "filter") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &f))
        id_bounds(&f, false, lo, hi);
    if (*lo > *hi)
        *lo = *hi;
}
