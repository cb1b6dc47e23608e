/*
 * oplog_majority: oplog mode publishes only majority-committed entries, and
 * survives a rollback (see oplog.h).
 *
 * A primary that loses its majority still applies w:1 writes and logs them in
 * its oplog; when another member is elected, those entries exist nowhere else
 * and the old primary rolls them back (MongoDB's src/mongo/db/repl/README.md,
 * "Rollback"). Change streams never show them (they read at majority); a
 * reader of local.oplog.rs sees them at once. So each entry read waits until
 * the set's majority commit point reaches it.
 *
 * Where the commit point comes from, and why hello:
 *  - getMore replies carry the commit point only as $replData.lastOpCommitted
 *    (rpc/metadata/repl_set_metadata), which a server adds only when the
 *    request asks for it with a $replData field: an internal protocol of the
 *    oplog fetcher. libmongoc builds a cursor's getMore itself and gives the
 *    caller the batch's documents only, so neither the request nor the reply
 *    metadata can be reached through its cursor API.
 *  - A tailable cursor at readConcern majority would read the committed
 *    snapshot, but its awaitData wait is woken by new oplog inserts, not by
 *    the commit point moving; the local database is meant to be read at
 *    readConcern local (it is not replicated); and on 4.4 a set may run with
 *    enableMajorityReadConcern: false (PSA sets), where majority reads are
 *    refused while the commit point still exists.
 *  - hello's lastWrite.majorityOpTime (hello.idl, replication_info.cpp) is the
 *    commit point the member knows, reported by every version the daemon
 *    supports, on every member, with or without majority read concern. It
 *    costs one round trip per check; a check is made only when an entry
 *    newer than the last known point is read, so a batch of entries already
 *    committed passes with one hello.
 * hello runs on the server the cursor reads from (the commit point of another
 * member could be ahead of this member's oplog, or behind).
 *
 * Thread: the owning capture task.
 */
#include "capture/oplog.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "capture/hello.h"
#include "capture/oplog_internal.h"
#include "common/clock.h"
#include "common/log.h"

#define HOLD_BACKOFF_MAX_MS 50
#define HOLD_AWAIT_DEFAULT_MS 1000

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static bool optime_of(const bson_t *lw, const char *key, uint32_t *sec, uint32_t *ord, int64_t *t)
{
    bson_iter_t it, sub;
    char path[64];
    snprintf(path, sizeof path, "%s.ts", key);
    if (!bson_iter_init(&it, lw) || !bson_iter_find_descendant(&it, path, &sub) ||
        !BSON_ITER_HOLDS_TIMESTAMP(&sub))
        return false;
    bson_iter_timestamp(&sub, sec, ord);
    snprintf(path, sizeof path, "%s.t", key);
    *t = -1;
    if (bson_iter_init(&it, lw) && bson_iter_find_descendant(&it, path, &sub) &&
        BSON_ITER_HOLDS_NUMBER(&sub))
        *t = bson_iter_as_int64(&sub);
    return true;
}

/* hello on server_id (0: the primary); the raw error and reply for the reader's own
 * failure path. */
static bool run_hello(mongoc_client_t *client, uint32_t server_id, struct oplog_commit_point *cp,
                      bson_error_t *error, bson_t *reply)
{
    struct mcdc_hello h;
    bson_iter_t it;
    bson_t lw;
    bool ok = mcdc_hello_run(client, server_id, &h, error);

    memset(cp, 0, sizeof *cp);
    bson_copy_to(&h.reply, reply);
    mcdc_hello_destroy(&h);
    if (!ok)
        return false;
    if (bson_iter_init_find(&it, reply, "lastWrite") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        const uint8_t *data;
        uint32_t len;
        bson_iter_document(&it, &len, &data);
        if (bson_init_static(&lw, data, len)) {
            cp->known = optime_of(&lw, "majorityOpTime", &cp->maj_sec, &cp->maj_ord, &cp->maj_t);
            if (!optime_of(&lw, "opTime", &cp->last_sec, &cp->last_ord, &cp->last_t)) {
                cp->last_sec = cp->maj_sec;
                cp->last_ord = cp->maj_ord;
                cp->last_t = cp->maj_t;
            }
        }
    }
    return true;
}

bool oplog_commit_point(mongoc_client_t *client, uint32_t server_id, struct oplog_commit_point *cp,
                        struct resume_failure *fail, struct mcdc_error *err)
{
    bson_error_t error;
    bson_t reply;
    bool ok = run_hello(client, server_id, cp, &error, &reply);
    if (!ok)
        capture_failure_from(&error, &reply, fail, err);
    bson_destroy(&reply);
    return ok;
}

/* The server a cursor reads from (0: none chosen yet). libmongoc 1.24
 * renamed mongoc_cursor_get_hint to mongoc_cursor_get_server_id and 1.30
 * deprecates the old name; both builds of Debian 12 (1.23) and 13 (1.30)
 * must compile warning-free. */
static uint32_t cursor_server_id(mongoc_cursor_t *cursor)
{
#if MONGOC_CHECK_VERSION(1, 24, 0)
    return mongoc_cursor_get_server_id(cursor);
#else
    return mongoc_cursor_get_hint(cursor);
#endif
}

/* Reads the commit point again into r->cp. False with the failure in r. */
static bool refresh(struct oplog_reader *r)
{
    struct oplog_commit_point cp;
    uint32_t server_id = r->cursor != NULL ? cursor_server_id(r->cursor) : 0;
    bson_t reply;
    bool ok = run_hello(r->client, server_id, &cp, &r->error, &reply);
    if (!ok) {
        r->has_error = true;
        bson_reinit(&r->reply);
        bson_copy_to_excluding_noinit(&reply, &r->reply, "", NULL);
    } else if (!cp.known) {
        if (!r->gate_off)
            LOG_WARN("the server reports no majority commit point (hello lastWrite."
                     "majorityOpTime): oplog entries are published as read, and one rolled back "
                     "by a failover could be published");
        r->gate_off = true;
    } else {
        r->cp = cp;
        if (r->has_held && cp.last_t == r->held_t &&
            oplog_ts_after(cp.last_sec, cp.last_ord, r->held_last_sec, r->held_last_ord)) {
            r->held_last_sec = cp.last_sec;
            r->held_last_ord = cp.last_ord;
        }
    }
    bson_destroy(&reply);
    return ok;
}

static bool int_field(const bson_t *doc, const char *key, int64_t *v);

bool oplog_hold_if_uncommitted(struct oplog_reader *r, const bson_t *doc)
{
    uint32_t sec, ord;
    if (r->gate_off)
        return false;
    oplog_ts_of(doc, "ts", &sec, &ord);
    if (!oplog_ts_after(sec, ord, r->cp.maj_sec, r->cp.maj_ord))
        return false;
    if (refresh(r) && (r->gate_off || !oplog_ts_after(sec, ord, r->cp.maj_sec, r->cp.maj_ord)))
        return false;
    bson_reinit(&r->held);
    bson_concat(&r->held, doc);
    r->has_held = true;
    r->hold_backoff_ms = 1;
    if (!int_field(doc, "t", &r->held_t))
        r->held_t = -1;
    r->held_last_sec = sec;
    r->held_last_ord = ord;
    if (r->cp.last_t == r->held_t &&
        oplog_ts_after(r->cp.last_sec, r->cp.last_ord, r->held_last_sec, r->held_last_ord)) {
        r->held_last_sec = r->cp.last_sec;
        r->held_last_ord = r->cp.last_ord;
    }
    return true;
}

static bool entry_at(mongoc_client_t *client, uint32_t sec, uint32_t ord, bool before, bool *found,
                     bson_t *out, struct resume_failure *fail, struct mcdc_error *err);
static bool entry_at_raw(mongoc_client_t *client, uint32_t sec, uint32_t ord, bool before,
                         bool *found, bson_t *out, bson_error_t *error, bson_t *reply);
static bool int_field(const bson_t *doc, const char *key, int64_t *v);

/*
 * The commit point has reached the held entry's ts. In the entry's own term
 * that commits it; a commit point of a later term says only that the new
 * primary's history is committed up to there, and the held entry is part of
 * it only if the oplog still has it with its term (an optime is ordered by
 * term first: MongoDB's repl/optime.h). Returns 1 committed, 0 rolled back,
 * -1 on a read failure (recorded in r).
 */
static int held_committed(struct oplog_reader *r, uint32_t sec, uint32_t ord)
{
    bool found;
    int64_t t, ht;
    bson_t e;

    if (!int_field(&r->held, "t", &ht) || ht == r->cp.maj_t)
        return 1;
    bson_reinit(&r->reply);
    if (!entry_at_raw(r->client, sec, ord, false, &found, &e, &r->error, &r->reply)) {
        r->has_error = true; /* classified as any read failure (oplog_failure) */
        return -1;
    }
    if (!found)
        return 0;
    found = !int_field(&e, "t", &t) || t == ht;
    bson_destroy(&e);
    return found ? 1 : 0;
}

/* The held entry was rolled back: WARN with the range, forget it and the
 * cursor (which reads on in the dead history); the next call reopens the
 * cursor after the last entry taken, which was committed. */
static void drop_rolled_back(struct oplog_reader *r, uint32_t sec, uint32_t ord)
{
    LOG_WARN("rollback: the oplog entries from Timestamp(%u, %u) to Timestamp(%u, %u), read but "
             "held back as not majority-committed, are not in the new primary's history: a "
             "failover rolled them back. Nothing was published from them; capture continues "
             "after Timestamp(%u, %u)",
             sec, ord, r->held_last_sec, r->held_last_ord, r->sec, r->ord);
    bson_reinit(&r->held);
    r->has_held = false;
    mongoc_cursor_destroy(r->cursor);
    r->cursor = NULL;
}

enum capture_status oplog_release_held(struct oplog_reader *r, struct oplog_item *item)
{
    int64_t await_ms = r->cfg->cursor_max_await_time_ms > 0 ? r->cfg->cursor_max_await_time_ms
                                                            : HOLD_AWAIT_DEFAULT_MS;
    int64_t deadline = mcdc_clock_mono_ms() + await_ms;
    uint32_t sec, ord;

    oplog_ts_of(&r->held, "ts", &sec, &ord);
    for (;;) {
        int64_t now;
        if (r->has_error)
            return CAPTURE_ERROR;
        if (r->gate_off || !oplog_ts_after(sec, ord, r->cp.maj_sec, r->cp.maj_ord)) {
            enum capture_status st;
            int committed = r->gate_off ? 1 : held_committed(r, sec, ord);
            if (committed < 0)
                return CAPTURE_ERROR;
            if (committed == 0) {
                drop_rolled_back(r, sec, ord);
                return CAPTURE_IDLE;
            }
            st = oplog_take_entry(r, &r->held, item);
            bson_reinit(&r->held);
            r->has_held = false;
            return st;
        }
        now = mcdc_clock_mono_ms();
        if (now >= deadline)
            return CAPTURE_IDLE;
        sleep_ms(r->hold_backoff_ms < deadline - now ? r->hold_backoff_ms : deadline - now);
        if (r->hold_backoff_ms < HOLD_BACKOFF_MAX_MS)
            r->hold_backoff_ms *= 2;
        if (!refresh(r))
            return CAPTURE_ERROR;
    }
}

void oplog_held_entries(const struct oplog_reader *r, struct oplog_held *held)
{
    bson_iter_t it;
    memset(held, 0, sizeof *held);
    if (r == NULL || !r->has_held)
        return;
    held->any = true;
    oplog_ts_of(&r->held, "ts", &held->sec, &held->ord);
    held->has_t = bson_iter_init_find(&it, &r->held, "t") && BSON_ITER_HOLDS_NUMBER(&it);
    held->t = held->has_t ? bson_iter_as_int64(&it) : 0;
    held->last_sec = r->held_last_sec;
    held->last_ord = r->held_last_ord;
}

/* The entry at exactly (sec, ord), or (before) the newest one older than it,
 * with ts, t and h into out (initialised only when *found). Returns false on
 * a read failure with error and reply (an initialised copy of the server's
 * reply, or empty). */
static bool entry_at_raw(mongoc_client_t *client, uint32_t sec, uint32_t ord, bool before,
                         bool *found, bson_t *out, bson_error_t *error, bson_t *reply)
{
    mongoc_collection_t *oplog = mongoc_client_get_collection(client, "local", "oplog.rs");
    bson_t *filter = before ? BCON_NEW("ts", "{", "$lt", BCON_TIMESTAMP(sec, ord), "}")
                            : BCON_NEW("ts", BCON_TIMESTAMP(sec, ord));
    bson_t *opts = BCON_NEW("sort", "{", "$natural", BCON_INT32(before ? -1 : 1), "}", "limit",
                            BCON_INT64(1), "projection", "{", "ts", BCON_INT32(1), "t",
                            BCON_INT32(1), "h", BCON_INT32(1), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(oplog, filter, opts, NULL);
    const bson_t *doc = NULL, *r = NULL;
    bool ok = true;

    *found = mongoc_cursor_next(cur, &doc);
    if (*found) {
        bson_copy_to(doc, out);
    } else if (mongoc_cursor_error_document(cur, error, &r)) {
        if (r != NULL)
            bson_copy_to_excluding_noinit(r, reply, "", NULL);
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(oplog);
    return ok;
}

/* As entry_at_raw, the failure as capture_failure_from gives it. */
static bool entry_at(mongoc_client_t *client, uint32_t sec, uint32_t ord, bool before, bool *found,
                     bson_t *out, struct resume_failure *fail, struct mcdc_error *err)
{
    bson_error_t error;
    bson_t reply = BSON_INITIALIZER;
    bool ok = entry_at_raw(client, sec, ord, before, found, out, &error, &reply);
    if (!ok)
        capture_failure_from(&error, &reply, fail, err);
    bson_destroy(&reply);
    return ok;
}

static bool int_field(const bson_t *doc, const char *key, int64_t *v)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    *v = bson_iter_as_int64(&it);
    return true;
}

bool oplog_held_rolled_back(mongoc_client_t *client, const struct oplog_held *held,
                            bool *rolled_back, struct resume_failure *fail, struct mcdc_error *err)
{
    bson_t e;
    bool found;
    int64_t t;

    *rolled_back = false;
    if (!held->any)
        return true;
    if (!entry_at(client, held->sec, held->ord, false, &found, &e, fail, err))
        return false;
    if (!found) {
        *rolled_back = true;
        return true;
    }
    *rolled_back = held->has_t && int_field(&e, "t", &t) && t != held->t;
    bson_destroy(&e);
    return true;
}

bool oplog_check_start(struct oplog_reader *r, const struct mcdc_position *from,
                       struct resume_failure *fail, struct mcdc_error *err)
{
    bson_t e;
    bool found;
    int64_t t, h;
    char why[96];
    uint32_t csec = 0, cord = 0;

    if (!entry_at(r->client, r->sec, r->ord, false, &found, &e, fail, err))
        return false;
    if (found) {
        bool other_term = from->has_t && int_field(&e, "t", &t) && t != from->t;
        bool other_h = from->has_h && int_field(&e, "h", &h) && h != from->h;
        bson_destroy(&e);
        if (!other_term && !other_h)
            return true;
        if (other_term)
            snprintf(why, sizeof why, "its entry now has term %" PRId64 ", not %" PRId64, t,
                     from->t);
        else
            snprintf(why, sizeof why, "its entry now has h %" PRId64 ", not %" PRId64, h, from->h);
    } else {
        snprintf(why, sizeof why, "no entry has that ts any more");
    }
    /* The common point: the newest entry before the position, on the new history. */
    if (!entry_at(r->client, r->sec, r->ord, true, &found, &e, fail, err))
        return false;
    if (found) {
        oplog_ts_of(&e, "ts", &csec, &cord);
        r->has_h = int_field(&e, "h", &r->h);
        if (!r->has_h)
            r->h = 0;
        bson_destroy(&e);
    }
    LOG_WARN("rollback: the position Timestamp(%u, %u) is not in the oplog (%s): a failover "
             "rolled back the entries after Timestamp(%u, %u) up to it; events published from "
             "them described writes that did not happen. Capture continues after "
             "Timestamp(%u, %u) with the new primary's history",
             r->sec, r->ord, why, csec, cord, csec, cord);
    r->sec = csec;
    r->ord = cord;
    r->start_tord = r->skip_tord = 0;
    return true;
}
