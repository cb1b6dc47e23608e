/*
 * snapshot: initial snapshot start point, collection plan, parallel readers
 * and the bounded hand-over queue (debezium-format.md §5.2).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "snapshot/snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "capture/capture.h"
#include "common/log.h"
#include "common/xalloc.h"

#define QUEUE_MAX_DOCS 4096
#define QUEUE_MAX_BYTES (16u * 1024u * 1024u)
#define PROGRESS_EVERY_MS 10000

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- start position ---- */

static bool start_from_hello(mongoc_client_t *client, struct mcdc_position *pos,
                             struct resume_failure *fail, struct mcdc_error *err)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_error_t error;
    bson_iter_t it;
    bool ok;

    BSON_APPEND_INT32(&cmd, "hello", 1);
    ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, &reply, &error);
    bson_destroy(&cmd);
    if (!ok) {
        capture_failure_from(&error, &reply, fail, err);
        bson_destroy(&reply);
        return false;
    }
    if (bson_iter_init_find(&it, &reply, "operationTime") && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        uint32_t t, i;
        bson_iter_timestamp(&it, &t, &i);
        pos->sec = t;
        pos->ord = i;
    }
    bson_destroy(&reply);
    return true;
}

bool snapshot_record_start(mongoc_client_t *client, const struct mcdc_config *cfg,
                           const bson_t *pipeline, struct mcdc_position *pos,
                           struct resume_failure *fail, struct mcdc_error *err)
{
    struct capture *cap;
    const bson_t *doc = NULL, *token;
    bool ok = true;

    position_clear(pos);
    position_init(pos);
    pos->sec = -1;
    pos->ord = -1;
    cap = capture_open(client, cfg, pipeline, NULL, fail, err);
    if (cap == NULL)
        return false;
    switch (capture_next(cap, &doc)) {
    case CAPTURE_EVENT:
        /* That event happened before the copy starts: its effect is in the snapshot. */
        if (!capture_event_position(doc, pos))
            ok = mcdc_error_set(err, MCDC_ERR_MONGO, 0, "change event without a resume token");
        break;
    case CAPTURE_IDLE:
        token = capture_resume_token(cap);
        if (token != NULL && !bson_empty(token)) {
            bson_destroy(&pos->resume_token);
            bson_copy_to(token, &pos->resume_token);
            pos->has_resume_token = true;
        } else {
            ok = start_from_hello(client, pos, fail, err);
        }
        break;
    case CAPTURE_ERROR:
    default:
        capture_failure(cap, fail, err);
        ok = false;
        break;
    }
    capture_destroy(cap);
    return ok;
}

/* ---- plan ---- */

struct include_list {
    pcre2_code **res;
    size_t count;
    bool literal;
    const struct mcdc_strlist *items;
};

static bool include_compile(const struct mcdc_config *cfg, struct include_list *inc,
                            struct mcdc_error *err)
{
    memset(inc, 0, sizeof *inc);
    inc->items = &cfg->snapshot_include_collections;
    inc->literal = cfg->filters_match_mode == MCDC_FILTER_MATCH_LITERAL;
    if (inc->literal || inc->items->count == 0)
        return true;
    inc->res = xcalloc(inc->items->count, sizeof *inc->res);
    inc->count = inc->items->count;
    for (size_t i = 0; i < inc->count; i++) {
        int ecode;
        PCRE2_SIZE eoff;
        inc->res[i] = pcre2_compile((PCRE2_SPTR)inc->items->items[i], PCRE2_ZERO_TERMINATED,
                                    PCRE2_ANCHORED | PCRE2_ENDANCHORED, &ecode, &eoff, NULL);
        if (inc->res[i] == NULL)
            return mcdc_error_set(err, MCDC_ERR_CONFIG, ecode,
                                  "snapshot.include.collection.list: invalid regex '%s' at "
                                  "offset %zu",
                                  inc->items->items[i], (size_t)eoff);
    }
    return true;
}

static void include_free(struct include_list *inc)
{
    for (size_t i = 0; i < inc->count; i++)
        pcre2_code_free(inc->res[i]);
    free(inc->res);
}

/* snapshot.include.collection.list: empty = all captured collections. */
static bool include_matches(const struct include_list *inc, const char *ns)
{
    if (inc->items->count == 0)
        return true;
    for (size_t i = 0; i < inc->items->count; i++) {
        if (inc->literal) {
            if (strcmp(inc->items->items[i], ns) == 0)
                return true;
        } else if (inc->res[i] != NULL) {
            pcre2_match_data *md = pcre2_match_data_create_from_pattern(inc->res[i], NULL);
            int rc = pcre2_match(inc->res[i], (PCRE2_SPTR)ns, strlen(ns), 0, 0, md, NULL);
            pcre2_match_data_free(md);
            if (rc >= 0)
                return true;
        }
    }
    return false;
}

static int coll_cmp(const void *a, const void *b)
{
    const struct snapshot_coll *x = a, *y = b;
    int c = strcmp(x->coll, y->coll); /* Debezium sorts by collection name only */
    return c != 0 ? c : strcmp(x->db, y->db);
}

static bool plan_add(struct snapshot_plan *plan, size_t *cap, mongoc_client_t *client,
                     const struct mcdc_config *cfg, const char *db, const char *coll,
                     struct mcdc_error *err)
{
    struct snapshot_coll *c;
    char ns[512];
    mongoc_collection_t *mc;
    bson_error_t error;

    if (plan->count == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        plan->colls = xrealloc(plan->colls, *cap * sizeof *plan->colls);
    }
    c = &plan->colls[plan->count];
    memset(c, 0, sizeof *c);
    c->db = xstrdup(db);
    c->coll = xstrdup(coll);
    bson_init(&c->filter);
    plan->count++;
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    for (size_t i = 0; i < cfg->snapshot_filter_override_count; i++) {
        const struct mcdc_filter_override *o = &cfg->snapshot_filter_overrides[i];
        if (strcmp(o->ns, ns) != 0)
            continue;
        bson_destroy(&c->filter);
        if (!bson_init_from_json(&c->filter, o->query, -1, &error)) {
            bson_init(&c->filter);
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                                  "snapshot.collection.filter.overrides.%s: %s", ns, error.message);
        }
    }
    mc = mongoc_client_get_collection(client, db, coll);
    c->estimated = mongoc_collection_estimated_document_count(mc, NULL, NULL, NULL, &error);
    mongoc_collection_destroy(mc);
    return true;
}

bool snapshot_plan(mongoc_client_t *client, const struct mcdc_config *cfg,
                   const struct encoder *enc, struct snapshot_plan **out,
                   struct resume_failure *fail, struct mcdc_error *err)
{
    struct snapshot_plan *plan = xcalloc(1, sizeof *plan);
    struct include_list inc;
    size_t cap = 0;
    bson_error_t error;
    char **dbs = NULL;
    bool ok = false;

    if (!include_compile(cfg, &inc, err))
        goto cleanup;
    dbs = mongoc_client_get_database_names_with_opts(client, NULL, &error);
    if (dbs == NULL) {
        capture_failure_from(&error, NULL, fail, err);
        goto cleanup;
    }
    for (size_t d = 0; dbs[d] != NULL; d++) {
        mongoc_database_t *mdb;
        char **colls;
        if (strcmp(dbs[d], "admin") == 0 || strcmp(dbs[d], "config") == 0 ||
            strcmp(dbs[d], "local") == 0)
            continue;
        mdb = mongoc_client_get_database(client, dbs[d]);
        colls = mongoc_database_get_collection_names_with_opts(mdb, NULL, &error);
        mongoc_database_destroy(mdb);
        if (colls == NULL) {
            capture_failure_from(&error, NULL, fail, err);
            goto cleanup;
        }
        for (size_t c = 0; colls[c] != NULL; c++) {
            char ns[512];
            snprintf(ns, sizeof ns, "%s.%s", dbs[d], colls[c]);
            if (strncmp(colls[c], "system.", 7) == 0 || !encoder_captures(enc, dbs[d], colls[c]) ||
                !include_matches(&inc, ns))
                continue;
            if (!plan_add(plan, &cap, client, cfg, dbs[d], colls[c], err)) {
                bson_strfreev(colls);
                goto cleanup;
            }
        }
        bson_strfreev(colls);
    }
    if (plan->count > 1)
        qsort(plan->colls, plan->count, sizeof *plan->colls, coll_cmp);
    *out = plan;
    plan = NULL;
    ok = true;
cleanup:
    bson_strfreev(dbs);
    include_free(&inc);
    snapshot_plan_free(plan);
    return ok;
}

void snapshot_plan_free(struct snapshot_plan *plan)
{
    if (plan == NULL)
        return;
    for (size_t i = 0; i < plan->count; i++) {
        free(plan->colls[i].db);
        free(plan->colls[i].coll);
        bson_destroy(&plan->colls[i].filter);
    }
    free(plan->colls);
    free(plan);
}

/* ---- readers and queue ---- */

struct snapshot {
    const struct mcdc_config *cfg;
    mongoc_client_pool_t *pool;
    struct snapshot_plan *plan;
    const char *rs;
    const volatile bool *stop;

    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    struct snapshot_doc *head, *tail;
    size_t queued, queued_bytes;
    size_t next_coll; /* next collection to hand to a reader */
    size_t readers_alive;
    bool quit; /* snapshot_destroy: readers leave */
    bool failed;
    struct resume_failure fail;
    struct mcdc_error err;
    int64_t total_done;

    pthread_t *threads;
    size_t nthreads;
    int64_t started_ms, last_progress_ms;
};

struct reader_arg {
    struct snapshot *snap;
    size_t index;
};

static void reader_fail(struct snapshot *s, const bson_error_t *error, const bson_t *reply,
                        const struct snapshot_coll *c)
{
    pthread_mutex_lock(&s->lock);
    if (!s->failed) {
        s->failed = true;
        capture_failure_from(error, reply, &s->fail, &s->err);
        mcdc_error_prefix(&s->err, "snapshot of %s.%s", c->db, c->coll);
        s->fail.message = s->err.msg;
    }
    pthread_cond_broadcast(&s->not_empty);
    pthread_cond_broadcast(&s->not_full);
    pthread_mutex_unlock(&s->lock);
}

/* Queues d; waits while the queue is full. Returns false when the snapshot is ending. */
static bool reader_push(struct snapshot *s, struct snapshot_doc *d, struct snapshot_coll *c)
{
    size_t len = d->doc->len;
    pthread_mutex_lock(&s->lock);
    while (!s->quit && !s->failed && !__atomic_load_n(s->stop, __ATOMIC_ACQUIRE) &&
           (s->queued >= QUEUE_MAX_DOCS || s->queued_bytes + len > QUEUE_MAX_BYTES) &&
           s->queued > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->not_full, &s->lock, &ts);
    }
    if (s->quit || s->failed || __atomic_load_n(s->stop, __ATOMIC_ACQUIRE)) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    d->next = NULL;
    if (s->tail != NULL)
        s->tail->next = d;
    else
        s->head = d;
    s->tail = d;
    s->queued++;
    s->queued_bytes += len;
    c->done++;
    s->total_done++;
    pthread_cond_signal(&s->not_empty);
    pthread_mutex_unlock(&s->lock);
    return true;
}

static bool reader_copy(struct snapshot *s, mongoc_client_t *client, struct snapshot_coll *c)
{
    mongoc_collection_t *mc = mongoc_client_get_collection(client, c->db, c->coll);
    bson_t opts = BSON_INITIALIZER;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    const bson_t *reply = NULL;
    bson_error_t error;
    bool ok = true;

    if (s->cfg->snapshot_fetch_size > 0)
        BSON_APPEND_INT32(&opts, "batchSize", (int32_t)s->cfg->snapshot_fetch_size);
    cur = mongoc_collection_find_with_opts(mc, &c->filter, &opts, NULL);
    while (mongoc_cursor_next(cur, &doc)) {
        struct snapshot_doc *d = xcalloc(1, sizeof *d);
        d->doc = bson_copy(doc);
        d->db = c->db;
        d->coll = c->coll;
        if (!reader_push(s, d, c)) {
            snapshot_doc_free(d);
            ok = false;
            break;
        }
    }
    if (ok && mongoc_cursor_error_document(cur, &error, &reply)) {
        reader_fail(s, &error, reply, c);
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(&opts);
    mongoc_collection_destroy(mc);
    return ok;
}

static void *reader_main(void *p)
{
    struct reader_arg *a = p;
    struct snapshot *s = a->snap;
    char name[16];
    mongoc_client_t *client;

    snprintf(name, sizeof name, "%.9s-snap%zu", s->rs, a->index);
    pthread_setname_np(pthread_self(), name);
    mcdc_log_set_component(s->rs);
    client = mongoc_client_pool_pop(s->pool);
    for (;;) {
        struct snapshot_coll *c = NULL;
        pthread_mutex_lock(&s->lock);
        if (!s->quit && !s->failed && !__atomic_load_n(s->stop, __ATOMIC_ACQUIRE) &&
            s->next_coll < s->plan->count) {
            c = &s->plan->colls[s->next_coll++];
            c->started_ms = now_ms();
        }
        pthread_mutex_unlock(&s->lock);
        if (c == NULL)
            break;
        LOG_INFO("snapshot of %s.%s started (about %lld documents)", c->db, c->coll,
                 (long long)c->estimated);
        if (!reader_copy(s, client, c))
            break;
        pthread_mutex_lock(&s->lock);
        c->finished_ms = now_ms();
        pthread_mutex_unlock(&s->lock);
        LOG_INFO("snapshot of %s.%s finished: %lld documents", c->db, c->coll, (long long)c->done);
    }
    mongoc_client_pool_push(s->pool, client);
    pthread_mutex_lock(&s->lock);
    s->readers_alive--;
    pthread_cond_broadcast(&s->not_empty);
    pthread_mutex_unlock(&s->lock);
    free(a);
    return NULL;
}

struct snapshot *snapshot_start(mongoc_client_pool_t *pool, const struct mcdc_config *cfg,
                                struct snapshot_plan *plan, const char *rs,
                                const volatile bool *stop)
{
    struct snapshot *s = xcalloc(1, sizeof *s);
    size_t n = cfg->snapshot_max_threads > 0 ? (size_t)cfg->snapshot_max_threads : 1;

    s->cfg = cfg;
    s->pool = pool;
    s->plan = plan;
    s->rs = rs;
    s->stop = stop;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->not_empty, NULL);
    pthread_cond_init(&s->not_full, NULL);
    if (n > plan->count)
        n = plan->count;
    s->threads = xcalloc(n ? n : 1, sizeof *s->threads);
    s->started_ms = s->last_progress_ms = now_ms();
    LOG_INFO("snapshot: %zu collections with %zu reader threads", plan->count, n);
    for (size_t i = 0; i < n; i++) {
        struct reader_arg *a = xmalloc(sizeof *a);
        a->snap = s;
        a->index = i + 1;
        pthread_mutex_lock(&s->lock);
        s->readers_alive++;
        pthread_mutex_unlock(&s->lock);
        if (pthread_create(&s->threads[s->nthreads], NULL, reader_main, a) != 0) {
            pthread_mutex_lock(&s->lock);
            s->readers_alive--;
            if (!s->failed) {
                s->failed = true;
                mcdc_error_set(&s->err, MCDC_ERR_INTERNAL, errno, "cannot start a snapshot reader");
                s->fail.domain = 0;
                s->fail.message = s->err.msg;
            }
            pthread_mutex_unlock(&s->lock);
            free(a);
            break;
        }
        s->nthreads++;
    }
    return s;
}

static void log_progress(struct snapshot *s, bool final)
{
    int64_t t = now_ms();
    for (size_t i = 0; i < s->plan->count; i++) {
        struct snapshot_coll *c = &s->plan->colls[i];
        int64_t end = c->finished_ms ? c->finished_ms : t;
        double secs = c->started_ms ? (double)(end - c->started_ms) / 1000.0 : 0.0;
        double rate = secs > 0 ? (double)c->done / secs : 0.0;
        if (final || c->started_ms == 0 || c->finished_ms != 0)
            continue;
        if (c->estimated > 0) {
            double pct = 100.0 * (double)c->done / (double)c->estimated;
            double eta =
                rate > 0 && c->estimated > c->done ? (double)(c->estimated - c->done) / rate : 0.0;
            LOG_INFO("snapshot progress %s.%s: %lld/%lld documents (%.1f%%), %.0f docs/s, ETA "
                     "%.0f s",
                     c->db, c->coll, (long long)c->done, (long long)c->estimated,
                     pct > 100.0 ? 100.0 : pct, rate, eta);
        } else {
            LOG_INFO("snapshot progress %s.%s: %lld documents (total unknown), %.0f docs/s", c->db,
                     c->coll, (long long)c->done, rate);
        }
    }
    if (final) {
        double secs = (double)(t - s->started_ms) / 1000.0;
        LOG_INFO("snapshot complete: %zu collections, %lld documents in %.1f s (%.0f docs/s)",
                 s->plan->count, (long long)s->total_done, secs,
                 secs > 0 ? (double)s->total_done / secs : 0.0);
    }
}

enum snapshot_status snapshot_next(struct snapshot *s, int timeout_ms, struct snapshot_doc **out,
                                   struct resume_failure *fail, struct mcdc_error *err)
{
    enum snapshot_status st;
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    while (s->head == NULL && !s->failed && s->readers_alive > 0) {
        if (pthread_cond_timedwait(&s->not_empty, &s->lock, &ts) == ETIMEDOUT)
            break;
    }
    if (s->failed) {
        *fail = s->fail;
        *err = s->err;
        fail->message = err->msg;
        st = SNAPSHOT_FAILED;
    } else if (s->head != NULL) {
        *out = s->head;
        s->head = s->head->next;
        if (s->head == NULL)
            s->tail = NULL;
        s->queued--;
        s->queued_bytes -= (*out)->doc->len;
        (*out)->next = NULL;
        pthread_cond_signal(&s->not_full);
        st = SNAPSHOT_DOC;
    } else if (s->readers_alive == 0) {
        st = __atomic_load_n(s->stop, __ATOMIC_ACQUIRE) ? SNAPSHOT_WAIT : SNAPSHOT_DONE;
    } else {
        st = SNAPSHOT_WAIT;
    }
    if (st == SNAPSHOT_DONE)
        log_progress(s, true);
    else if (now_ms() - s->last_progress_ms >= PROGRESS_EVERY_MS) {
        s->last_progress_ms = now_ms();
        log_progress(s, false);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

void snapshot_doc_free(struct snapshot_doc *d)
{
    if (d == NULL)
        return;
    bson_destroy(d->doc);
    free(d);
}

int64_t snapshot_docs_done(struct snapshot *s)
{
    int64_t n;
    pthread_mutex_lock(&s->lock);
    n = s->total_done;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void snapshot_destroy(struct snapshot *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    s->quit = true;
    pthread_cond_broadcast(&s->not_full);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < s->nthreads; i++)
        pthread_join(s->threads[i], NULL);
    while (s->head != NULL) {
        struct snapshot_doc *d = s->head;
        s->head = d->next;
        snapshot_doc_free(d);
    }
    free(s->threads);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->not_empty);
    pthread_cond_destroy(&s->not_full);
    snapshot_plan_free(s->plan);
    free(s);
}
