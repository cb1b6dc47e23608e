/*
 * offsets/store: the durable offset store front (design.md §7). A task's
 * position is stored under the Kafka Connect offsets key [name, partition]
 * (debezium-format.md §4.1) in either back-end: store_file.c (default) or
 * store_kafka.c. Both keep the value as the JSON text
 * position_to_json_dialect() writes.
 *
 * Adoption (offset_store_load_forms): a source's position may have been
 * written by Debezium 1.x ({rs, server_id} per replica set), Debezium 2.2-2.5
 * in sharded mode (rs "cluster"), Debezium 2.6+ ({server_id}) or mongocdc
 * (any of them, under the connector name or, before `name` existed, under
 * topic.prefix). Like Debezium's own offset consolidation
 * (MongoDbConnectorTask.getPreviousOffsets, §4.4) every form is looked up;
 * unlike it, the newest wins rather than the first found, because a switch
 * back and forth leaves older entries under the other forms.
 *
 * Thread: worker (each task opens its own handle).
 */
#include "offsets/offsets.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "offsets/offsets_internal.h"

#define MERGED_RS "cluster" /* Debezium 2.2-2.5 sharded-mode partition (§4.1) */

static struct offset_store *open_store(const struct mcdc_config *cfg, bool read_only,
                                       struct mcdc_error *err)
{
    if (!cfg->topic_prefix || !cfg->topic_prefix[0]) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "offsets: topic.prefix is not set");
        return NULL;
    }
    struct offset_store *store = xcalloc(1, sizeof *store);
    store->cfg = cfg;
    store->read_only = read_only;
    bool ok = cfg->offset_storage == MCDC_OFFSETS_KAFKA ? store_kafka_open(store, err)
                                                        : store_file_open(store, err);
    if (!ok) {
        free(store);
        return NULL;
    }
    return store;
}

struct offset_store *offset_store_open(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    return open_store(cfg, false, err);
}

struct offset_store *offset_store_open_read_only(const struct mcdc_config *cfg,
                                                 struct mcdc_error *err)
{
    return open_store(cfg, true, err);
}

static void foreign_clear(struct offset_store *store)
{
    for (size_t i = 0; i < store->foreign_count; i++)
        free(store->foreign[i]);
    free(store->foreign);
    store->foreign = NULL;
    store->foreign_count = 0;
}

void offset_store_close(struct offset_store *store)
{
    if (!store)
        return;
    store->ops->close(store);
    foreign_clear(store);
    for (size_t i = 0; i < store->times_count; i++)
        free(store->times[i].key);
    free(store->times);
    free(store);
}

void offset_entries_free(struct offset_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(entries[i].key);
        free(entries[i].value_json);
    }
    free(entries);
}

bool offset_store_scan(struct offset_store *store, struct offset_entry **entries, size_t *n,
                       struct mcdc_error *err)
{
    return store->ops->scan(store, entries, n, err);
}

static const char *where(const struct offset_store *store)
{
    return store->cfg->offset_storage == MCDC_OFFSETS_KAFKA
               ? (store->cfg->offsets_topic && store->cfg->offsets_topic[0]
                      ? store->cfg->offsets_topic
                      : "mongocdc-offsets")
               : store->cfg->offsets_file;
}

static const char *where_kind(const struct offset_store *store)
{
    return store->cfg->offset_storage == MCDC_OFFSETS_KAFKA ? "topic" : "file";
}

static struct stored_time *time_slot(struct offset_store *store, const char *key)
{
    for (size_t i = 0; i < store->times_count; i++)
        if (!strcmp(store->times[i].key, key))
            return &store->times[i];
    return NULL;
}

static void time_note(struct offset_store *store, const char *key, bool present, uint64_t t)
{
    struct stored_time *s = time_slot(store, key);
    if (s == NULL) {
        store->times = xrealloc(store->times, (store->times_count + 1) * sizeof *store->times);
        s = &store->times[store->times_count++];
        s->key = xstrdup(key);
    }
    s->present = present;
    s->time = t;
}

const char *offsets_layout_partition(const struct mcdc_config *cfg, const char *rs, bool merged,
                                     bool per_shard)
{
    if (per_shard && !merged)
        return rs;
    if (cfg->dialect == MCDC_DIALECT_1_9)
        return merged ? MERGED_RS : rs;
    return NULL;
}

size_t offsets_partition_forms(const struct mcdc_config *cfg, const char *rs, bool merged,
                               bool per_shard, const char *forms[3])
{
    size_t n = 0;
    bool v19 = cfg->dialect == MCDC_DIALECT_1_9;
    if (per_shard && !merged) {
        forms[n++] = rs;
    } else if (merged) {
        forms[n++] = v19 ? MERGED_RS : NULL;
        forms[n++] = v19 ? NULL : MERGED_RS;
    } else {
        if (v19 && rs != NULL)
            forms[n++] = rs;
        forms[n++] = NULL;
        if (!v19 && rs != NULL)
            forms[n++] = rs;
        if (rs == NULL || strcmp(rs, MERGED_RS) != 0)
            forms[n++] = MERGED_RS;
    }
    return n;
}

void offset_origin_clear(struct offset_origin *o)
{
    if (o == NULL)
        return;
    free(o->key);
    o->key = NULL;
    o->writer = OFFSET_WRITER_MONGOCDC;
}

const char *const *offset_store_foreign(const struct offset_store *store, size_t *n)
{
    *n = store->foreign_count;
    return (const char *const *)store->foreign;
}

/* Keys naming a MongoDB source under another connector name or server_id. */
static void note_foreign(struct offset_store *store, const struct offset_entry *e, size_t n)
{
    const char *prefix = store->cfg->topic_prefix;
    const char *name = mcdc_config_connector_name(store->cfg);
    foreign_clear(store);
    for (size_t i = 0; i < n; i++) {
        char *kname = NULL, *sid = NULL, *rs = NULL;
        if (e[i].value_json == NULL || !offsets_parse_key(e[i].key, &kname, &sid, &rs))
            continue;
        bool ours = !strcmp(sid, prefix) && (!strcmp(kname, name) || !strcmp(kname, prefix));
        if (!ours) {
            store->foreign = xrealloc(store->foreign,
                                      (store->foreign_count + 1) * sizeof *store->foreign);
            store->foreign[store->foreign_count++] = xstrdup(e[i].key);
        }
        free(kname);
        free(sid);
        free(rs);
    }
    if (store->foreign_count > 0 && !store->foreign_warned) {
        store->foreign_warned = true;
        for (size_t i = 0; i < store->foreign_count; i++)
            LOG_WARN("offsets %s %s holds a position under %s, which is not this source's "
                     "(name \"%s\", topic.prefix \"%s\"): it is not used; if it is this "
                     "source's, set `name` (the connector name, first element) and "
                     "topic.prefix (server_id) to match it",
                     where_kind(store), where(store), store->foreign[i], name, prefix);
    }
}

bool offset_store_load_forms(struct offset_store *store, const char *const *forms, size_t nforms,
                             struct mcdc_position *pos, bool *found,
                             struct offset_origin *origin, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = store->cfg;
    const char *names[2] = {mcdc_config_connector_name(cfg), cfg->topic_prefix};
    size_t nnames = strcmp(names[0], names[1]) ? 2 : 1;
    struct offset_entry *entries = NULL;
    size_t n = 0;
    struct mcdc_position best;
    uint64_t best_t = 0;
    char *best_key = NULL;
    bool ok;

    *found = false;
    if (origin) {
        origin->key = NULL;
        origin->writer = OFFSET_WRITER_MONGOCDC;
    }
    if (!store->ops->scan(store, &entries, &n, err))
        return false;
    note_foreign(store, entries, n);
    position_init(&best);
    ok = true;
    for (size_t f = 0; ok && f < nforms; f++) {
        for (size_t k = 0; ok && k < nnames; k++) {
            char *key = offsets_partition_key(names[k], cfg->topic_prefix, forms[f]);
            const char *value = NULL;
            bool present = false;
            for (size_t i = 0; i < n; i++) {
                if (!strcmp(entries[i].key, key)) {
                    value = entries[i].value_json;
                    present = true;
                }
            }
            if (!present || value == NULL) {
                time_note(store, key, false, 0);
                free(key);
                continue;
            }
            struct mcdc_position p;
            position_init(&p);
            if (!position_from_json(value, &p, err)) {
                mcdc_error_prefix(err, "offsets entry %s in %s %s", key, where_kind(store),
                                  where(store));
                position_clear(&p);
                free(key);
                ok = false;
                break;
            }
            uint64_t t = position_time(&p);
            time_note(store, key, true, t);
            if (best_key == NULL || t > best_t) {
                position_clear(&best);
                position_copy(&best, &p);
                best_t = t;
                free(best_key);
                best_key = key;
                key = NULL;
            }
            position_clear(&p);
            free(key);
        }
    }
    offset_entries_free(entries, n);
    if (ok && best_key != NULL) {
        position_clear(pos);
        position_copy(pos, &best);
        *found = true;
        if (origin) {
            origin->key = best_key;
            origin->writer = (enum offset_writer)best.writer;
            best_key = NULL;
        }
    }
    position_clear(&best);
    free(best_key);
    return ok;
}

bool offset_store_load(struct offset_store *store, const char *rs, struct mcdc_position *pos,
                       bool *found, struct mcdc_error *err)
{
    const char *forms[1] = {rs};
    return offset_store_load_forms(store, forms, 1, pos, found, NULL, err);
}

/* The time stored under key, as this handle knows it (read once when not). */
static bool stored_time(struct offset_store *store, const char *key, bool *present, uint64_t *t,
                        struct mcdc_error *err)
{
    struct stored_time *s = time_slot(store, key);
    if (s == NULL) {
        struct offset_entry *entries = NULL;
        size_t n = 0;
        const char *value = NULL;
        if (!store->ops->scan(store, &entries, &n, err))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(entries[i].key, key))
                value = entries[i].value_json;
        uint64_t vt = 0;
        if (value != NULL) {
            struct mcdc_position p;
            struct mcdc_error ignored = MCDC_ERROR_INIT;
            position_init(&p);
            /* A corrupt stored value does not block a save that replaces it. */
            if (position_from_json(value, &p, &ignored))
                vt = position_time(&p);
            position_clear(&p);
        }
        time_note(store, key, value != NULL, vt);
        offset_entries_free(entries, n);
        s = time_slot(store, key);
    }
    *present = s->present;
    *t = s->time;
    return true;
}

static void describe_time(uint64_t t, char *out, size_t cap)
{
    snprintf(out, cap, "Timestamp(%" PRIu64 ", %" PRIu64 ")", t >> 32, t & 0xffffffffu);
}

bool offset_store_save_flags(struct offset_store *store, const char *rs,
                             const struct mcdc_position *pos, unsigned flags,
                             struct mcdc_error *err)
{
    const struct mcdc_config *cfg = store->cfg;
    char *key = offsets_partition_key(mcdc_config_connector_name(cfg), cfg->topic_prefix, rs);
    uint64_t t = position_time(pos), old = 0;
    bool present = false, ok;

    if (!store->read_only && t != 0 && !stored_time(store, key, &present, &old, err)) {
        free(key);
        return false;
    }
    if (present && old != 0 && t != 0 && t < old) {
        char a[64], b[64];
        describe_time(t, a, sizeof a);
        describe_time(old, b, sizeof b);
        if (!(flags & OFFSET_SAVE_ALLOW_BACKWARDS)) {
            LOG_ERROR("offsets: refusing to store position %s under %s: the stored one, %s, is "
                      "newer, and a position never moves backwards (set it on purpose with "
                      "`mongocdc offsets set`)",
                      a, key, b);
            mcdc_error_set(err, MCDC_ERR_IO, ERANGE,
                           "position %s is older than the stored %s under %s: not stored", a, b,
                           key);
            free(key);
            return false;
        }
        LOG_WARN("offsets: moving the stored position under %s back from %s to %s, as asked", key,
                 b, a);
    }
    char *value = position_to_json_dialect(pos, cfg->dialect);
    ok = store->ops->save(store, key, value, err);
    if (ok)
        time_note(store, key, true, t);
    free(value);
    free(key);
    return ok;
}

bool offset_store_save(struct offset_store *store, const char *rs, const struct mcdc_position *pos,
                       struct mcdc_error *err)
{
    return offset_store_save_flags(store, rs, pos, 0, err);
}

bool offset_store_put(struct offset_store *store, const char *key, const char *value_json,
                      struct mcdc_error *err)
{
    bool ok = store->ops->save(store, key, value_json, err);
    if (ok) {
        /* Forget what this handle knew: the next save reads the key again. */
        struct stored_time *s = time_slot(store, key);
        if (s != NULL) {
            free(s->key);
            *s = store->times[--store->times_count];
        }
    }
    return ok;
}

bool offset_store_remove(struct offset_store *store, const char *rs, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = store->cfg;
    char *key = offsets_partition_key(mcdc_config_connector_name(cfg), cfg->topic_prefix, rs);
    bool ok = offset_store_put(store, key, NULL, err);
    free(key);
    return ok;
}

void offset_store_set_writer(struct offset_store *store, offset_store_writer fn, void *ctx)
{
    store->writer = fn;
    store->writer_ctx = ctx;
}
