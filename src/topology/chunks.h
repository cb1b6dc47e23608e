/*
 * topology/chunks: which documents of each sharded collection a shard owns,
 * from config.collections and config.chunks (mongo-sim-spec.md §6.3), as
 * find filters for the shard's initial snapshot.
 *
 * Why: a shard's primary returns every document it stores, including orphans
 * (documents a chunk migration left behind on the donor until the range
 * deleter removes them, orphanCleanupDelaySecs = 900 s by default) and the
 * copies a migration in flight has made on the recipient. Reading each
 * shard's primary directly would emit those documents twice. The snapshot
 * keeps per-shard reads (parallel, local to each shard, consistent with each
 * shard's own stream start position) rather than funnelling the cluster
 * through one mongos, which a config-server seed does not even name, and
 * filters by chunk ownership instead: one chunk map is read once, before any
 * shard's snapshot starts, and every shard keeps only the documents whose
 * shard key falls in a chunk that map gives it. Migrations committing during
 * the snapshot then cannot make two shards both claim, or both disown, a
 * document: the donor still holds the moved documents (orphans are deleted
 * only after the delay), and the recipient does not own them in that map.
 * Later changes to them come through the streams from each shard's recorded
 * start position.
 *
 * The filter is an $expr comparing the shard key fields in BSON order
 * ($gte/$lt of aggregation compare across types, unlike query operators,
 * which bracket by type; a missing field counts as null, as the shard key
 * does). Hashed shard keys have chunk bounds on the key's hash, which a find
 * cannot compute: their filter is hashkey_filter's document, which the
 * snapshot reader applies to each document read (snapshot/hashkey.h).
 *
 * Thread: main.
 */
#ifndef MCDC_TOPOLOGY_CHUNKS_H
#define MCDC_TOPOLOGY_CHUNKS_H

#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "common/error.h"

/*
 * Reads config.collections and config.chunks once through pool (a mongos or
 * the config server replica set) and fills outs[j] (nshards documents,
 * initialised by the caller) with one member per sharded collection: key
 * "<db>.<coll>", value the filter document ({"$expr": ...}) that keeps the
 * documents shards[j] owns in that one chunk map ({"$expr": {"$or": []}},
 * i.e. none, when it owns no chunk). Collections with a hashed shard key get
 * hashkey_filter's document instead (not a query: test it with
 * hashkey_is_filter and apply it client-side). Returns false with err (retriable
 * for network errors) when a read fails.
 */
bool chunks_owned_filters(mongoc_client_pool_t *pool, const char *const *shards, size_t nshards,
                          bson_t *outs, struct mcdc_error *err);

/*
 * The filter that keeps documents whose shard key (pattern: the shard key
 * document, e.g. {region: 1, _id: 1}) lies in one of the n half-open ranges
 * [mins[i], maxs[i]) (config.chunks `min`/`max` documents, fields in pattern
 * order), appended to out as {"$expr": {"$or": [...]}}. Exposed for tests.
 */
void chunks_range_filter(const bson_t *pattern, const bson_t *const *mins,
                         const bson_t *const *maxs, size_t n, bson_t *out);

#endif
