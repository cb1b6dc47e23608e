/*
 * snapshot_reader: the reader threads of an initial snapshot
 * (debezium-format.md §5.2). Each takes the next part (a collection or one
 * `_id` range of it), reads it with read concern majority after the
 * snapshot's start time, and hands the documents over in batches to the
 * bounded queue the task thread takes from (snapshot.c); the first failure
 * is kept and stops every reader.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "snapshot/snapshot_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capture/capture.h"
#include "capture/hello.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "snapshot/hashkey.h"
#include "snapshot/keyrange.h"
#include "snapshot/split.h"

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

/* Appends d to b. */
static void batch_add(struct snapshot_batch *b, struct snapshot_doc *d)
{
    if (b->tail != NULL)
        b->tail->next = d;
    else
        b->head = d;
    b->tail = d;
    b->n++;
    if (d->doc != NULL)
        b->bytes += d->doc->len;
    else
        b->markers++;
}

bool snapshot_batch_push(struct snapshot *s, struct snapshot_batch *b, struct snapshot_coll *c)
{
    pthread_mutex_lock(&s->lock);
    while (!s->quit && !s->failed && !atomic_load(s->stop) &&
           (s->queued + b->n > QUEUE_MAX_DOCS || s->queued_bytes + b->bytes > QUEUE_MAX_BYTES) &&
           s->queued > 0) {
        struct timespec ts = mcdc_clock_deadline(CLOCK_REALTIME, 200);
        pthread_cond_timedwait(&s->not_full, &s->lock, &ts);
    }
    if (s->quit || s->failed || atomic_load(s->stop)) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    if (s->tail != NULL)
        s->tail->next = b->head;
    else
        s->head = b->head;
    s->tail = b->tail;
    s->queued += b->n;
    s->queued_bytes += b->bytes;
    c->done += (int64_t)(b->n - b->markers);
    s->total_done += (int64_t)(b->n - b->markers);
    pthread_cond_signal(&s->not_empty);
    pthread_mutex_unlock(&s->lock);
    b->head = b->tail = NULL;
    b->n = b->bytes = b->markers = 0;
    return true;
}

bool snapshot_batch_offer(struct snapshot *s, struct snapshot_batch *b, struct snapshot_coll *c,
                          struct snapshot_doc *d)
{
    batch_add(b, d);
    if (b->n >= BATCH_MAX_DOCS || b->bytes >= BATCH_MAX_BYTES ||
        atomic_load_explicit(&s->starving, memory_order_relaxed))
        return snapshot_batch_push(s, b, c);
    return true;
}

void snapshot_batch_free(struct snapshot_batch *b)
{
    while (b->head != NULL) {
        struct snapshot_doc *d = b->head;
        b->head = d->next;
        snapshot_doc_free(d);
    }
    b->tail = NULL;
    b->n = b->bytes = b->markers = 0;
}

/*
 * find on c with filter at readConcern majority, after the plan's start time
 * when it has one (snapshot.h): majority-committed documents only, since a
 * snapshot record is published at once and a w:1 write past the commit point
 * can still be rolled back (MongoDB's read concern "majority"; replication
 * README, "Rollback"). The start time goes in through a causally consistent
 * session advanced to it: the driver then adds afterClusterTime to the read
 * concern (causal consistency spec), and the find's getMores run in the same
 * session. *session is that session (NULL when none), to destroy after the
 * cursor. Returns the cursor (caller destroys), or NULL after reader_fail.
 */
static mongoc_cursor_t *majority_find(struct snapshot *s, mongoc_client_t *client,
                                      const struct snapshot_coll *c, const bson_t *filter,
                                      mongoc_client_session_t **session)
{
    mongoc_collection_t *mc;
    mongoc_cursor_t *cur;
    bson_t opts = BSON_INITIALIZER;
    bson_error_t error;

    *session = NULL;
    if (s->cfg->snapshot_fetch_size > 0)
        BSON_APPEND_INT32(&opts, "batchSize", (int32_t)s->cfg->snapshot_fetch_size);
    BCON_APPEND(&opts, "readConcern", "{", "level", BCON_UTF8("majority"), "}");
    if (s->plan->resumable) /* progress is "every key up to the last one handed over" */
        BCON_APPEND(&opts, "sort", "{", "_id", BCON_INT32(1), "}");
    if (s->plan->has_after) {
        mongoc_session_opt_t *so = mongoc_session_opts_new();
        mongoc_session_opts_set_causal_consistency(so, true);
        *session = mongoc_client_start_session(client, so, &error);
        mongoc_session_opts_destroy(so);
        if (*session != NULL) {
            mongoc_client_session_advance_operation_time(*session, s->plan->after_sec,
                                                         s->plan->after_inc);
            if (!mongoc_client_session_append(*session, &opts, &error)) {
                mongoc_client_session_destroy(*session);
                *session = NULL;
            }
        }
        if (*session == NULL) {
            bson_t empty = BSON_INITIALIZER;
            reader_fail(s, &error, &empty, c);
            bson_destroy(&opts);
            return NULL;
        }
    }
    mc = mongoc_client_get_collection(client, c->db, c->coll);
    cur = mongoc_collection_find_with_opts(mc, filter, &opts, NULL);
    mongoc_collection_destroy(mc);
    bson_destroy(&opts);
    return cur;
}

static bool reader_copy(struct snapshot *s, mongoc_client_t *client, struct snapshot_part *p)
{
    struct snapshot_coll *c = p->coll;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    const bson_t *reply = NULL;
    bson_error_t error;
    bool ok = true;
    struct snapshot_batch b = {NULL, NULL, 0, 0, 0};

    mongoc_client_session_t *session;

    cur = majority_find(s, client, c, p->filter, &session);
    if (cur == NULL)
        return false;
    while (mongoc_cursor_next(cur, &doc)) {
        struct snapshot_doc *d;
        if (c->owned != NULL && !hashkey_owns(c->owned, doc)) {
            /* an orphan of a hashed-sharded collection (the find could not
             * exclude it: snapshot/hashkey.h) */
            pthread_mutex_lock(&s->lock);
            c->orphans++;
            pthread_mutex_unlock(&s->lock);
            continue;
        }
        d = xcalloc(1, sizeof *d);
        d->doc = bson_copy(doc);
        d->db = c->db;
        d->coll = c->coll;
        d->entry = p->entry;
        if (!snapshot_batch_offer(s, &b, c, d)) {
            ok = false;
            break;
        }
    }
    /* the tail of the collection (or range), before it counts as finished */
    if (ok && b.n > 0 && !snapshot_batch_push(s, &b, c))
        ok = false;
    snapshot_batch_free(&b);
    if (ok && mongoc_cursor_error_document(cur, &error, &reply)) {
        reader_fail(s, &error, reply, c);
        ok = false;
    }
    if (ok && s->plan->resumable) {
        /* the part's end, after its last document (snapshot_next) */
        struct snapshot_doc *m = xcalloc(1, sizeof *m);
        m->db = c->db;
        m->coll = c->coll;
        m->entry = p->entry;
        batch_add(&b, m);
        if (!snapshot_batch_push(s, &b, c)) {
            snapshot_batch_free(&b);
            ok = false;
        }
    }
    mongoc_cursor_destroy(cur);
    if (session != NULL)
        mongoc_client_session_destroy(session);
    return ok;
}

void *snapshot_reader_main(void *p)
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
        struct snapshot_part *part = NULL;
        struct snapshot_coll *c;
        bool first = false, last = false;
        int64_t done, orphans;
        pthread_mutex_lock(&s->lock);
        if (!s->quit && !s->failed && !atomic_load(s->stop) &&
            s->next_part < s->nparts) {
            part = &s->parts[s->next_part++];
            if (part->coll->started_ms == 0) {
                part->coll->started_ms = mcdc_clock_mono_ms();
                first = true;
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (part == NULL)
            break;
        c = part->coll;
        if (first)
            LOG_INFO("snapshot of %s.%s started (about %lld documents)", c->db, c->coll,
                     (long long)c->estimated);
        if (c->parts > 1)
            LOG_DEBUG("snapshot of %s.%s: _id range %zu/%zu started", c->db, c->coll, part->index,
                      c->parts);
        if (!reader_copy(s, client, part))
            break;
        pthread_mutex_lock(&s->lock);
        if (--c->parts_left == 0) {
            atomic_store_explicit(&c->finished_ms, mcdc_clock_mono_ms(), memory_order_relaxed);
            last = true;
        }
        done = c->done;
        orphans = c->orphans;
        pthread_mutex_unlock(&s->lock);
        if (last)
            LOG_INFO("snapshot of %s.%s finished: %lld documents", c->db, c->coll, (long long)done);
        if (last && c->owned != NULL)
            LOG_INFO("snapshot of %s.%s: %lld orphans dropped (hashed shard key outside the chunks "
                     "%s owns)",
                     c->db, c->coll, (long long)orphans, s->rs);
    }
    mongoc_client_pool_push(s->pool, client);
    pthread_mutex_lock(&s->lock);
    s->readers_alive--;
    pthread_cond_broadcast(&s->not_empty);
    pthread_mutex_unlock(&s->lock);
    free(a);
    return NULL;
}
