/*
 * snapshot/incremental: state, queue, window and offsets of the incremental
 * snapshot engine (incremental.h; debezium-format.md §4.2, §5.4). The reads
 * are in incremental_read.c.
 */
#include "snapshot/incremental_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

#define PROGRESS_LOG_MS 10000

struct incr *incr_new(const struct mcdc_config *cfg, const char *task, bool cluster_time)
{
    struct incr *s = xzalloc_aligned(_Alignof(struct incr), sizeof *s); /* bson_t members */
    s->cfg = cfg;
    snprintf(s->task, sizeof s->task, "%s", task ? task : "");
    s->cluster_time = cluster_time;
    bson_init(&s->last_key);
    bson_init(&s->max_key);
    bson_init(&s->chunk_end);
    s->estimated = -1;
    s->bracket = -1;
    s->offset_dirty = true;
    return s;
}

static void item_free(struct incr_item *it)
{
    free(it->db);
    free(it->coll);
    free(it->ns);
    free(it->signal_id);
    bson_destroy(it->cond);
}

void incr_destroy(struct incr *s)
{
    if (s == NULL)
        return;
    incr_window_clear(s);
    incr_pending_free(s);
    for (size_t i = 0; i < s->count; i++)
        item_free(&s->queue[i]);
    free(s->queue);
    free(s->slots);
    bson_destroy(&s->last_key);
    bson_destroy(&s->max_key);
    bson_destroy(&s->chunk_end);
    free(s->offset_json);
    free(s->colls_member);
    free(s);
}

enum incr_state incr_state(const struct incr *s)
{
    return s->state;
}
bool incr_paused(const struct incr *s)
{
    return s->paused;
}
bool incr_uses_cluster_time(const struct incr *s)
{
    return s->cluster_time;
}
const char *incr_current(const struct incr *s)
{
    return s->count ? s->queue[0].ns : NULL;
}
const char *incr_db(const struct incr *s)
{
    return s->count ? s->queue[0].db : NULL;
}
const char *incr_coll(const struct incr *s)
{
    return s->count ? s->queue[0].coll : NULL;
}
int64_t incr_rows_sent(const struct incr *s)
{
    return s->sent;
}

const char *incr_signal_id(const struct incr *s)
{
    return s->count ? s->queue[0].signal_id : NULL;
}

bool incr_signal_queued(const struct incr *s, const char *signal_id)
{
    for (size_t i = 0; i < s->count; i++)
        if (!strcmp(s->queue[i].signal_id, signal_id))
            return true;
    return false;
}

void incr_push_item(struct incr *s, const char *db, const char *coll, const bson_t *cond,
                    const char *signal_id)
{
    struct incr_item *it;
    char ns[512];

    /* A collection already queued or being read is queued again, as
     * Debezium's queue (a LinkedList that addAll appends to): the signal
     * asked for it, the log and the STARTED notification say so, and its
     * condition may differ from the earlier request's. */
    snprintf(ns, sizeof ns, "%s.%s", db, coll);
    if (s->count == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->queue = xrealloc(s->queue, s->cap * sizeof *s->queue);
    }
    it = &s->queue[s->count++];
    it->db = xstrdup(db);
    it->coll = xstrdup(coll);
    it->ns = xstrdup(ns);
    it->signal_id = xstrdup(signal_id ? signal_id : "");
    it->cond = cond != NULL ? bson_copy(cond) : bson_new();
    s->queue_gen++;
    s->offset_dirty = true;
}

void incr_enqueue(struct incr *s, const char *db, const char *coll, const bson_t *cond,
                  const char *signal_id)
{
    incr_push_item(s, db, coll, cond, signal_id);
    if (s->state == INCR_IDLE && s->count > 0) {
        s->state = INCR_READY;
        s->sent = s->superseded = 0;
        s->estimated = -1;
        s->started_ms = s->last_log_ms = mcdc_clock_mono_ms();
    }
}

size_t incr_queued(const struct incr *s)
{
    return s->count;
}

void incr_drop_last(struct incr *s, size_t n)
{
    while (n-- > 0 && s->count > 0) {
        /* never the current collection while one of its windows is open */
        if (s->count == 1 && s->state != INCR_READY && s->state != INCR_IDLE)
            break;
        item_free(&s->queue[--s->count]);
        s->queue_gen++;
        s->offset_dirty = true;
    }
    if (s->count == 0) {
        s->state = INCR_IDLE;
        bson_reinit(&s->last_key);
        bson_reinit(&s->max_key);
        bson_reinit(&s->chunk_end);
        s->bracket = -1;
    }
}

void incr_pop_current(struct incr *s)
{
    if (s->count == 0)
        return;
    item_free(&s->queue[0]);
    memmove(&s->queue[0], &s->queue[1], (s->count - 1) * sizeof *s->queue);
    s->count--;
    bson_reinit(&s->last_key);
    bson_reinit(&s->max_key);
    bson_reinit(&s->chunk_end);
    s->bracket = -1;
    s->sent = s->superseded = 0;
    s->estimated = -1;
    s->started_ms = s->last_log_ms = mcdc_clock_mono_ms();
    s->queue_gen++;
    s->offset_dirty = true;
    if (s->count == 0)
        s->state = INCR_IDLE;
}

/* Anchored, case-insensitive match of ns against re (Debezium treats every
 * data-collections entry as a regex over the whole identifier). */
bool incr_ns_matches(const char *re, const char *ns)
{
    int code;
    PCRE2_SIZE off;
    pcre2_code *c = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED,
                                  PCRE2_CASELESS | PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_UTF |
                                      PCRE2_MATCH_INVALID_UTF,
                                  &code, &off, NULL);
    pcre2_match_data *md;
    bool ok;

    if (c == NULL)
        return !strcasecmp(re, ns);
    md = pcre2_match_data_create_from_pattern(c, NULL);
    ok = pcre2_match(c, (PCRE2_SPTR)ns, strlen(ns), 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    pcre2_code_free(c);
    return ok;
}

size_t incr_stop(struct incr *s, char *const *regexes, size_t n, bool *current)
{
    size_t removed = 0, i = 0;

    *current = false;
    while (i < s->count) {
        bool hit = n == 0;
        for (size_t j = 0; j < n && !hit; j++)
            hit = incr_ns_matches(regexes[j], s->queue[i].ns);
        if (!hit) {
            i++;
            continue;
        }
        removed++;
        if (i == 0) {
            /* The current collection: a window being read finishes first
             * (its rows are consistent), then the collection stops. */
            *current = true;
            if (s->state == INCR_READING || s->state == INCR_WAIT_OPEN || s->state == INCR_OPEN || s->state == INCR_WAIT_TIME ||
                s->state == INCR_CLOSED) {
                s->stop_current = true;
                i++;
                continue;
            }
            incr_pop_current(s);
            continue;
        }
        item_free(&s->queue[i]);
        memmove(&s->queue[i], &s->queue[i + 1], (s->count - i - 1) * sizeof *s->queue);
        s->count--;
        s->queue_gen++;
        s->offset_dirty = true;
    }
    return removed;
}

size_t incr_abort(struct incr *s)
{
    size_t n = 0, i = 1;
    char *id;

    if (s->count == 0)
        return 0;
    id = xstrdup(s->queue[0].signal_id);
    incr_window_clear(s);
    incr_pending_free(s);
    incr_pop_current(s);
    n++;
    i = 0;
    while (i < s->count) {
        if (strcmp(s->queue[i].signal_id, id) != 0) {
            i++;
            continue;
        }
        if (i == 0) {
            incr_pop_current(s);
        } else {
            item_free(&s->queue[i]);
            memmove(&s->queue[i], &s->queue[i + 1], (s->count - i - 1) * sizeof *s->queue);
            s->count--;
            s->queue_gen++;
            s->offset_dirty = true;
        }
        n++;
    }
    free(id);
    s->stop_current = false;
    s->state = s->count > 0 ? INCR_READY : INCR_IDLE;
    return n;
}

void incr_pause(struct incr *s)
{
    s->paused = true;
    s->offset_dirty = true;
}

void incr_resume(struct incr *s)
{
    s->paused = false;
    s->offset_dirty = true;
}

/* ---- the window ---------------------------------------------------------- */

uint64_t incr_key_hash(const bson_iter_t *id)
{
    uint64_t h = 1469598103934665603ull;
    const uint8_t *p = id->raw + id->d1;
    uint32_t n = id->next_off - id->d1;
    h = (h ^ (uint8_t)bson_iter_type(id)) * 1099511628211ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static bool same_key(const bson_iter_t *a, const bson_iter_t *b)
{
    uint32_t na = a->next_off - a->d1, nb = b->next_off - b->d1;
    return bson_iter_type(a) == bson_iter_type(b) && na == nb &&
           memcmp(a->raw + a->d1, b->raw + b->d1, na) == 0;
}

static void index_put(struct incr *s, size_t row)
{
    size_t i = (size_t)(s->rows[row].hash % s->nslots);
    while (s->slots[i] != 0)
        i = (i + 1) % s->nslots;
    s->slots[i] = row + 1;
}

void incr_window_add(struct incr *s, bson_t *doc)
{
    bson_iter_t id;

    if (!bson_iter_init_find(&id, doc, "_id")) {
        bson_destroy(doc);
        return;
    }
    if (s->nrows == s->rows_cap) {
        s->rows_cap = s->rows_cap ? s->rows_cap * 2 : 256;
        s->rows = xrealloc(s->rows, s->rows_cap * sizeof *s->rows);
    }
    if ((s->nrows + 1) * 2 > s->nslots) {
        s->nslots = s->nslots ? s->nslots * 2 : 512;
        free(s->slots);
        s->slots = xcalloc(s->nslots, sizeof *s->slots);
        for (size_t r = 0; r < s->nrows; r++)
            index_put(s, r);
    }
    s->rows[s->nrows].doc = doc;
    s->rows[s->nrows].hash = incr_key_hash(&id);
    s->nrows++;
    index_put(s, s->nrows - 1);
    s->window_bytes += doc->len;
}

void incr_window_clear(struct incr *s)
{
    for (size_t i = 0; i < s->nrows; i++)
        if (s->rows[i].doc)
            bson_destroy(s->rows[i].doc);
    free(s->rows);
    s->rows = NULL;
    s->nrows = s->rows_cap = 0;
    if (s->slots)
        memset(s->slots, 0, s->nslots * sizeof *s->slots);
    s->window_bytes = 0;
}

void incr_drop_key(struct incr *s, const bson_t *key)
{
    bson_iter_t id, rid;
    uint64_t h;
    size_t i;

    if (s->nrows == 0 || !bson_iter_init_find(&id, key, "_id"))
        return;
    h = incr_key_hash(&id);
    for (i = (size_t)(h % s->nslots); s->slots[i] != 0; i = (i + 1) % s->nslots) {
        struct incr_row *r = &s->rows[s->slots[i] - 1];
        if (r->hash != h || r->doc == NULL)
            continue;
        if (bson_iter_init_find(&rid, r->doc, "_id") && same_key(&id, &rid)) {
            bson_destroy(r->doc);
            r->doc = NULL;
            s->superseded++;
            return;
        }
    }
}

size_t incr_window_size(const struct incr *s)
{
    return s->state == INCR_CLOSED ? s->nrows : 0;
}

const bson_t *incr_window_row(const struct incr *s, size_t i)
{
    return i < s->nrows ? s->rows[i].doc : NULL;
}

static void set_key_doc(bson_t *dst, const bson_t *doc)
{
    bson_iter_t id;
    bson_reinit(dst);
    if (doc && bson_iter_init_find(&id, doc, "_id"))
        bson_append_iter(dst, "_id", 3, &id);
}

void incr_window_sent(struct incr *s, size_t i)
{
    if (i >= s->nrows || s->rows[i].doc == NULL)
        return;
    set_key_doc(&s->last_key, s->rows[i].doc);
    s->sent++;
    s->offset_dirty = true;
}

static void log_progress(struct incr *s, bool finished)
{
    int64_t now = mcdc_clock_mono_ms(), el = now - s->started_ms;
    double rate = el > 0 ? (double)s->sent * 1000.0 / (double)el : 0;

    if (!finished && now - s->last_log_ms < PROGRESS_LOG_MS)
        return;
    s->last_log_ms = now;
    if (finished) {
        LOG_INFO("incremental snapshot of %s done: %lld rows in %.1f s (%.0f rows/s); %lld "
                 "rows superseded by streamed changes",
                 s->queue[0].ns, (long long)s->sent, (double)el / 1000.0, rate,
                 (long long)s->superseded);
    } else if (s->estimated > 0) {
        double pct = 100.0 * (double)s->sent / (double)s->estimated;
        double eta =
            rate > 0 && s->estimated > s->sent ? (double)(s->estimated - s->sent) / rate : 0;
        LOG_INFO("incremental snapshot of %s: %lld of ~%lld rows (%.1f%%), %.0f rows/s, ETA %.0f s",
                 s->queue[0].ns, (long long)s->sent, (long long)s->estimated, pct > 100 ? 100 : pct,
                 rate, eta);
    } else {
        LOG_INFO("incremental snapshot of %s: %lld rows, %.0f rows/s", s->queue[0].ns,
                 (long long)s->sent, rate);
    }
}

void incr_window_done(struct incr *s)
{
    if (!bson_empty(&s->chunk_end))
        set_key_doc(&s->last_key, &s->chunk_end);
    incr_window_clear(s);
    s->offset_dirty = true;
    s->state = s->count ? INCR_READY : INCR_IDLE;
    if (s->stop_current) {
        s->stop_current = false;
        LOG_INFO("incremental snapshot of %s stopped after its open window (%lld rows sent)",
                 s->queue[0].ns, (long long)s->sent);
        incr_pop_current(s);
        return;
    }
    if (s->count)
        log_progress(s, false);
}

/* Called by the reader when a collection has no more keys. */
void incr_collection_finished(struct incr *s)
{
    if (s->count)
        log_progress(s, true);
    incr_pop_current(s);
}

/* ---- the stream ---------------------------------------------------------- */

bool incr_on_marker(struct incr *s, bool op_insert, const bson_t *doc)
{
    bson_iter_t it;
    const char *id;
    size_t n = strlen(s->chunk_id);

    if (s->cluster_time || n == 0 || !bson_iter_init_find(&it, doc, "_id") ||
        !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    id = bson_iter_utf8(&it, NULL);
    if (strncmp(id, s->chunk_id, n) != 0)
        return false; /* an older chunk's marker (before a restart), or another task's */
    if (op_insert && !strcmp(id + n, "-open") && s->state == INCR_WAIT_OPEN) {
        s->state = INCR_OPEN;
        return true;
    }
    if (s->state == INCR_READING) {
        /* The read is still running: the window opens now, and a close can
         * only come once the read is done (the reader writes it after), so
         * the result is then waited for (incr_close_waits). */
        if (op_insert && !strcmp(id + n, "-open") && !s->win_opened) {
            s->win_opened = true;
            return true;
        }
        if (s->win_opened && ((op_insert && !strcmp(id + n, "-close")) ||
                              (!op_insert && !strcmp(id + n, "-open")))) {
            s->win_close_seen = true;
            return true;
        }
        return false;
    }
    if (s->state != INCR_OPEN)
        return false;
    if ((op_insert && !strcmp(id + n, "-close")) || (!op_insert && !strcmp(id + n, "-open"))) {
        s->state = INCR_CLOSED;
        return true;
    }
    return false;
}

static bool after_t(const struct incr *s, uint32_t sec, uint32_t inc)
{
    return sec > s->at_sec || (sec == s->at_sec && inc > s->at_inc);
}

bool incr_on_event(struct incr *s, const char *db, size_t db_len, const char *coll, size_t coll_len,
                   const bson_t *key, bool has_time, uint32_t sec, uint32_t inc)
{
    const struct incr_item *cur;
    bool same_ns;

    if (s->count == 0 ||
        (s->state != INCR_OPEN && s->state != INCR_WAIT_TIME && s->state != INCR_READING))
        return false;
    cur = &s->queue[0];
    same_ns = db && coll && strlen(cur->db) == db_len && !memcmp(cur->db, db, db_len) &&
              strlen(cur->coll) == coll_len && !memcmp(cur->coll, coll, coll_len);
    if (s->state == INCR_READING) {
        incr_pending_event(s, same_ns, key, has_time, sec, inc);
        return false;
    }
    if (s->state == INCR_OPEN) {
        if (same_ns && key)
            incr_drop_key(s, key);
        return false;
    }
    /* Cluster-time window: an event at or before T is already in the rows. */
    if (!has_time || !after_t(s, sec, inc))
        return false;
    if (same_ns && key)
        incr_drop_key(s, key);
    s->state = INCR_CLOSED;
    return true;
}

void incr_on_idle(struct incr *s)
{
    if (s->state == INCR_WAIT_TIME)
        s->state = INCR_CLOSED;
    else if (s->state == INCR_READING && s->at_known)
        s->passed_t = true; /* a getMore sent after T was taken: the rows go out at the attach */
}
