/*
 * topology/gate internals shared by gate.c (the registry, chunk maps and
 * decisions) and gate_order.c (BSON order, the chunk search). Not a public
 * contract; exposed for tests.
 */
#ifndef MCDC_TOPOLOGY_GATE_INTERNAL_H
#define MCDC_TOPOLOGY_GATE_INTERNAL_H

#include <stddef.h>

#include <bson/bson.h>

#include "topology/gate.h"

/* One config.chunks document of a chunk map. */
struct chunk {
    bson_t *min, *max;
    struct gate_entry *hist; /* newest first; shard strings owned */
    size_t nhist;
};

/* One shard key value (a struct: bson_iter_t is over-aligned for arrays). */
struct keyval {
    bson_iter_t it;
};

/* Compares key values vals[0..n) (in shard key pattern order) with a chunk
 * bound document's values, in BSON order (gate_compare_values): -1, 0, 1;
 * only the first n values of the bound count. */
int gate_cmp_key_bound(const struct keyval *vals, size_t n, const bson_t *bound);

/*
 * The index of the chunk of chunks[0..n) whose [min, max) holds the key
 * values vals[0..nvals), or n when none does. config.chunks is read sorted
 * by min and chunks do not overlap, so the last chunk whose min is at or
 * below the key is the only one that can hold it: a binary search,
 * O(log n) comparisons per event (a collection of thousands of chunks is
 * looked up for every event of it). A map out of that order (the candidate
 * does not hold the key) is scanned in full, so the answer never depends on
 * the order: the first chunk that holds the key.
 */
size_t gate_chunk_find(const struct chunk *chunks, size_t n, const struct keyval *vals,
                       size_t nvals);

#endif
