/*
 * snapshot: initial snapshot start point, the parts (collections and `_id`
 * ranges) given to parallel readers, and the task thread's side of the
 * bounded hand-over queue (debezium-format.md §5.2). The readers are in
 * snapshot_reader.c, the collection plan in plan.c.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "snapshot/snapshot.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/capture.h"
#include "capture/hello.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "snapshot/hashkey.h"
#include "snapshot/keyrange.h"
#include "snapshot/snapshot_internal.h"
#include "snapshot/split.h"

/* The task thread reports what it consumed of a reader's batch
 * (snapshot_internal.h) back every CONSUMED_REPORT_DOCS. */
#define CONSUMED_REPORT_DOCS 64
#define PROGRESS_EVERY_MS 10000

/* ---- start position ---- */

static bool start_from_hello(mongoc_client_t *client, struct mcdc_position *pos,
                             struct resume_failure *fail, struct mcdc_error *err)
{
    struct mcdc_hello h;
    bson_error_t error;
    bson_iter_t it;

    if (!mcdc_hello_run(client, 0, &h, &error)) {
        capture_failure_from(&error, &h.reply, fail, err);
        mcdc_hello_destroy(&h);
        return false;
    }
    if (bson_iter_init_find(&it, &h.reply, "operationTime") && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        uint32_t t, i;
        bson_iter_timestamp(&it, &t, &i);
        pos->sec = t;
        pos->ord = i;
    }
    mcdc_hello_destroy(&h);
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

/* ---- parts and the task thread's side of the queue ---- */

/* Appends one part of c to s->parts: the range (lo, hi] (NULL: open) read
 * after the key after (NULL: from lo), or the whole collection when whole.
 * With a progress tracker the range is its entry, not started or, with
 * after, partial. */
static bool part_add(struct snapshot *s, size_t *cap, struct snapshot_coll *c, bool whole,
                     const bson_value_t *lo, const bson_value_t *after, const bson_value_t *hi,
                     struct mcdc_error *err)
{
    struct snapshot_part *p;
    if (s->nparts == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        s->parts = xrealloc(s->parts, *cap * sizeof *s->parts);
    }
    p = &s->parts[s->nparts];
    p->coll = c;
    p->index = ++c->parts;
    p->filter = bson_new();
    if (whole && after == NULL) {
        bson_concat(p->filter, c->filter);
    } else if (!keyrange_span_filter(after != NULL ? after : lo, hi, c->filter, p->filter,
                                     err)) {
        bson_destroy(p->filter);
        c->parts--;
        return false;
    }
    if (s->progress != NULL) {
        char ns[512];
        snprintf(ns, sizeof ns, "%s.%s", c->db, c->coll);
        p->entry = progress_add(s->progress, ns, lo, hi,
                                after != NULL ? PROGRESS_PARTIAL : PROGRESS_NOT_STARTED, after);
    }
    s->nparts++;
    c->parts_left++;
    return true;
}

/* The parts of collection c: its `_id` ranges when it is large enough and sampling works,
 * else the collection whole. */
static void plan_parts(struct snapshot *s, size_t *cap, struct snapshot_coll *c, size_t threads)
{
    size_t want = split_parts(c->estimated, s->cfg->snapshot_split_min_docs, threads);
    struct mcdc_error err = MCDC_ERROR_INIT;
    bson_value_t *points = NULL;
    size_t npoints = 0, first = s->nparts;
    size_t entries = s->progress != NULL ? progress_count(s->progress) : 0;
    mongoc_client_t *client;
    bool ok;

    c->parts = c->parts_left = 0;
    if (want > 1) {
        client = mongoc_client_pool_pop(s->pool);
        ok = split_points(client, c->db, c->coll, want, &points, &npoints, &err);
        mongoc_client_pool_push(s->pool, client);
        if (!ok)
            LOG_WARN("snapshot of %s.%s is read by one thread: %s", c->db, c->coll, err.msg);
    }
    if (npoints > 0) {
        bool built = true;
        for (size_t i = 0; i <= npoints && built; i++)
            built = part_add(s, cap, c, false, i > 0 ? &points[i - 1] : NULL, NULL,
                             i < npoints ? &points[i] : NULL, &err);
        if (built) {
            LOG_INFO("snapshot of %s.%s: about %lld documents split into %zu _id ranges", c->db,
                     c->coll, (long long)c->estimated, c->parts);
        } else {
            LOG_WARN("snapshot of %s.%s is read by one thread: %s", c->db, c->coll, err.msg);
            while (s->nparts > first)
                bson_destroy(s->parts[--s->nparts].filter);
            if (s->progress != NULL)
                progress_truncate(s->progress, entries);
            c->parts = c->parts_left = 0;
        }
    }
    split_points_free(points, npoints);
    if (c->parts == 0)
        part_add(s, cap, c, true, NULL, NULL, NULL, &err);
}

/* Resumable plans: the parts of c from an earlier attempt's progress (the
 * plan's resume, checked by snapshot_resume_check): nothing for a finished
 * collection, its unfinished pieces for one with ranges, else plan_parts. */
static void resume_parts(struct snapshot *s, size_t *cap, struct snapshot_coll *c, size_t threads)
{
    const struct snapshot_resume *r = s->plan->resume;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct progress_piece *pieces = NULL;
    size_t np = 0;
    char ns[512];

    snprintf(ns, sizeof ns, "%s.%s", c->db, c->coll);
    if (r == NULL || !snapshot_resume_names(r, ns) ||
        (!snapshot_resume_done(r, ns) && !snapshot_resume_pieces(r, ns, &pieces, &np, &err))) {
        plan_parts(s, cap, c, threads);
        return;
    }
    size_t first = s->nparts, entries = progress_count(s->progress);
    bool built = true;
    c->parts = c->parts_left = 0;
    for (size_t i = 0; i < np && built; i++) {
        const struct progress_piece *q = &pieces[i];
        if (q->state == PROGRESS_DONE)
            progress_add(s->progress, ns, q->lo, q->hi, PROGRESS_DONE, NULL);
        else
            built = part_add(s, cap, c, q->lo == NULL && q->hi == NULL, q->lo, q->after, q->hi,
                             &err);
    }
    free(pieces);
    if (!built) {
        /* a range filter could not be built (an internal error): the
         * collection is copied whole again rather than counted done */
        LOG_WARN("snapshot of %s.%s is copied again from its start: %s", c->db, c->coll,
                 err.msg);
        while (s->nparts > first)
            bson_destroy(s->parts[--s->nparts].filter);
        progress_truncate(s->progress, entries);
        plan_parts(s, cap, c, threads);
        return;
    }
    if (c->parts == 0) {
        /* copied completely before (its ranges all done) */
        progress_add_done_coll(s->progress, ns);
        atomic_store_explicit(&c->finished_ms, mcdc_clock_mono_ms(), memory_order_relaxed);
    } else {
        LOG_INFO("snapshot of %s.%s resumes in %zu _id ranges", c->db, c->coll, c->parts);
    }
}

struct snapshot *snapshot_start(mongoc_client_pool_t *pool, const struct mcdc_config *cfg,
                                struct snapshot_plan *plan, const char *rs,
                                const atomic_bool *stop)
{
    struct snapshot *s = xcalloc(1, sizeof *s);
    size_t n = cfg->snapshot_max_threads > 0 ? (size_t)cfg->snapshot_max_threads : 1;
    size_t threads = n, cap = 0;

    s->cfg = cfg;
    s->pool = pool;
    s->plan = plan;
    s->rs = rs;
    s->stop = stop;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->not_empty, NULL);
    pthread_cond_init(&s->not_full, NULL);
    if (plan->resumable)
        s->progress = progress_new(plan->progress_base);
    for (size_t i = 0; i < plan->count; i++) {
        if (plan->resumable)
            resume_parts(s, &cap, &plan->colls[i], threads);
        else
            plan_parts(s, &cap, &plan->colls[i], threads);
    }
    if (n > s->nparts)
        n = s->nparts;
    s->threads = xcalloc(n ? n : 1, sizeof *s->threads);
    s->started_ms = s->last_progress_ms = mcdc_clock_mono_ms();
    if (s->nparts > plan->count)
        LOG_INFO("snapshot: %zu collections in %zu parts with %zu reader threads", plan->count,
                 s->nparts, n);
    else
        LOG_INFO("snapshot: %zu collections with %zu reader threads", plan->count, n);
    for (size_t i = 0; i < n; i++) {
        struct reader_arg *a = xmalloc(sizeof *a);
        a->snap = s;
        a->index = i + 1;
        pthread_mutex_lock(&s->lock);
        s->readers_alive++;
        pthread_mutex_unlock(&s->lock);
        if (pthread_create(&s->threads[s->nthreads], NULL, snapshot_reader_main, a) != 0) {
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
    int64_t t = mcdc_clock_mono_ms();
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

/* snapshot_next's step: the next item of the queue, a document or the end
 * marker of a part (doc NULL: snapshot_reader.c). */
static enum snapshot_status next_item(struct snapshot *s, int timeout_ms,
                                      struct snapshot_doc **out, struct resume_failure *fail,
                                      struct mcdc_error *err)
{
    enum snapshot_status st;
    struct timespec ts = mcdc_clock_deadline(CLOCK_REALTIME, timeout_ms);

    /* Fast path: the batch taken earlier, without the lock; what it
     * consumed is reported every CONSUMED_REPORT_DOCS (readers wait on it). */
    if (s->taken != NULL && s->consumed < CONSUMED_REPORT_DOCS) {
        *out = s->taken;
        s->taken = s->taken->next;
        (*out)->next = NULL;
        s->consumed++;
        s->consumed_bytes += (*out)->doc != NULL ? (*out)->doc->len : 0;
        return SNAPSHOT_DOC;
    }
    pthread_mutex_lock(&s->lock);
    if (s->consumed > 0) {
        s->queued -= s->consumed;
        s->queued_bytes -= s->consumed_bytes;
        s->consumed = s->consumed_bytes = 0;
        pthread_cond_broadcast(&s->not_full);
    }
    while (s->taken == NULL && s->head == NULL && !s->failed && s->readers_alive > 0) {
        atomic_store_explicit(&s->starving, true, memory_order_relaxed);
        if (pthread_cond_timedwait(&s->not_empty, &s->lock, &ts) == ETIMEDOUT)
            break;
    }
    atomic_store_explicit(&s->starving, false, memory_order_relaxed);
    if (s->taken == NULL && s->head != NULL) {
        /* take the whole queue; it stays counted in queued until consumed */
        s->taken = s->head;
        s->head = s->tail = NULL;
    }
    if (s->failed) {
        *fail = s->fail;
        *err = s->err;
        fail->message = err->msg;
        st = SNAPSHOT_FAILED;
    } else if (s->taken != NULL) {
        *out = s->taken;
        s->taken = s->taken->next;
        (*out)->next = NULL;
        s->consumed++;
        s->consumed_bytes += (*out)->doc != NULL ? (*out)->doc->len : 0;
        st = SNAPSHOT_DOC;
    } else if (s->readers_alive == 0) {
        st = atomic_load(s->stop) ? SNAPSHOT_WAIT : SNAPSHOT_DONE;
    } else {
        st = SNAPSHOT_WAIT;
    }
    if (st == SNAPSHOT_DONE)
        log_progress(s, true);
    else if (mcdc_clock_mono_ms() - s->last_progress_ms >= PROGRESS_EVERY_MS) {
        s->last_progress_ms = mcdc_clock_mono_ms();
        log_progress(s, false);
    }
    pthread_mutex_unlock(&s->lock);
    return st;
}

enum snapshot_status snapshot_next(struct snapshot *s, int timeout_ms, struct snapshot_doc **out,
                                   struct resume_failure *fail, struct mcdc_error *err)
{
    enum snapshot_status st;

    /* An end marker follows the last document of its part: every document
     * of the part has been taken, and at most the newest taken one (held
     * back by the caller) is still to be emitted, so the part counts as
     * done for the records emitted from now on. */
    while ((st = next_item(s, timeout_ms, out, fail, err)) == SNAPSHOT_DOC && (*out)->doc == NULL) {
        if (s->progress != NULL)
            progress_finish(s->progress, (*out)->entry);
        free(*out);
        *out = NULL;
    }
    return st;
}

const char *snapshot_progress_json(struct snapshot *s, const struct snapshot_doc *d,
                                   size_t *shared)
{
    bson_iter_t it;

    if (s->progress == NULL)
        return NULL;
    /* a document without _id cannot be emitted (emit fails on it): no move */
    if (bson_iter_init_find(&it, d->doc, "_id"))
        progress_advance(s->progress, d->entry, bson_iter_value(&it));
    return progress_text(s->progress, shared);
}

void snapshot_doc_free(struct snapshot_doc *d)
{
    if (d == NULL)
        return;
    if (d->doc != NULL)
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

void snapshot_docs_progress(struct snapshot *s, int64_t *done, int64_t *remaining)
{
    int64_t left = 0;

    pthread_mutex_lock(&s->lock);
    *done = s->total_done;
    for (size_t i = 0; i < s->plan->count; i++) {
        const struct snapshot_coll *c = &s->plan->colls[i];
        if (c->finished_ms != 0)
            continue;
        if (c->estimated < 0) {
            left = -1;
            break;
        }
        if (c->estimated > c->done)
            left += c->estimated - c->done;
    }
    pthread_mutex_unlock(&s->lock);
    *remaining = left;
}

bool snapshot_coll_count(mongoc_client_t *client, struct snapshot_coll *c, int64_t max_time_ms)
{
    mongoc_collection_t *mc;
    bson_t opts = BSON_INITIALIZER;
    bson_error_t error;
    int64_t n;

    if (c->owned != NULL)
        return false; /* the server cannot apply a hashed-key filter */
    mc = mongoc_client_get_collection(client, c->db, c->coll);
    BSON_APPEND_INT64(&opts, "maxTimeMS", max_time_ms);
    n = mongoc_collection_count_documents(mc, c->filter, &opts, NULL, NULL, &error);
    mongoc_collection_destroy(mc);
    bson_destroy(&opts);
    if (n < 0)
        return false;
    c->estimated = n;
    return true;
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
    while (s->taken != NULL) {
        struct snapshot_doc *d = s->taken;
        s->taken = d->next;
        snapshot_doc_free(d);
    }
    while (s->head != NULL) {
        struct snapshot_doc *d = s->head;
        s->head = d->next;
        snapshot_doc_free(d);
    }
    free(s->threads);
    for (size_t i = 0; i < s->nparts; i++)
        bson_destroy(s->parts[i].filter);
    free(s->parts);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->not_empty);
    pthread_cond_destroy(&s->not_full);
    snapshot_plan_free(s->plan);
    progress_free(s->progress);
    free(s);
}
