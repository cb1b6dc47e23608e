/*
 * metrics_coll: per-collection counters of a task, with a bounded label set.
 * Each task keeps at most metrics.collections.max distinct collections; the
 * events of any further collection are counted under the one label value
 * METRICS_COLLECTION_OVERFLOW ("__overflow__": no dot, so no namespace can
 * be it), so a deployment with many collections cannot grow the exposition
 * (and Prometheus's series count) without bound.
 *
 * Lookup: an open-addressing hash table of slot indexes keyed by "db.coll",
 * under the task's own mutex (uncontended: one capture thread per task;
 * the renderer takes it briefly), with the last slot found kept in front so
 * a run of events on one collection skips the hash. Slots live until
 * metrics_reset().
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "metrics/metrics_internal.h"

struct metrics_coll {
    char name[256]; /* "db.coll", or METRICS_COLLECTION_OVERFLOW */
    size_t len;
    atomic_uint_fast64_t events[METRICS_OP_COUNT];
    atomic_uint_fast64_t snapshot_rows;
};

struct metrics_colls {
    pthread_mutex_t mu;
    struct metrics_coll **slots; /* named collections, in first-seen order */
    size_t n, slots_cap;
    uint32_t *index;               /* hash table: slot index + 1, 0 empty */
    size_t index_size;             /* power of two, > 2 n */
    struct metrics_coll *overflow; /* created on the first collection past the cap */
    struct metrics_coll *last;
};

static atomic_size_t coll_cap = METRICS_COLLECTIONS_DEFAULT;

void metrics_set_collection_cap(size_t cap)
{
    atomic_store(&coll_cap, cap);
}

struct metrics_colls *metrics_colls_new(void)
{
    struct metrics_colls *c = xcalloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void metrics_colls_free(struct metrics_colls *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->slots[i]);
    free(c->slots);
    free(c->index);
    free(c->overflow);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* FNV-1a of db "." coll. */
static uint32_t hash_ns(const char *db, size_t db_len, const char *coll, size_t coll_len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < db_len; i++)
        h = (h ^ (unsigned char)db[i]) * 16777619u;
    h = (h ^ '.') * 16777619u;
    for (size_t i = 0; i < coll_len; i++)
        h = (h ^ (unsigned char)coll[i]) * 16777619u;
    return h;
}

static bool same(const struct metrics_coll *s, const char *db, size_t db_len, const char *coll,
                 size_t coll_len)
{
    return s->len == db_len + 1 + coll_len && memcmp(s->name, db, db_len) == 0 &&
           s->name[db_len] == '.' && memcmp(s->name + db_len + 1, coll, coll_len) == 0;
}

static void reindex(struct metrics_colls *c)
{
    size_t size = c->index_size ? c->index_size * 2 : 64;
    uint32_t *index = xcalloc(size, sizeof *index);
    for (size_t i = 0; i < c->n; i++) {
        const struct metrics_coll *s = c->slots[i];
        const char *dot = memchr(s->name, '.', s->len);
        size_t dl = (size_t)(dot - s->name);
        size_t k = hash_ns(s->name, dl, dot + 1, s->len - dl - 1) & (size_t)(size - 1);
        while (index[k] != 0)
            k = (k + 1) & (size - 1);
        index[k] = (uint32_t)i + 1;
    }
    free(c->index);
    c->index = index;
    c->index_size = size;
}

/* The slot of db.coll, created when under the cap, else the overflow slot;
 * NULL when per-collection metrics are off (cap 0). c->mu held. */
static struct metrics_coll *find(struct metrics_colls *c, const char *db, size_t db_len,
                                 const char *coll, size_t coll_len)
{
    size_t cap = atomic_load(&coll_cap), k;

    if (cap == 0)
        return NULL;
    if (c->last != NULL && same(c->last, db, db_len, coll, coll_len))
        return c->last;
    if (db_len + 1 + coll_len >= sizeof c->slots[0]->name)
        goto overflow; /* longer than any MongoDB namespace (255 bytes) */
    if (c->index_size != 0) {
        k = hash_ns(db, db_len, coll, coll_len) & (c->index_size - 1);
        for (; c->index[k] != 0; k = (k + 1) & (c->index_size - 1)) {
            struct metrics_coll *s = c->slots[c->index[k] - 1];
            if (same(s, db, db_len, coll, coll_len))
                return c->last = s;
        }
    }
    if (c->n >= cap)
        goto overflow;
    {
        struct metrics_coll *s = xcalloc(1, sizeof *s);
        memcpy(s->name, db, db_len);
        s->name[db_len] = '.';
        memcpy(s->name + db_len + 1, coll, coll_len);
        s->len = db_len + 1 + coll_len;
        if (c->n == c->slots_cap) {
            c->slots_cap = c->slots_cap ? c->slots_cap * 2 : 16;
            c->slots = xrealloc(c->slots, c->slots_cap * sizeof *c->slots);
        }
        c->slots[c->n++] = s;
        if (c->n * 2 >= c->index_size)
            reindex(c);
        else {
            k = hash_ns(db, db_len, coll, coll_len) & (c->index_size - 1);
            while (c->index[k] != 0)
                k = (k + 1) & (c->index_size - 1);
            c->index[k] = (uint32_t)c->n;
        }
        return c->last = s;
    }
overflow:
    if (c->overflow == NULL) {
        c->overflow = xcalloc(1, sizeof *c->overflow);
        snprintf(c->overflow->name, sizeof c->overflow->name, "%s", METRICS_COLLECTION_OVERFLOW);
        c->overflow->len = strlen(c->overflow->name);
    }
    return c->overflow;
}

void metrics_collection_event(struct metrics_task *t, const char *db, size_t db_len,
                              const char *coll, size_t coll_len, enum metrics_op op)
{
    struct metrics_coll *s;

    if (t == NULL || op >= METRICS_OP_COUNT || atomic_load(&coll_cap) == 0)
        return;
    pthread_mutex_lock(&t->colls->mu);
    s = find(t->colls, db ? db : "", db ? db_len : 0, coll ? coll : "", coll ? coll_len : 0);
    if (s != NULL)
        atomic_fetch_add_explicit(&s->events[op], 1, memory_order_relaxed);
    pthread_mutex_unlock(&t->colls->mu);
}

void metrics_collection_snapshot_rows(struct metrics_task *t, const char *db, const char *coll,
                                      uint64_t n)
{
    struct metrics_coll *s;

    if (t == NULL || atomic_load(&coll_cap) == 0)
        return;
    pthread_mutex_lock(&t->colls->mu);
    s = find(t->colls, db, strlen(db), coll, strlen(coll));
    if (s != NULL)
        atomic_fetch_add_explicit(&s->snapshot_rows, n, memory_order_relaxed);
    pthread_mutex_unlock(&t->colls->mu);
}

static void render_family(struct out *o, struct metrics_task *const *tasks, size_t n, bool rows)
{
    char task[300], coll[600];

    for (size_t i = 0; i < n; i++) {
        struct metrics_colls *c = tasks[i]->colls;
        metrics_esc(task, sizeof task, tasks[i]->name);
        pthread_mutex_lock(&c->mu);
        for (size_t k = 0; k <= c->n; k++) {
            const struct metrics_coll *s = k < c->n ? c->slots[k] : c->overflow;
            if (s == NULL)
                continue;
            metrics_esc(coll, sizeof coll, s->name);
            if (rows) {
                outf(
                    o,
                    "mongocdc_snapshot_collection_rows_total{task=\"%s\",collection=\"%s\"} %llu\n",
                    task, coll, (unsigned long long)atomic_load(&s->snapshot_rows));
                continue;
            }
            for (int op = 0; op < METRICS_OP_COUNT; op++)
                outf(o,
                     "mongocdc_collection_events_total{task=\"%s\",collection=\"%s\",op=\"%s\"} "
                     "%llu\n",
                     task, coll, metrics_op_labels[op],
                     (unsigned long long)atomic_load(&s->events[op]));
        }
        pthread_mutex_unlock(&c->mu);
    }
}

void metrics_colls_render(struct out *o, struct metrics_task *const *tasks, size_t n)
{
    if (atomic_load(&coll_cap) == 0)
        return;
    metrics_header(o, "mongocdc_collection_events_total", "counter",
                   "Change events turned into records, by collection (db.coll; __overflow__ past "
                   "metrics.collections.max) and op.");
    render_family(o, tasks, n, false);
    metrics_header(o, "mongocdc_snapshot_collection_rows_total", "counter",
                   "Documents the snapshot copied, by collection (Debezium RowsScanned).");
    render_family(o, tasks, n, true);
}
