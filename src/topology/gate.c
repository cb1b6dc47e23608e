/*
 * topology/gate: per-document order across shards (see gate.h; chunk
 * documents: mongo-sim-spec.md §6.3; BSON comparison order: MongoDB manual,
 * "Comparison/Sort Order").
 */
#include "topology/gate.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/xalloc.h"
#include "snapshot/hashkey.h"

#define MAX_KEY_FIELDS 32
#define REFRESH_MIN_MS 100

struct hist {
    uint64_t valid_after;
    char *shard;
};

struct chunk {
    bson_t *min, *max;
    struct hist *hist; /* newest first */
    size_t nhist;
};

struct ns_map {
    struct ns_map *next;
    char *ns;
    bool sharded;
    bool listed; /* in config.collections (not dropped): fields is its shard key */
    bool hashed;                  /* a field is hashed: its chunk bounds are hash64 values */
    bool fhashed[MAX_KEY_FIELDS]; /* which */
    char *fields[MAX_KEY_FIELDS];
    size_t nfields;
    struct chunk *chunks;
    size_t nchunks;
    int64_t read_ms; /* monotonic ms of the last read */
};

struct gate_task {
    struct gate_registry *reg;
    char *name;
    _Atomic uint64_t watermark;
    atomic_bool ended;
    struct ns_map *maps; /* the task thread's cache */
};

struct gate_registry {
    mongoc_client_pool_t *seed;
    struct gate_task *tasks;
    size_t max;
    _Atomic size_t count; /* tasks[0..count) are published */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- BSON order ---- */

/* Canonical type rank of the comparison order. */
static int type_rank(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return 0;
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL: return 1;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: return 2;
    case BSON_TYPE_SYMBOL:
    case BSON_TYPE_UTF8: return 3;
    case BSON_TYPE_DOCUMENT: return 4;
    case BSON_TYPE_ARRAY: return 5;
    case BSON_TYPE_BINARY: return 6;
    case BSON_TYPE_OID: return 7;
    case BSON_TYPE_BOOL: return 8;
    case BSON_TYPE_DATE_TIME: return 9;
    case BSON_TYPE_TIMESTAMP: return 10;
    case BSON_TYPE_REGEX: return 11;
    case BSON_TYPE_MAXKEY: return 13;
    default: return 12;
    }
}

static int cmp_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c < 0 ? -1 : 1;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int cmp_num(const bson_iter_t *a, const bson_iter_t *b)
{
    if (BSON_ITER_HOLDS_DOUBLE(a) || BSON_ITER_HOLDS_DOUBLE(b)) {
        double x = bson_iter_as_double(a), y = bson_iter_as_double(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = bson_iter_as_int64(a), y = bson_iter_as_int64(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

int gate_compare_values(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_type_t ta = bson_iter_type(a), tb = bson_iter_type(b);
    int ra = type_rank(ta), rb = type_rank(tb);
    const bson_value_t *va, *vb;

    if (ra != rb)
        return ra < rb ? -1 : 1;
    va = bson_iter_value((bson_iter_t *)a);
    vb = bson_iter_value((bson_iter_t *)b);
    switch (ra) {
    case 0:
    case 1:
    case 13: return 0;
    case 2: return cmp_num(a, b);
    case 3: {
        uint32_t la, lb;
        const char *sa = ta == BSON_TYPE_UTF8 ? bson_iter_utf8(a, &la) : bson_iter_symbol(a, &la);
        const char *sb = tb == BSON_TYPE_UTF8 ? bson_iter_utf8(b, &lb) : bson_iter_symbol(b, &lb);
        return cmp_bytes(sa, la, sb, lb);
    }
    case 7: return cmp_bytes(va->value.v_oid.bytes, 12, vb->value.v_oid.bytes, 12);
    case 8: return (int)va->value.v_bool - (int)vb->value.v_bool;
    case 9: {
        int64_t x = va->value.v_datetime, y = vb->value.v_datetime;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    case 10: {
        uint64_t x = ((uint64_t)va->value.v_timestamp.timestamp << 32) | va->value.v_timestamp.increment;
        uint64_t y = ((uint64_t)vb->value.v_timestamp.timestamp << 32) | vb->value.v_timestamp.increment;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    case 6:
        if (va->value.v_binary.data_len != vb->value.v_binary.data_len)
            return va->value.v_binary.data_len < vb->value.v_binary.data_len ? -1 : 1;
        if (va->value.v_binary.subtype != vb->value.v_binary.subtype)
            return va->value.v_binary.subtype < vb->value.v_binary.subtype ? -1 : 1;
        return cmp_bytes(va->value.v_binary.data, va->value.v_binary.data_len,
                         vb->value.v_binary.data, vb->value.v_binary.data_len);
    default: {
        /* documents, arrays, regexes and the rest: by their raw bytes (only
         * equality matters for chunk bounds of these rare shard-key types) */
        const uint8_t *da, *db;
        uint32_t la, lb;
        if ((ra == 4 || ra == 5)) {
            if (ra == 4) {
                bson_iter_document(a, &la, &da);
                bson_iter_document(b, &lb, &db);
            } else {
                bson_iter_array(a, &la, &da);
                bson_iter_array(b, &lb, &db);
            }
            return cmp_bytes(da, la, db, lb);
        }
        return 0;
    }
    }
}

/* One shard key value (a struct: bson_iter_t is over-aligned for arrays). */
struct keyval {
    bson_iter_t it;
};

/* Compares key values (nfields, in pattern order) with a chunk bound document. */
static int cmp_key_bound(const struct keyval *vals, size_t n, const bson_t *bound)
{
    bson_iter_t it;
    size_t i = 0;
    if (!bson_iter_init(&it, bound))
        return 0;
    while (i < n && bson_iter_next(&it)) {
        int c = gate_compare_values(&vals[i].it, &it);
        if (c != 0)
            return c;
        i++;
    }
    return 0;
}

/* ---- registry ---- */

struct gate_registry *gate_registry_new(mongoc_client_pool_t *seed, size_t max_tasks)
{
    struct gate_registry *r = xcalloc(1, sizeof *r);
    r->seed = seed;
    r->max = max_tasks;
    r->tasks = xcalloc(max_tasks, sizeof *r->tasks);
    return r;
}

static void maps_free(struct ns_map *m)
{
    while (m != NULL) {
        struct ns_map *next = m->next;
        for (size_t i = 0; i < m->nchunks; i++) {
            bson_destroy(m->chunks[i].min);
            bson_destroy(m->chunks[i].max);
            for (size_t j = 0; j < m->chunks[i].nhist; j++)
                free(m->chunks[i].hist[j].shard);
            free(m->chunks[i].hist);
        }
        free(m->chunks);
        for (size_t i = 0; i < m->nfields; i++)
            free(m->fields[i]);
        free(m->ns);
        free(m);
        m = next;
    }
}

void gate_registry_destroy(struct gate_registry *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < atomic_load(&r->count); i++) {
        free(r->tasks[i].name);
        maps_free(r->tasks[i].maps);
    }
    free(r->tasks);
    free(r);
}

struct gate_task *gate_registry_add(struct gate_registry *r, const char *name)
{
    size_t n = atomic_load(&r->count);
    struct gate_task *t;
    if (n >= r->max)
        return NULL;
    t = &r->tasks[n];
    t->reg = r;
    t->name = xstrdup(name);
    atomic_store(&t->watermark, 0);
    atomic_store(&t->ended, false);
    atomic_store(&r->count, n + 1);
    return t;
}

void gate_task_ended(struct gate_task *t)
{
    if (t != NULL)
        atomic_store(&t->ended, true);
}

void gate_task_publish(struct gate_task *t, uint64_t ts)
{
    uint64_t cur;
    if (t == NULL)
        return;
    cur = atomic_load(&t->watermark);
    while (ts > cur && !atomic_compare_exchange_weak(&t->watermark, &cur, ts)) {
    }
}

bool gate_task_passed(const struct gate_task *donor, uint64_t need)
{
    return atomic_load(&((struct gate_task *)donor)->ended) ||
           atomic_load(&((struct gate_task *)donor)->watermark) >= need;
}

const char *gate_task_name(const struct gate_task *t)
{
    return t->name;
}

static struct gate_task *find_task(struct gate_registry *r, const char *name)
{
    size_t n = atomic_load(&r->count);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(r->tasks[i].name, name) == 0)
            return &r->tasks[i];
    }
    return NULL;
}

/* ---- chunk maps ---- */

/* (Re)reads ns's sharding metadata into m. Returns false with err. */
static bool load_map(mongoc_client_pool_t *pool, struct ns_map *m, struct mcdc_error *err)
{
    mongoc_client_t *c = mongoc_client_pool_pop(pool);
    mongoc_collection_t *colls = mongoc_client_get_collection(c, "config", "collections");
    mongoc_collection_t *chunks = mongoc_client_get_collection(c, "config", "chunks");
    bson_t q = BSON_INITIALIZER, cq = BSON_INITIALIZER, opts = BSON_INITIALIZER, sort;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    bson_error_t error;
    bson_iter_t it;
    bool ok = true, found = false;
    size_t cap = 0;

    for (size_t i = 0; i < m->nchunks; i++) {
        bson_destroy(m->chunks[i].min);
        bson_destroy(m->chunks[i].max);
        for (size_t j = 0; j < m->chunks[i].nhist; j++)
            free(m->chunks[i].hist[j].shard);
        free(m->chunks[i].hist);
    }
    free(m->chunks);
    m->chunks = NULL;
    m->nchunks = 0;
    for (size_t i = 0; i < m->nfields; i++)
        free(m->fields[i]);
    m->nfields = 0;
    m->sharded = m->hashed = m->listed = false;
    m->read_ms = now_ms();

    BSON_APPEND_UTF8(&q, "_id", m->ns);
    cur = mongoc_collection_find_with_opts(colls, &q, NULL, NULL);
    if (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t k;
        found = true;
        if (bson_iter_init_find(&it, doc, "uuid"))
            bson_append_value(&cq, "uuid", -1, bson_iter_value(&it));
        else
            BSON_APPEND_UTF8(&cq, "ns", m->ns);
        if (bson_iter_init_find(&it, doc, "key") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &k)) {
            while (bson_iter_next(&k) && m->nfields < MAX_KEY_FIELDS) {
                bool h =
                    BSON_ITER_HOLDS_UTF8(&k) && strcmp(bson_iter_utf8(&k, NULL), "hashed") == 0;
                m->hashed = m->hashed || h;
                m->fhashed[m->nfields] = h;
                m->fields[m->nfields++] = xstrdup(bson_iter_key(&k));
            }
        }
        if (bson_iter_init_find(&it, doc, "dropped") && bson_iter_as_bool(&it))
            found = false;
    }
    if (mongoc_cursor_error(cur, &error)) {
        mcdc_error_from_bson(err, error.code, error.message, true);
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    m->listed = ok && found && m->nfields > 0;
    m->sharded = m->listed;
    if (m->sharded) {
        BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
        BSON_APPEND_INT32(&sort, "min", 1);
        bson_append_document_end(&opts, &sort);
        cur = mongoc_collection_find_with_opts(chunks, &cq, &opts, NULL);
        while (mongoc_cursor_next(cur, &doc)) {
            bson_iter_t a, b, h, e;
            const uint8_t *da, *db;
            uint32_t la, lb;
            struct chunk *ch;
            if (!bson_iter_init_find(&a, doc, "min") || !BSON_ITER_HOLDS_DOCUMENT(&a) ||
                !bson_iter_init_find(&b, doc, "max") || !BSON_ITER_HOLDS_DOCUMENT(&b))
                continue;
            if (m->nchunks == cap) {
                cap = cap ? cap * 2 : 8;
                m->chunks = xrealloc(m->chunks, cap * sizeof *m->chunks);
            }
            ch = &m->chunks[m->nchunks];
            memset(ch, 0, sizeof *ch);
            bson_iter_document(&a, &la, &da);
            bson_iter_document(&b, &lb, &db);
            ch->min = bson_new_from_data(da, la);
            ch->max = bson_new_from_data(db, lb);
            if (ch->min == NULL || ch->max == NULL) {
                bson_destroy(ch->min);
                bson_destroy(ch->max);
                continue;
            }
            if (bson_iter_init_find(&h, doc, "history") && BSON_ITER_HOLDS_ARRAY(&h) &&
                bson_iter_recurse(&h, &e)) {
                size_t hcap = 0;
                while (bson_iter_next(&e)) {
                    bson_iter_t f;
                    uint32_t sec = 0, inc = 0;
                    const char *shard = NULL;
                    if (!BSON_ITER_HOLDS_DOCUMENT(&e) || !bson_iter_recurse(&e, &f))
                        continue;
                    while (bson_iter_next(&f)) {
                        if (strcmp(bson_iter_key(&f), "validAfter") == 0 &&
                            BSON_ITER_HOLDS_TIMESTAMP(&f))
                            bson_iter_timestamp(&f, &sec, &inc);
                        else if (strcmp(bson_iter_key(&f), "shard") == 0 &&
                                 BSON_ITER_HOLDS_UTF8(&f))
                            shard = bson_iter_utf8(&f, NULL);
                    }
                    if (shard == NULL)
                        continue;
                    if (ch->nhist == hcap) {
                        hcap = hcap ? hcap * 2 : 4;
                        ch->hist = xrealloc(ch->hist, hcap * sizeof *ch->hist);
                    }
                    ch->hist[ch->nhist].valid_after = ((uint64_t)sec << 32) | inc;
                    ch->hist[ch->nhist].shard = xstrdup(shard);
                    ch->nhist++;
                }
            }
            m->nchunks++;
        }
        if (mongoc_cursor_error(cur, &error)) {
            mcdc_error_from_bson(err, error.code, error.message, true);
            ok = false;
        }
        mongoc_cursor_destroy(cur);
    }
    bson_destroy(&q);
    bson_destroy(&cq);
    bson_destroy(&opts);
    mongoc_collection_destroy(colls);
    mongoc_collection_destroy(chunks);
    mongoc_client_pool_push(pool, c);
    return ok;
}

/* The history index of the owner at ts (newest first: the first entry with
 * validAfter <= ts), or -1. */
static long owner_at(const struct chunk *ch, uint64_t ts)
{
    for (size_t i = 0; i < ch->nhist; i++) {
        if (ch->hist[i].valid_after <= ts)
            return (long)i;
    }
    return -1;
}

/* Looks key up in m: 1 = decided (need and donor set), 0 = the map does not
 * give this shard the document at ts (stale map). */
static int lookup(struct gate_task *t, const struct ns_map *m, const bson_t *key, uint64_t ts,
                  uint64_t *need, struct gate_task **donor)
{
    struct keyval vals[MAX_KEY_FIELDS];
    bson_t nullv = BSON_INITIALIZER, hashes = BSON_INITIALIZER;
    bson_iter_t null_it;
    int result = 0;

    BSON_APPEND_NULL(&nullv, "v");
    bson_iter_init_find(&null_it, &nullv, "v");
    for (size_t i = 0; i < m->nfields; i++) {
        bson_iter_t top;
        if (!bson_iter_init(&top, key) ||
            !bson_iter_find_descendant(&top, m->fields[i], &vals[i].it))
            vals[i].it = null_it; /* a missing shard key field counts as null */
    }
    if (m->hashed) {
        /* Hashed fields: chunk bounds are the NumberLong hash of the value
         * (snapshot/hashkey.h), so the key is compared by its hash. */
        bson_iter_t h;
        for (size_t i = 0; i < m->nfields; i++) {
            if (m->fhashed[i]) {
                char idx[24];
                snprintf(idx, sizeof idx, "%zu", i);
                BSON_APPEND_INT64(&hashes, idx, hashkey_hash64(&vals[i].it, 0));
            }
        }
        for (size_t i = 0; i < m->nfields; i++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            if (m->fhashed[i] && bson_iter_init_find(&h, &hashes, idx))
                vals[i].it = h;
        }
    }
    for (size_t i = 0; i < m->nchunks; i++) {
        const struct chunk *ch = &m->chunks[i];
        long o;
        if (cmp_key_bound(vals, m->nfields, ch->min) < 0 ||
            cmp_key_bound(vals, m->nfields, ch->max) >= 0)
            continue;
        o = owner_at(ch, ts);
        if (o < 0 || strcmp(ch->hist[o].shard, t->name) != 0)
            break;
        if ((size_t)o + 1 < ch->nhist && strcmp(ch->hist[o + 1].shard, t->name) != 0) {
            struct gate_task *d = find_task(t->reg, ch->hist[o + 1].shard);
            if (d != NULL) {
                *need = ch->hist[o].valid_after;
                *donor = d;
            }
        }
        result = 1;
        break;
    }
    bson_destroy(&nullv);
    bson_destroy(&hashes);
    return result;
}

uint64_t gate_task_check(struct gate_task *t, const char *db, const char *coll, const bson_t *key,
                         uint64_t ts, struct gate_task **donor, struct mcdc_error *err)
{
    char ns[512];
    struct ns_map *m;
    uint64_t need = 0;

    *donor = NULL;
    if (t == NULL || key == NULL)
        return 0;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    for (m = t->maps; m != NULL && strcmp(m->ns, ns) != 0; m = m->next) {
    }
    if (m == NULL) {
        m = xcalloc(1, sizeof *m);
        m->ns = xstrdup(ns);
        m->next = t->maps;
        t->maps = m;
        if (!load_map(t->reg->seed, m, err)) {
            m->read_ms = 0; /* retry on the next event */
            return 0;
        }
    }
    if (!m->sharded) {
        /* Unsharded now; a collection sharded later is seen on a refresh. */
        if (now_ms() - m->read_ms >= 100 * REFRESH_MIN_MS)
            (void)load_map(t->reg->seed, m, err);
        if (!m->sharded)
            return 0;
    }
    if (lookup(t, m, key, ts, &need, donor))
        return need;
    if (now_ms() - m->read_ms < REFRESH_MIN_MS)
        return 0;
    if (!load_map(t->reg->seed, m, err))
        return 0;
    if (lookup(t, m, key, ts, &need, donor))
        return need;
    return 0;
}

bool gate_task_shard_key(struct gate_task *t, const char *db, const char *coll, bson_t *out,
                         struct mcdc_error *err)
{
    char ns[512];
    struct ns_map *m;

    if (t == NULL)
        return true;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    for (m = t->maps; m != NULL && strcmp(m->ns, ns) != 0; m = m->next) {
    }
    if (m == NULL) {
        m = xcalloc(1, sizeof *m);
        m->ns = xstrdup(ns);
        m->next = t->maps;
        t->maps = m;
    }
    /* Read afresh: a snapshot start is rare and the collection may have been
     * sharded since the map was cached. */
    if (!load_map(t->reg->seed, m, err)) {
        m->read_ms = 0;
        return false;
    }
    for (size_t i = 0; m->listed && i < m->nfields; i++)
        BSON_APPEND_INT32(out, m->fields[i], 1);
    return true;
}
