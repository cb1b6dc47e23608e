/*
 * topology/merged: the offsets side of mongodb.connection.mode sharded (one
 * change stream through mongos for the whole cluster) and of switching
 * between it and per-shard capture (debezium-format.md §4.1, §4.4).
 *
 * Partition of the merged stream: {server_id} in the 3.x dialect (Debezium
 * 2.6+, MongoDbPartition); {server_id, rs: "cluster"} in the 1.9 dialect
 * (1.9 has no merged mode; 2.2-2.5's sharded mode, whose layout is nearest,
 * names its single partition "cluster", ConnectionStrings.CLUSTER_RS_NAME).
 *
 * Thread: main (before the tasks start); no state kept.
 */
#ifndef MCDC_TOPOLOGY_MERGED_H
#define MCDC_TOPOLOGY_MERGED_H

#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "common/error.h"
#include "config/config.h"
#include "offsets/offsets.h"
#include "topology/shards.h"

/* The merged task's name and, in the 1.9 dialect, its partition's rs. */
#define MERGED_NAME "cluster"

/* True when the merged partition of cfg's dialect is {server_id, rs: "cluster"}. */
bool merged_rs_partition(const struct mcdc_config *cfg);

/*
 * Where the merged stream starts when its own partition holds nothing
 * (§4.4, mode switch per-shard -> merged): reads config.shards through
 * mongos (a borrowed pool) and every shard's stored position
 * ({server_id, rs: <shard's replica set>}). When every shard has a usable
 * position (not an interrupted snapshot), *start gets the oldest (by cluster
 * time; a token-only position by its token's time) as sec/ord, streamed from
 * inclusively with startAtOperationTime: nothing any shard had not delivered
 * is skipped, and what the other shards delivered after it is produced again
 * (a WARN gives the count of shards). When some shards have a position and
 * others none, *has_start is false and a WARN names them: the merged stream
 * then follows snapshot.mode as with no offsets (Debezium 2.6+ does the same).
 * *has_start false too when the merged partition already has a position or
 * no shard has one. start is initialised by the caller. Returns false with
 * err when the store or config.shards cannot be read.
 */
bool merged_start_position(const struct mcdc_config *cfg, mongoc_client_pool_t *mongos,
                           struct mcdc_position *start, bool *has_start, struct mcdc_error *err);

/*
 * Mode switch merged -> per-shard (§4.4, Debezium 2.5 DBZ-7272): when no
 * shard of shards has a stored position but the merged stream's partition
 * (either dialect's) has one, per-shard tasks would start afresh and the
 * merged position would be silently dropped: refused with an error naming
 * internal.mongodb.allow.offset.invalidation, unless that option is true
 * (then a WARN says the merged position is ignored and every shard follows
 * snapshot.mode). Returns false with err when refused or the store cannot be
 * read.
 */
bool merged_check_per_shard_start(const struct mcdc_config *cfg, const struct shard_list *shards,
                                  struct mcdc_error *err);

#endif
