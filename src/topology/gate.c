/*
 * topology/gate: per-document order across shards (see gate.h; chunk
 * documents: mongo-sim-spec.md §6.3; BSON comparison order: MongoDB manual,
 * "Comparison/Sort Order").
 */
#include "topology/gate.h"
#include "topology/gate_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "snapshot/hashkey.h"

#define MAX_KEY_FIELDS 32
#define REFRESH_MIN_MS 100
/* A map is read again before it decides an event more than this much
 * cluster time (seconds) after the newest event it was read for: a chunk
 * that left this shard and came back since would otherwise still look owned
 * since the older move, and the event would not wait for the shard that held
 * the document in between. */
#define STALE_AFTER_S 1

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
    uint64_t read_ts; /* cluster time (sec << 32 | inc) of the newest event it was read for */
};

struct gate_task {
    struct gate_registry *reg;
    char *name;
    _Atomic uint64_t watermark;
    atomic_bool started; /* published at least once (gate.h: before, it counts as passed) */
    atomic_bool loading; /* its stored offsets are not loaded yet: not passed */
    atomic_bool ended;
    struct ns_map *maps; /* the task thread's cache */
};

struct gate_registry {
    mongoc_client_pool_t *seed;
    struct gate_task *tasks;
    size_t max;
    _Atomic size_t count; /* tasks[0..count) are published */
};

/* ---- registry ---- */

struct gate_registry *gate_registry_new(mongoc_client_pool_t *seed, size_t max_tasks)
{
    struct gate_registry *r = xcalloc(1, sizeof *r);
    r->seed = seed;
    r->max = max_tasks;
    r->tasks = xcalloc(max_tasks, sizeof *r->tasks);
    return r;
}

static void chunks_free(struct chunk *chunks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bson_destroy(chunks[i].min);
        bson_destroy(chunks[i].max);
        for (size_t j = 0; j < chunks[i].nhist; j++)
            free((char *)chunks[i].hist[j].shard);
        free(chunks[i].hist);
    }
    free(chunks);
}

static void maps_free(struct ns_map *m)
{
    while (m != NULL) {
        struct ns_map *next = m->next;
        chunks_free(m->chunks, m->nchunks);
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
    atomic_store(&t->loading, true);
    atomic_store(&r->count, n + 1);
    return t;
}

void gate_task_ended(struct gate_task *t)
{
    if (t != NULL)
        atomic_store(&t->ended, true);
}

void gate_task_loaded(struct gate_task *t)
{
    if (t != NULL)
        atomic_store(&t->loading, false);
}

void gate_task_publish(struct gate_task *t, uint64_t ts)
{
    uint64_t cur;
    if (t == NULL)
        return;
    /* The watermark first, then started: a reader that sees started also
     * sees at least this watermark. */
    cur = atomic_load(&t->watermark);
    while (ts > cur && !atomic_compare_exchange_weak(&t->watermark, &cur, ts)) {
    }
    atomic_store(&t->started, true);
}

static bool task_passed(struct gate_task *d, uint64_t need)
{
    if (atomic_load(&d->ended))
        return true;
    if (atomic_load(&d->loading))
        return false;
    return !atomic_load(&d->started) || atomic_load(&d->watermark) >= need;
}

/*
 * Every other task (donor == t): one atomic read per task, and in steady
 * state no wait, as every task is long past a chunk's arrival time.
 *
 * No two holders wait on each other for ever, with donors named or "every
 * other" alike: a task holding an event at time h publishes h - 1 as its
 * watermark once nothing it produced before is unacknowledged
 * (worker_stream.c), and every need is at most the held event's time - 1
 * (gate_decide). Of the events held at one moment take one at the earliest
 * time h: every other holder publishes at least h - 1, which is at least
 * that event's need, and a task that holds nothing moves its watermark on
 * by itself; so that event is released, and then, one by one, the others.
 */
bool gate_task_passed(const struct gate_task *t, const struct gate_task *donor, uint64_t need)
{
    struct gate_registry *r;
    size_t n;

    if (donor != t)
        return task_passed((struct gate_task *)donor, need);
    r = t->reg;
    n = atomic_load(&r->count);
    for (size_t i = 0; i < n; i++) {
        if (&r->tasks[i] != t && !task_passed(&r->tasks[i], need))
            return false;
    }
    return true;
}

const char *gate_task_name(const struct gate_task *t)
{
    return t->name;
}

static struct gate_task *find_task(struct gate_registry *r, const char *name)
{
    size_t n = atomic_load(&r->count);
    /* Newest first: a shard removed and added again under its name has a
     * new task (and slot); the old one has ended. */
    for (size_t i = n; i-- > 0;) {
        if (strcmp(r->tasks[i].name, name) == 0)
            return &r->tasks[i];
    }
    return NULL;
}

/* ---- chunk maps ---- */

/* Compares two chunk bound documents field by field (-1, 0, 1). */
static int cmp_bounds(const bson_t *a, const bson_t *b)
{
    bson_iter_t x, y;
    if (!bson_iter_init(&x, a) || !bson_iter_init(&y, b))
        return 0;
    while (bson_iter_next(&x) && bson_iter_next(&y)) {
        int c = gate_compare_values(&x, &y);
        if (c != 0)
            return c;
    }
    return 0;
}

/*
 * After a re-read: each chunk whose range is the same as, or inside (a split),
 * a chunk of the previous read gets back the history entries the server has
 * trimmed since (gate_history_extend), so a trim while running does not lose
 * a donor this task already knew. A merged chunk (its range spans several old
 * ones, its history one entry) is left as read.
 */
static void keep_seen_history(struct ns_map *m, const struct chunk *old, size_t nold)
{
    for (size_t i = 0; i < m->nchunks; i++) {
        struct chunk *ch = &m->chunks[i];
        for (size_t j = 0; j < nold; j++) {
            if (cmp_bounds(old[j].min, ch->min) <= 0 && cmp_bounds(ch->max, old[j].max) <= 0) {
                gate_history_extend(&ch->hist, &ch->nhist, old[j].hist, old[j].nhist);
                break;
            }
        }
    }
}

size_t gate_history_extend(struct gate_entry **hist, size_t *n, const struct gate_entry *seen,
                           size_t nseen)
{
    const struct gate_entry *last;
    size_t from = nseen, added;

    if (*n == 0)
        return 0;
    last = &(*hist)[*n - 1];
    for (size_t k = 0; k < nseen; k++) {
        if (seen[k].valid_after == last->valid_after && strcmp(seen[k].shard, last->shard) == 0) {
            from = k + 1;
            break;
        }
    }
    if (from >= nseen)
        return 0;
    added = nseen - from;
    *hist = xrealloc(*hist, (*n + added) * sizeof **hist);
    for (size_t k = from; k < nseen; k++) {
        (*hist)[*n].valid_after = seen[k].valid_after;
        (*hist)[*n].shard = xstrdup(seen[k].shard);
        (*n)++;
    }
    return added;
}

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
    /* The previous read: history the server has trimmed since is kept. */
    struct chunk *old = m->chunks;
    size_t nold = m->nchunks;

    m->chunks = NULL;
    m->nchunks = 0;
    for (size_t i = 0; i < m->nfields; i++)
        free(m->fields[i]);
    m->nfields = 0;
    m->sharded = m->hashed = m->listed = false;
    m->read_ms = mcdc_clock_mono_ms();

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
    keep_seen_history(m, old, nold);
    chunks_free(old, nold);
    bson_destroy(&q);
    bson_destroy(&cq);
    bson_destroy(&opts);
    mongoc_collection_destroy(colls);
    mongoc_collection_destroy(chunks);
    mongoc_client_pool_push(pool, c);
    return ok;
}

enum gate_wait gate_decide(const struct gate_entry *hist, size_t n, const char *self, uint64_t ts,
                           uint64_t *need, const char **donor)
{
    size_t o = 0;
    uint64_t cap = ts > 0 ? ts - 1 : 0;

    *need = 0;
    *donor = NULL;
    if (n == 0)
        return GATE_NONE; /* a server without chunk history: nothing to go by */
    while (o < n && hist[o].valid_after > ts)
        o++;
    if (o == n) {
        /* No entry covers ts: trimmed (or a merge after ts); whoever owned
         * the document before ts is unknown. */
        *need = cap;
        return GATE_EVERY_OTHER;
    }
    if (strcmp(hist[o].shard, self) != 0)
        return GATE_NOT_OWNER;
    /* need is capped at ts - 1: the donor's events of the document are all
     * before the arrival, so at or before ts - 1 when it arrived at ts; and a
     * need below the held event's time is what keeps holders from waiting on
     * each other for ever (gate_task_passed). */
    *need = hist[o].valid_after < cap ? hist[o].valid_after : cap;
    if (o + 1 == n)
        return GATE_EVERY_OTHER; /* the oldest entry: its predecessor was trimmed */
    if (strcmp(hist[o + 1].shard, self) == 0) {
        *need = 0;
        return GATE_NONE;
    }
    *donor = hist[o + 1].shard;
    return GATE_DONOR;
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
    size_t i = gate_chunk_find(m->chunks, m->nchunks, vals, m->nfields);
    if (i < m->nchunks) {
        const struct chunk *ch = &m->chunks[i];
        const char *name = NULL;
        struct gate_task *d;
        switch (gate_decide(ch->hist, ch->nhist, t->name, ts, need, &name)) {
        case GATE_NOT_OWNER: break; /* result 0: the map is older than a migration */
        case GATE_EVERY_OTHER:
            /* a task is never its own donor: the value means every other */
            *donor = *need > 0 ? t : NULL;
            result = 1;
            break;
        case GATE_DONOR:
            d = find_task(t->reg, name);
            if (d != NULL)
                *donor = d;
            else
                *need = 0; /* a shard no task follows (removed before this run) */
            result = 1;
            break;
        case GATE_NONE:
        default: result = 1; break;
        }
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
        if (mcdc_clock_mono_ms() - m->read_ms >= 100 * REFRESH_MIN_MS)
            (void)load_map(t->reg->seed, m, err);
        if (!m->sharded)
            return 0;
    }
    /* Read for events of at least this cluster time: it holds every
     * migration committed before them (config.chunks is read after they
     * happened). */
    if (m->read_ts == 0)
        m->read_ts = ts;
    bool recent = (ts >> 32) <= (m->read_ts >> 32) + STALE_AFTER_S;
    if (recent && lookup(t, m, key, ts, &need, donor))
        return need;
    if (mcdc_clock_mono_ms() - m->read_ms < REFRESH_MIN_MS) {
        /* Just read: decide with it (a stale map here errs only for moves
         * within the last REFRESH_MIN_MS). */
        if (!recent && lookup(t, m, key, ts, &need, donor))
            return need;
        return 0;
    }
    if (!load_map(t->reg->seed, m, err))
        return 0;
    m->read_ts = ts;
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
