/*
 * snapshot/incremental_job: a chunk read done away from the task's thread
 * (incremental.h, "Reading in the background"). incr_job_begin copies what
 * the read needs and puts the engine in INCR_READING; while the read runs
 * the stream goes on, and the changes of the chunk's collection it carries
 * are remembered (incr_pending_event); incr_job_attach then applies the
 * result: the read rows become the window, minus the rows those changes
 * supersede (debezium-format.md §5.4: a streamed change of a buffered key
 * is newer than its row).
 */
#include "snapshot/incremental_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/uuid.h"
#include "common/xalloc.h"
#include "snapshot/hashkey.h"

void incr_pending_free(struct incr *s)
{
    for (size_t i = 0; i < s->npending; i++)
        bson_destroy(s->pending[i].key);
    free(s->pending);
    s->pending = NULL;
    s->npending = s->pending_cap = s->pending_bytes = 0;
    s->pending_overflow = false;
    s->has_seen = false;
    s->at_known = s->passed_t = false;
    s->win_opened = s->win_close_seen = false;
}

static bool time_after(uint32_t sec, uint32_t inc, uint32_t at_sec, uint32_t at_inc)
{
    return sec > at_sec || (sec == at_sec && inc > at_inc);
}

void incr_pending_event(struct incr *s, bool same_ns, const bson_t *key, bool has_time,
                        uint32_t sec, uint32_t inc)
{
    struct incr_pending *p;
    bson_iter_t id;

    if (s->cluster_time && has_time &&
        (!s->has_seen || time_after(sec, inc, s->seen_sec, s->seen_inc))) {
        s->has_seen = true;
        s->seen_sec = sec;
        s->seen_inc = inc;
    }
    if (!same_ns || key == NULL || s->pending_overflow)
        return;
    /* markers: only changes inside the window (after the open marker) count;
     * cluster time: which are after T is known once the read is done. */
    if (s->cluster_time ? !has_time : !s->win_opened)
        return;
    if (!bson_iter_init_find(&id, key, "_id"))
        return;
    if (s->pending_bytes + key->len > INCR_PENDING_MAX_BYTES) {
        s->pending_overflow = true;
        return;
    }
    if (s->npending == s->pending_cap) {
        s->pending_cap = s->pending_cap ? s->pending_cap * 2 : 64;
        s->pending = xrealloc(s->pending, s->pending_cap * sizeof *s->pending);
    }
    p = &s->pending[s->npending++];
    p->key = bson_new();
    bson_append_iter(p->key, "_id", 3, &id);
    p->has_time = has_time;
    p->sec = sec;
    p->inc = inc;
    s->pending_bytes += p->key->len;
}

struct incr_job *incr_job_begin(struct incr *s, const bson_t *owned)
{
    struct incr_job *j;
    const struct incr_item *it;

    if (s->state != INCR_READY || s->count == 0)
        return NULL;
    it = &s->queue[0];
    j = xzalloc_aligned(_Alignof(struct incr_job), sizeof *j); /* bson_t members */
    j->cfg = s->cfg;
    j->db = xstrdup(it->db);
    j->coll = xstrdup(it->coll);
    j->ns = xstrdup(it->ns);
    bson_copy_to(it->cond, &j->cond);
    if (owned != NULL)
        bson_copy_to(owned, &j->owned);
    else
        bson_init(&j->owned);
    j->hashed_owned = hashkey_is_filter(owned);
    bson_copy_to(&s->last_key, &j->last_key);
    bson_copy_to(&s->max_key, &j->max_key);
    bson_init(&j->chunk_end);
    j->cluster_time = s->cluster_time;
    j->need_estimate = s->estimated < 0;
    j->estimated = -1;
    j->bracket = s->bracket;
    j->result = INCR_READ_FAILED;
    mcdc_uuid_v4(j->chunk_id);

    incr_window_clear(s);
    incr_pending_free(s);
    memcpy(s->chunk_id, j->chunk_id, sizeof s->chunk_id);
    s->state = INCR_READING;
    return j;
}

void incr_job_at(struct incr *s, struct incr_job *j, uint32_t sec, uint32_t inc)
{
    if (s->state != INCR_READING || strcmp(s->chunk_id, j->chunk_id) != 0 || !s->cluster_time)
        return;
    j->has_at = true;
    j->at_sec = s->at_sec = sec;
    j->at_inc = s->at_inc = inc;
    s->at_known = true;
}

void incr_job_free(struct incr_job *j)
{
    if (j == NULL)
        return;
    for (size_t i = 0; i < j->ndocs; i++)
        if (j->docs[i] != NULL)
            bson_destroy(j->docs[i]);
    free(j->docs);
    free(j->db);
    free(j->coll);
    free(j->ns);
    bson_destroy(&j->cond);
    bson_destroy(&j->owned);
    bson_destroy(&j->last_key);
    bson_destroy(&j->max_key);
    bson_destroy(&j->chunk_end);
    free(j);
}

void incr_job_abandon(struct incr *s)
{
    if (s->state != INCR_READING)
        return;
    incr_pending_free(s);
    s->state = INCR_READY;
    s->chunk_id[0] = '\0'; /* its markers, if any reach the stream, are no one's */
}

bool incr_close_waits(const struct incr *s)
{
    return s->state == INCR_READING && s->win_close_seen;
}

/* Drops the rows the remembered changes supersede (all of them in a marker
 * window: they are after its open marker; after T in a cluster-time one). */
static void drop_pending(struct incr *s)
{
    for (size_t i = 0; i < s->npending; i++) {
        const struct incr_pending *p = &s->pending[i];
        if (!s->cluster_time || (p->has_time && time_after(p->sec, p->inc, s->at_sec, s->at_inc)))
            incr_drop_key(s, p->key);
    }
}

enum incr_read incr_job_attach(struct incr *s, struct incr_job *j, struct mcdc_error *err)
{
    enum incr_read r = j->result;

    if (s->state != INCR_READING || strcmp(s->chunk_id, j->chunk_id) != 0) {
        incr_job_free(j); /* a read the engine no longer waits for */
        return INCR_READ_DISCARDED;
    }
    if (j->need_estimate && j->estimated >= 0)
        s->estimated = j->estimated;
    if (bson_empty(&s->max_key) && !bson_empty(&j->max_key)) {
        bson_destroy(&s->max_key);
        bson_copy_to(&j->max_key, &s->max_key);
        s->offset_dirty = true;
    }
    s->state = INCR_READY;
    if (r == INCR_READ_WINDOW && s->pending_overflow) {
        LOG_WARN("incremental snapshot of %s: more than %u bytes of keys changed while a chunk "
                 "was read; the chunk is read again",
                 s->queue[0].ns, (unsigned)INCR_PENDING_MAX_BYTES);
        r = INCR_READ_DISCARDED;
    }
    if (r != INCR_READ_WINDOW) {
        if (r == INCR_READ_FAILED && err != NULL)
            *err = j->err;
        incr_pending_free(s);
        incr_job_free(j);
        if (r == INCR_READ_COLL_DONE) {
            s->stop_current = false;
            incr_collection_finished(s);
        } else if (s->stop_current) {
            /* stop-snapshot arrived during the read: the collection stops now */
            s->stop_current = false;
            LOG_INFO("incremental snapshot of %s stopped (%lld rows sent)", s->queue[0].ns,
                     (long long)s->sent);
            incr_pop_current(s);
            r = INCR_READ_DISCARDED;
        }
        return r;
    }
    for (size_t i = 0; i < j->ndocs; i++) {
        incr_window_add(s, j->docs[i]); /* taken */
        j->docs[i] = NULL;
    }
    bson_reinit(&s->chunk_end);
    bson_concat(&s->chunk_end, &j->chunk_end);
    s->bracket = j->bracket;
    s->at_sec = j->at_sec;
    s->at_inc = j->at_inc;
    drop_pending(s);
    if (!s->cluster_time)
        s->state = !s->win_opened ? INCR_WAIT_OPEN : s->win_close_seen ? INCR_CLOSED : INCR_OPEN;
    else if (s->passed_t ||
             (s->has_seen && time_after(s->seen_sec, s->seen_inc, s->at_sec, s->at_inc)))
        s->state = INCR_CLOSED; /* the stream passed T during the read */
    else
        s->state = INCR_WAIT_TIME;
    incr_pending_free(s);
    incr_job_free(j);
    return INCR_READ_WINDOW;
}
