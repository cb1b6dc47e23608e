/*
 * topology/merged: offsets of the merged mongos stream and the two mode
 * switches of debezium-format.md §4.4 (see merged.h).
 */
#include "topology/merged.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

bool merged_rs_partition(const struct mcdc_config *cfg)
{
    return cfg->dialect == MCDC_DIALECT_1_9;
}

bool merged_start_position(const struct mcdc_config *cfg, mongoc_client_pool_t *mongos,
                           struct mcdc_position *start, bool *has_start, struct mcdc_error *err)
{
    struct offset_store *store;
    struct shard_list shards = {0};
    struct mcdc_position pos;
    char *missing = NULL, *present = NULL, *oldest_shard = NULL;
    uint64_t oldest = 0, merged_t = 0;
    size_t npresent = 0;
    bool found = false, ok;

    *has_start = false;
    store = offset_store_open(cfg, err);
    if (store == NULL)
        return false;
    position_init(&pos);
    ok = offset_store_load(store, merged_rs_partition(cfg) ? MERGED_NAME : NULL, &pos, &found, err);
    merged_t = ok && found ? position_time(&pos) : 0;
    position_clear(&pos);
    if (ok)
        ok = shards_read(mongos, &shards, err);
    /* Merged offsets older than a shard's own: per-shard capture ran after
     * the merged stream (a switch back), so the shards' positions decide,
     * as on a first switch (never resume the stale merged position). */
    for (size_t i = 0; ok && found && merged_t != 0 && i < shards.count; i++) {
        bool here = false;
        position_init(&pos);
        ok = offset_store_load(store, shards.items[i].rs, &pos, &here, err);
        if (ok && here && !pos.initsync && position_time(&pos) > merged_t) {
            LOG_WARN("mongodb.connection.mode sharded: the per-shard offsets of shard %s are "
                     "newer than the merged stream's: per-shard capture ran since; starting from "
                     "the shards' positions",
                     shards.items[i].name);
            found = false;
        }
        position_clear(&pos);
    }
    for (size_t i = 0; ok && !found && i < shards.count; i++) {
        bool here = false;
        uint64_t t;
        position_init(&pos);
        ok = offset_store_load(store, shards.items[i].rs, &pos, &here, err);
        t = ok && here && !pos.initsync ? position_time(&pos) : 0;
        if (ok && here && t != 0) {
            npresent++;
            xlist_add(&present, shards.items[i].name);
            if (oldest == 0 || t < oldest) {
                oldest = t;
                free(oldest_shard);
                oldest_shard = xstrdup(shards.items[i].name);
            }
        } else if (ok) {
            xlist_add(&missing, shards.items[i].name);
        }
        position_clear(&pos);
    }
    offset_store_close(store);
    if (ok && npresent > 0 && missing != NULL) {
        LOG_WARN("mongodb.connection.mode sharded: no merged-stream offsets yet; shards %s have "
                 "per-shard offsets but shards %s have none (or an interrupted snapshot), so no "
                 "position covers the whole cluster: starting as with no offsets (snapshot.mode "
                 "decides)",
                 present, missing);
    } else if (ok && npresent > 0) {
        start->sec = (int64_t)(oldest >> 32);
        start->ord = (int64_t)(oldest & 0xffffffffu);
        *has_start = true;
        LOG_WARN("mongodb.connection.mode sharded: switching from per-shard offsets of %zu shards "
                 "to one stream through mongos, from the oldest shard position Timestamp(%lld, "
                 "%lld) (shard %s); events the other %zu shards had delivered after it are "
                 "produced again (duplicates, none lost)",
                 npresent, (long long)start->sec, (long long)start->ord, oldest_shard,
                 npresent - 1);
    }
    free(missing);
    free(present);
    free(oldest_shard);
    shard_list_clear(&shards);
    return ok;
}

bool merged_check_per_shard_start(const struct mcdc_config *cfg, const struct shard_list *shards,
                                  struct mcdc_error *err)
{
    struct offset_store *store = offset_store_open(cfg, err);
    struct mcdc_position pos;
    bool ok = true, merged = false;
    uint64_t merged_t = 0, newest_shard = 0;
    size_t with_offsets = 0;
    const char *which = NULL;

    if (store == NULL)
        return false;
    /* Either dialect's merged partition: {server_id} (3.x) or rs "cluster" (1.9). */
    position_init(&pos);
    ok = offset_store_load(store, NULL, &pos, &merged, err);
    which = "{server_id}";
    if (ok && !merged) {
        position_clear(&pos);
        position_init(&pos);
        ok = offset_store_load(store, MERGED_NAME, &pos, &merged, err);
        which = "{server_id, rs: \"" MERGED_NAME "\"}";
    }
    merged_t = ok && merged ? position_time(&pos) : 0;
    position_clear(&pos);
    for (size_t i = 0; ok && merged && i < shards->count; i++) {
        bool here = false;
        position_init(&pos);
        ok = offset_store_load(store, shards->items[i].rs, &pos, &here, err);
        if (ok && here) {
            uint64_t t = position_time(&pos);
            with_offsets++;
            if (t > newest_shard)
                newest_shard = t;
        }
        position_clear(&pos);
    }
    offset_store_close(store);
    /* Per-shard offsets newer than the merged stream's: per-shard capture
     * ran after the merged stream (an earlier switch back, allowed), so
     * they are where to continue. Otherwise the merged stream delivered
     * past every shard's own position: continuing per shard would replay
     * (or, with no shard offsets, lose) what it delivered (§4.4). */
    if (!ok || !merged || (with_offsets > 0 && merged_t != 0 && newest_shard > merged_t))
        return ok;
    if (!cfg->allow_offset_invalidation) {
        LOG_ERROR("the newest stored offsets are those of one stream through mongos (partition "
                  "%s, mongodb.connection.mode sharded)%s: per-shard capture cannot continue "
                  "from them. Set mongodb.connection.mode sharded again, or "
                  "internal.mongodb.allow.offset.invalidation: true to ignore them (%s)",
                  which,
                  with_offsets > 0 ? "; the per-shard offsets are older, from before the switch"
                                   : " and no shard has offsets of its own",
                  with_offsets > 0 ? "the shards then continue from their older offsets: "
                                     "events after them are produced again"
                                   : "every shard then follows snapshot.mode");
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "offsets of the merged mongos stream are the newest: refused unless "
                       "internal.mongodb.allow.offset.invalidation is true (see the error above)");
        return false;
    }
    LOG_WARN("internal.mongodb.allow.offset.invalidation is true: the offsets of the stream "
             "through mongos (partition %s) are ignored; %s",
             which,
             with_offsets > 0 ? "the shards continue from their older per-shard offsets "
                                "(events after them are produced again)"
                              : "every shard's task follows snapshot.mode as with no offsets");
    return true;
}
