/*
 * snapshot/split: splitting one large collection into `_id` ranges that the
 * initial snapshot's readers copy in parallel (snapshot.max.threads with
 * snapshot.collection.split.min.documents; Debezium parallelises by
 * collection only).
 *
 * Split points come from `$sample` of the `_id`s (SPLIT_SAMPLES_PER_PART per
 * range), sorted in BSON order (keyrange_compare) and cut at the quantiles.
 * Why `$sample`: one cheap query (WiredTiger's random cursor when the sample
 * is under 5% of the collection, else a scan with a top-k sort), allowed to
 * any user with find, through mongos as on a shard; ranges are balanced to a
 * few percent, which is all parallel reading needs. splitVector gives exact
 * size-based points but needs the clusterManager action and does not run
 * through mongos; reading every key with a projection is exact but costs a
 * full index pass (and its network traffic) before any document is copied.
 * Correctness never depends on the points: the ranges (-, p1], (p1, p2], ...,
 * (pn, -) cover every key exactly once (keyrange_span_filter), whatever the
 * sample.
 *
 * Internal to the snapshot module. Thread: any (the client is the caller's).
 */
#ifndef MCDC_SNAPSHOT_SPLIT_H
#define MCDC_SNAPSHOT_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "common/error.h"

#define SPLIT_SAMPLES_PER_PART 1000

/*
 * How many ranges a collection of estimated documents is read in: 1 when
 * threads <= 1, min_docs is 0 or estimated < min_docs (or unknown, -1);
 * else min(threads, estimated / min_docs), at least 2.
 */
size_t split_parts(int64_t estimated, int64_t min_docs, size_t threads);

/*
 * Samples db.coll's `_id`s and returns in *points (a new array of *npoints
 * deep-copied values, increasing and distinct; free with split_points_free)
 * at most parts - 1 split points. Fewer (even none) when the sample has fewer
 * distinct keys. Returns false with err (domain MONGO) when the aggregate
 * fails; the caller then reads the collection whole.
 */
bool split_points(mongoc_client_t *client, const char *db, const char *coll, size_t parts,
                  bson_value_t **points, size_t *npoints, struct mcdc_error *err);

void split_points_free(bson_value_t *points, size_t npoints);

#endif
