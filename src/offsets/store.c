/*
 * offsets/store: the durable offset store front (design.md §7). A replica
 * set's position is stored under its Kafka Connect partition key
 * ["<topic.prefix>",{"rs":"<rs>","server_id":"<topic.prefix>"}] (the 1.x
 * partition {server_id, rs}, debezium-format.md §4.1) in either back-end:
 * store_file.c (default) or store_kafka.c. Both keep the value as the JSON text
 * position_to_json() writes.
 *
 * Thread: worker (each task opens its own handle).
 */
#include "offsets/offsets.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "offsets/offsets_internal.h"

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

void offset_store_close(struct offset_store *store)
{
    if (!store)
        return;
    store->ops->close(store);
    for (size_t i = 0; i < store->other_count; i++)
        free(store->other_prefixes[i]);
    free(store->other_prefixes);
    free(store);
}

void offsets_note_key(struct offset_store *store, const char *key, size_t len)
{
    if (len < 4 || key[0] != '[' || key[1] != '"')
        return;
    size_t i = 2;
    while (i < len && key[i] != '"')
        i += key[i] == '\\' ? 2 : 1;
    if (i >= len)
        return;
    const char *name = key + 2;
    size_t nlen = i - 2;
    const char *prefix = store->cfg->topic_prefix;
    if (strlen(prefix) == nlen && !memcmp(name, prefix, nlen))
        return;
    static const char sid[] = "\"server_id\"";
    bool ours = false;
    for (size_t j = i; j + sizeof sid - 1 <= len && !ours; j++)
        ours = !memcmp(key + j, sid, sizeof sid - 1);
    if (!ours)
        return;
    for (size_t k = 0; k < store->other_count; k++)
        if (strlen(store->other_prefixes[k]) == nlen &&
            !memcmp(store->other_prefixes[k], name, nlen))
            return;
    store->other_prefixes =
        xrealloc(store->other_prefixes, (store->other_count + 1) * sizeof *store->other_prefixes);
    store->other_prefixes[store->other_count++] = xstrndup(name, nlen);
}

bool offset_store_load(struct offset_store *store, const char *rs, struct mcdc_position *pos,
                       bool *found, struct mcdc_error *err)
{
    char *key = offsets_partition_key(store->cfg->topic_prefix, store->cfg->topic_prefix, rs);
    char *value = NULL;
    bool ok = store->ops->load(store, key, &value, err);
    *found = false;
    for (size_t i = 0; ok && i < store->other_count; i++)
        LOG_WARN("offsets store %s holds offsets for topic.prefix \"%s\", not this one (\"%s\"): "
                 "they are not used; if topic.prefix was changed, capture does not resume from "
                 "them",
                 store->cfg->offset_storage == MCDC_OFFSETS_KAFKA ? "topic" : "file",
                 store->other_prefixes[i], store->cfg->topic_prefix);
    if (ok && value) {
        ok = position_from_json(value, pos, err);
        if (ok)
            *found = true;
        else
            mcdc_error_prefix(
                err, "offsets entry %s in %s %s", key,
                store->cfg->offset_storage == MCDC_OFFSETS_KAFKA ? "topic" : "file",
                store->cfg->offset_storage == MCDC_OFFSETS_KAFKA
                    ? (store->cfg->offsets_topic ? store->cfg->offsets_topic : "mongocdc-offsets")
                    : store->cfg->offsets_file);
    }
    free(value);
    free(key);
    return ok;
}

bool offset_store_save(struct offset_store *store, const char *rs, const struct mcdc_position *pos,
                       struct mcdc_error *err)
{
    char *key = offsets_partition_key(store->cfg->topic_prefix, store->cfg->topic_prefix, rs);
    char *value = position_to_json(pos);
    bool ok = store->ops->save(store, key, value, err);
    free(value);
    free(key);
    return ok;
}

void offset_entries_free(struct offset_entries *list)
{
    if (!list)
        return;
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].key);
        free(list->items[i].value);
    }
    free(list->items);
    list->items = NULL;
    list->count = 0;
}

void offset_entries_set(struct offset_entries *list, const char *key, size_t klen,
                        const char *value, size_t vlen)
{
    for (size_t i = 0; i < list->count; i++) {
        struct offset_entry *e = &list->items[i];
        if (strlen(e->key) != klen || memcmp(e->key, key, klen) != 0)
            continue;
        free(e->value);
        if (value) {
            e->value = xstrndup(value, vlen);
        } else {
            free(e->key);
            list->items[i] = list->items[--list->count];
        }
        return;
    }
    if (!value)
        return;
    list->items = xrealloc(list->items, (list->count + 1) * sizeof *list->items);
    list->items[list->count].key = xstrndup(key, klen);
    list->items[list->count].value = xstrndup(value, vlen);
    list->count++;
}

bool offset_store_list(struct offset_store *store, struct offset_entries *out,
                       struct mcdc_error *err)
{
    bool ok = store->ops->list(store, out, err);
    if (!ok)
        offset_entries_free(out);
    return ok;
}

bool offset_store_put_raw(struct offset_store *store, const char *key, const char *value_json,
                          struct mcdc_error *err)
{
    if (store->read_only)
        return mcdc_error_set(err, MCDC_ERR_INTERNAL, 0, "offsets store opened read-only");
    return store->ops->save(store, key, value_json, err);
}
