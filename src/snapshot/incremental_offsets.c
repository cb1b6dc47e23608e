/*
 * snapshot/incremental_offsets: the incremental snapshot's progress as offset
 * members (incremental.h; debezium-format.md §4.2): Debezium's keys, with
 * portable values (canonical extended JSON of {"_id": key}, a compact JSON
 * list of the queued collections), and their restore at start.
 */
#include "snapshot/incremental_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "encode/ejson.h"

/* Offset keys (Debezium's names, §4.2). */
#define K_COLLS "incremental_snapshot_collections"
#define K_COLL_ID "incremental_snapshot_collections_id"
#define K_COLL_COND "incremental_snapshot_collections_additional_condition"
#define K_COLL_CORR "incremental_snapshot_collections_correlation_id"
#define K_PRIMARY "incremental_snapshot_primary_key"
#define K_MAXIMUM "incremental_snapshot_maximum_key"
#define K_CORR "incremental_snapshot_correlation_id"
/* Ours: Debezium keeps the pause in memory only, so a restart resumes a
 * paused snapshot; a pause-snapshot signal that the stored position has
 * passed must hold after a restart too. Debezium ignores the key. */
#define K_PAUSED "mongocdc_incremental_snapshot_paused"
/* mongocdc's portable copies: Debezium reads K_PRIMARY/K_MAXIMUM as hex of a
 * Java-serialised Object[] and fails the task on anything else
 * (AbstractIncrementalSnapshotContext.serializedStringToArray), so the
 * extended-JSON keys live under names it ignores; without K_PRIMARY it
 * restarts the collection from its first key. */
#define M_COLLS "mongocdc_incremental_snapshot_collections"
#define M_PRIMARY "mongocdc_incremental_snapshot_primary_key"
#define M_MAXIMUM "mongocdc_incremental_snapshot_maximum_key"

/* ---- offsets ------------------------------------------------------------- */

/* A JSON string of a NUL-terminated text, escaped as everywhere else
 * (encode/ejson.h). */
static void put_str(struct ejson_buf *b, const char *p)
{
    ejson_write_string(b, p, strlen(p));
}

static void put(struct ejson_buf *b, const char *p)
{
    ejson_buf_append(b, p, strlen(p));
}

/* Canonical extended JSON of doc through the project's writer (the bytes do
 * not depend on the libbson version; keyrange_key_to_json writes keys the
 * same way). */
static char *canonical(const bson_t *doc)
{
    struct ejson_buf b = {0};
    ejson_write_document(&b, doc, EJSON_CANONICAL, EJSON_SEP_DEFAULT);
    char *out = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return out;
}

char *incr_key_text(const struct incr *s, bool maximum)
{
    const bson_t *k = maximum ? &s->max_key : &s->last_key;
    return bson_empty(k) ? NULL : canonical(k);
}

/* The queue as Debezium's list (§4.2), compact, in its key order:
 * [{"..._id":"db.coll","..._additional_condition":null,"..._correlation_id":"sig"}]. */
static char *collections_text(const struct incr *s)
{
    struct ejson_buf b = {0};
    char *colls;

    put(&b, "[");
    for (size_t i = 0; i < s->count; i++) {
        put(&b, i ? ",{" : "{");
        put_str(&b, K_COLL_ID);
        put(&b, ":");
        put_str(&b, s->queue[i].ns);
        put(&b, ",");
        put_str(&b, K_COLL_COND);
        put(&b, ":");
        if (bson_empty(s->queue[i].cond)) {
            put(&b, "null");
        } else {
            char *c = canonical(s->queue[i].cond);
            put_str(&b, c);
            free(c);
        }
        put(&b, ",");
        put_str(&b, K_COLL_CORR);
        put(&b, ":");
        if (s->queue[i].signal_id[0])
            put_str(&b, s->queue[i].signal_id);
        else
            put(&b, "null");
        put(&b, "}");
    }
    put(&b, "]");
    colls = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return colls;
}

/* The collections member, "<K_COLLS>":"<list as a JSON string>" (malloc'd;
 * in the 1.9 layout 1.9's list, then mongocdc's JSON list under M_COLLS),
 * written by the project's own JSON writer so its bytes do not depend on the
 * libbson version. */
static char *colls_member_text(const struct incr *s)
{
    struct ejson_buf b = {0};
    char *colls = collections_text(s);
    char *out;

    put_str(&b, K_COLLS);
    put(&b, ":");
    if (s->cfg->dialect == MCDC_DIALECT_1_9) {
        /* Debezium 1.9 reads a comma-separated list of "<rs>.<db>.<coll>"
         * (CollectionId.identifier); the conditions and signal ids stay in
         * mongocdc's own copy of the list. */
        struct ejson_buf l = {0};
        for (size_t i = 0; i < s->count; i++) {
            if (i)
                put(&l, ",");
            put(&l, s->task);
            put(&l, ".");
            put(&l, s->queue[i].ns);
        }
        char *list = ejson_buf_steal(&l, NULL);
        ejson_buf_free(&l);
        put_str(&b, list ? list : "");
        free(list);
        put(&b, ",");
        put_str(&b, M_COLLS);
        put(&b, ":");
    }
    put_str(&b, colls);
    free(colls);
    out = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return out;
}

const char *incr_offset_json(struct incr *s)
{
    if (s->count == 0)
        return NULL;
    if (!s->offset_dirty && s->offset_json)
        return s->offset_json;
    /* The queue's text changes only with the queue: kept between offsets. */
    if (s->colls_member == NULL || s->colls_gen != s->queue_gen) {
        free(s->colls_member);
        s->colls_member = colls_member_text(s);
        s->colls_gen = s->queue_gen;
    }
    /* Compact, every member a string but the pause flag: {"k":"v","k2":"v2"} */
    struct ejson_buf b = {0};
    put(&b, "{");
    put(&b, s->colls_member);
    if (!bson_empty(&s->last_key)) {
        char *c = canonical(&s->last_key);
        put(&b, ",");
        put_str(&b, M_PRIMARY);
        put(&b, ":");
        put_str(&b, c);
        free(c);
    }
    if (!bson_empty(&s->max_key)) {
        char *c = canonical(&s->max_key);
        put(&b, ",");
        put_str(&b, M_MAXIMUM);
        put(&b, ":");
        put_str(&b, c);
        free(c);
    }
    if (s->queue[0].signal_id[0]) {
        put(&b, ",");
        put_str(&b, K_CORR);
        put(&b, ":");
        put_str(&b, s->queue[0].signal_id);
    }
    if (s->paused) {
        put(&b, ",");
        put_str(&b, K_PAUSED);
        put(&b, ":true");
    }
    put(&b, "}");
    free(s->offset_json);
    s->offset_json = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    s->offset_dirty = false;
    return s->offset_json;
}

size_t incr_offset_shared_len(const struct incr *s)
{
    /* "{" and the collections member */
    return s->count > 0 && s->offset_json && s->colls_member ? 1 + strlen(s->colls_member) : 0;
}

static bool utf8_member(const bson_t *doc, const char *key, const char **out)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, key) || !BSON_ITER_HOLDS_UTF8(&it))
        return false;
    *out = bson_iter_utf8(&it, NULL);
    return true;
}

static bool parse_key(const char *text, bson_t *dst, const char *what, struct mcdc_error *err)
{
    bson_error_t be;
    bson_t *d = bson_new_from_json((const uint8_t *)text, -1, &be);
    bson_iter_t it;
    if (d == NULL || !bson_iter_init_find(&it, d, "_id")) {
        if (d)
            bson_destroy(d);
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset %s is not {\"_id\": ...}: %s", what,
                              d ? "no _id" : be.message);
    }
    bson_reinit(dst);
    bson_append_iter(dst, "_id", 3, &it);
    bson_destroy(d);
    return true;
}

/* Queues the collections of Debezium 1.9's list "<rs>.<db>.<coll>,...". */
static void restore_id_list(struct incr *s, const char *list)
{
    bson_t none = BSON_INITIALIZER;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char id[512], db[256];
        snprintf(id, sizeof id, "%.*s", (int)n, p);
        const char *ns = strchr(id, '.'), *dot = ns ? strchr(ns + 1, '.') : NULL;
        if (dot != NULL) {
            snprintf(db, sizeof db, "%.*s", (int)(dot - ns - 1), ns + 1);
            incr_push_item(s, db, dot + 1, &none, "");
        }
        p += n;
        if (*p == ',')
            p++;
    }
    bson_destroy(&none);
}

/*
 * A key under Debezium's name: extended JSON {"_id": ...} (mongocdc before
 * its own keys existed) is used; anything else (Debezium's hex of a
 * Java-serialised Object[], which only a JVM can read) restarts the
 * collection's snapshot from its first key, with a WARN for the last key
 * sent (primary). Never fails: such a value is no corruption.
 */
static bool restore_foreign_key(struct incr *s, const char *text, bson_t *dst, bool primary)
{
    struct mcdc_error ignored = MCDC_ERROR_INIT;
    if (text[0] == '{' && parse_key(text, dst, primary ? K_PRIMARY : K_MAXIMUM, &ignored))
        return true;
    bson_reinit(dst);
    if (primary)
        LOG_WARN("incremental snapshot: the offsets hold Debezium's position in %s (%s, a "
                 "Java-serialised key mongocdc cannot read): that collection's incremental "
                 "snapshot restarts from its first document; rows already sent are sent again",
                 s->count > 0 ? s->queue[0].ns : "the current collection", K_PRIMARY);
    return true;
}

bool incr_restore(struct incr *s, const char *extra_json, struct mcdc_error *err)
{
    bson_t *extra, *list = NULL;
    bson_error_t be;
    bson_iter_t it;
    const char *colls, *text;
    bool ok = false;

    if (extra_json == NULL)
        return true;
    extra = bson_new_from_json((const uint8_t *)extra_json, -1, &be);
    if (extra == NULL ||
        (!utf8_member(extra, M_COLLS, &colls) && !utf8_member(extra, K_COLLS, &colls))) {
        if (extra)
            bson_destroy(extra);
        return true; /* no incremental snapshot in the offsets */
    }
    if (colls[0] != '[') {
        /* Debezium 1.9's form: "<rs>.<db>.<coll>,..." (no conditions). */
        restore_id_list(s, colls);
    } else {
        list = bson_new_from_json((const uint8_t *)colls, -1, &be);
        if (list == NULL) {
            mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset %s is not a JSON array: %s",
                           K_COLLS, be.message);
            goto done;
        }
    }
    if (list != NULL && bson_iter_init(&it, list)) {
        while (bson_iter_next(&it)) {
            bson_t item, cond = BSON_INITIALIZER;
            const uint8_t *data;
            uint32_t len;
            const char *ns, *dot, *corr = "";
            char db[256];
            if (!BSON_ITER_HOLDS_DOCUMENT(&it))
                continue;
            bson_iter_document(&it, &len, &data);
            if (!bson_init_static(&item, data, len) || !utf8_member(&item, K_COLL_ID, &ns) ||
                (dot = strchr(ns, '.')) == NULL) {
                bson_destroy(&cond);
                continue;
            }
            if (utf8_member(&item, K_COLL_COND, &text)) {
                bson_t *c = bson_new_from_json((const uint8_t *)text, -1, &be);
                if (c == NULL) {
                    bson_destroy(&cond);
                    mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                                   "offset additional condition of %s is not JSON: %s", ns,
                                   be.message);
                    goto done;
                }
                bson_destroy(&cond);
                bson_copy_to(c, &cond);
                bson_destroy(c);
            }
            (void)utf8_member(&item, K_COLL_CORR, &corr);
            snprintf(db, sizeof db, "%.*s", (int)(dot - ns), ns);
            incr_push_item(s, db, dot + 1, &cond, corr);
            bson_destroy(&cond);
        }
    }
    if (utf8_member(extra, M_PRIMARY, &text)) {
        if (!parse_key(text, &s->last_key, M_PRIMARY, err))
            goto done;
    } else if (utf8_member(extra, K_PRIMARY, &text) &&
               !restore_foreign_key(s, text, &s->last_key, true)) {
        goto done;
    }
    if (utf8_member(extra, M_MAXIMUM, &text)) {
        if (!parse_key(text, &s->max_key, M_MAXIMUM, err))
            goto done;
    } else if (utf8_member(extra, K_MAXIMUM, &text)) {
        (void)restore_foreign_key(s, text, &s->max_key, false);
    }
    if (bson_iter_init_find(&it, extra, K_PAUSED) && BSON_ITER_HOLDS_BOOL(&it))
        s->paused = bson_iter_bool(&it);
    if (s->count > 0) {
        s->state = INCR_READY;
        s->started_ms = s->last_log_ms = mcdc_clock_mono_ms();
        LOG_INFO("incremental snapshot resumed from the offsets: %zu collection(s) left, %s "
                 "from %s%s",
                 s->count, s->queue[0].ns,
                 bson_empty(&s->last_key) ? "the first key" : "after the last key sent",
                 s->paused ? "; paused (pause-snapshot), until a resume-snapshot signal" : "");
    }
    ok = true;
done:
    if (list)
        bson_destroy(list);
    bson_destroy(extra);
    if (!ok)
        mcdc_error_prefix(err, "cannot resume the incremental snapshot");
    return ok;
}
