/*
 * tools/offsets_source: which stored entries belong to this configuration's
 * source, and which of them its tasks adopt, for `mongocdc offsets`. A
 * Kafka Connect offsets topic is often shared by many connectors (each key
 * is [connector name, partition]): show, export and copy work on this
 * source's entries unless --all, and `show` says "this config: yes" only for
 * keys a task looks up, by the daemon's own rule (offsets_partition_forms
 * under both connector names, byte for byte as offsets_partition_key writes
 * them).
 *
 * Thread: main.
 */
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "config/config.h"
#include "offsets/offsets.h"
#include "tools/tools_internal.h"

bool key_of_source(const struct mcdc_config *cfg, const char *key)
{
    char *name = NULL, *server_id = NULL, *rs = NULL;
    if (!offsets_parse_key(key, &name, &server_id, &rs))
        return false;
    bool ours = !strcmp(server_id, cfg->topic_prefix) ||
                !strcmp(name, mcdc_config_connector_name(cfg)) || !strcmp(name, cfg->topic_prefix);
    free(name);
    free(server_id);
    free(rs);
    return ours;
}

char *config_replica_set(const struct mcdc_config *cfg)
{
    const char *uri = cfg->connection_string;
    const char *q = uri ? strchr(uri, '?') : NULL;
    for (const char *p = q; p; p = strchr(p + 1, '&')) {
        if (!strncmp(p + 1, "replicaSet=", 11)) {
            const char *v = p + 12;
            return xstrndup(v, strcspn(v, "&#"));
        }
    }
    return NULL;
}

/* Whether key is byte for byte one of the keys a task of this kind looks up. */
static bool task_adopts(const struct mcdc_config *cfg, const char *key, const char *rs, bool merged,
                        bool per_shard)
{
    const char *names[2] = {mcdc_config_connector_name(cfg), cfg->topic_prefix};
    const char *forms[3];
    size_t n = offsets_partition_forms(cfg, rs, merged, per_shard, forms);
    for (size_t f = 0; f < n; f++) {
        for (size_t i = 0; i < 2; i++) {
            char *k = offsets_partition_key(names[i], cfg->topic_prefix, forms[f]);
            bool eq = !strcmp(k, key);
            free(k);
            if (eq)
                return true;
        }
    }
    return false;
}

bool key_adopted(const struct mcdc_config *cfg, const char *key)
{
    char *name = NULL, *server_id = NULL, *rs = NULL;
    if (!offsets_parse_key(key, &name, &server_id, &rs))
        return false;
    bool yes;
    if (cfg->connection_mode == MCDC_CONNECTION_SHARDED) {
        yes = task_adopts(cfg, key, NULL, true, false);
    } else {
        /* a replica set's task (its name: the connection string's replicaSet
         * when given, else whatever the server says, so the key's) or, on a
         * sharded cluster reached without replicaSet, a shard's task */
        char *set = config_replica_set(cfg);
        yes = task_adopts(cfg, key, set ? set : rs, false, false) ||
              (!set && rs && task_adopts(cfg, key, rs, false, true));
        free(set);
    }
    free(name);
    free(server_id);
    free(rs);
    return yes;
}

bool key_well_formed(const char *key)
{
    /* [string, object], as Kafka Connect's JsonConverter writes a partition key */
    char *wrapped = xasprintf("{\"k\":%s}", key);
    bson_error_t berr;
    bson_t *doc = bson_new_from_json((const uint8_t *)wrapped, -1, &berr);
    free(wrapped);
    if (!doc)
        return false;
    bson_iter_t it, a;
    bool ok = bson_iter_init_find(&it, doc, "k") && BSON_ITER_HOLDS_ARRAY(&it) &&
              bson_iter_recurse(&it, &a) && bson_iter_next(&a) && BSON_ITER_HOLDS_UTF8(&a) &&
              bson_iter_next(&a) && BSON_ITER_HOLDS_DOCUMENT(&a) && !bson_iter_next(&a);
    bson_destroy(doc);
    return ok;
}

size_t kvlist_keep_source(const struct mcdc_config *cfg, struct kvlist *l)
{
    size_t kept = 0, dropped = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (key_of_source(cfg, l->items[i].key)) {
            l->items[kept++] = l->items[i];
        } else {
            free(l->items[i].key);
            free(l->items[i].value);
            dropped++;
        }
    }
    l->count = kept;
    return dropped;
}
