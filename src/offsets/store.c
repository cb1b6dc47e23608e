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

#include "common/xalloc.h"
#include "offsets/offsets_internal.h"

struct offset_store *offset_store_open(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    if (!cfg->topic_prefix || !cfg->topic_prefix[0]) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "offsets: topic.prefix is not set");
        return NULL;
    }
    struct offset_store *store = xcalloc(1, sizeof *store);
    store->cfg = cfg;
    bool ok = cfg->offset_storage == MCDC_OFFSETS_KAFKA ? store_kafka_open(store, err)
                                                        : store_file_open(store, err);
    if (!ok) {
        free(store);
        return NULL;
    }
    return store;
}

void offset_store_close(struct offset_store *store)
{
    if (!store)
        return;
    store->ops->close(store);
    free(store);
}

bool offset_store_load(struct offset_store *store, const char *rs, struct mcdc_position *pos,
                       bool *found, struct mcdc_error *err)
{
    char *key = offsets_partition_key(store->cfg->topic_prefix, store->cfg->topic_prefix, rs);
    char *value = NULL;
    bool ok = store->ops->load(store, key, &value, err);
    *found = false;
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
