/*
 * snapshot/split: `_id` split points of a large collection from `$sample`
 * (see split.h).
 */
#include "snapshot/split.h"

#include <stdlib.h>

#include "common/xalloc.h"
#include "snapshot/keyrange.h"

size_t split_parts(int64_t estimated, int64_t min_docs, size_t threads)
{
    int64_t n;
    if (threads <= 1 || min_docs <= 0 || estimated < min_docs)
        return 1;
    n = estimated / min_docs;
    if (n < 2)
        n = 2;
    return (size_t)n < threads ? (size_t)n : threads;
}

static int value_cmp(const void *a, const void *b)
{
    return keyrange_compare(a, b);
}

void split_points_free(bson_value_t *points, size_t npoints)
{
    for (size_t i = 0; i < npoints; i++)
        bson_value_destroy(&points[i]);
    free(points);
}

bool split_points(mongoc_client_t *client, const char *db, const char *coll, size_t parts,
                  bson_value_t **points, size_t *npoints, struct mcdc_error *err)
{
    mongoc_collection_t *mc;
    mongoc_cursor_t *cur;
    bson_t pipeline = BSON_INITIALIZER, stage, arg;
    const bson_t *doc;
    bson_error_t error;
    bson_iter_t it;
    bson_value_t *keys = NULL, *out;
    size_t n = 0, cap = 0, distinct = 0, m = 0;
    bool ok = true;

    *points = NULL;
    *npoints = 0;
    if (parts < 2)
        return true;
    /* [{$sample: {size: S}}, {$project: {_id: 1}}] */
    bson_append_document_begin(&pipeline, "0", 1, &stage);
    bson_append_document_begin(&stage, "$sample", 7, &arg);
    BSON_APPEND_INT64(&arg, "size", (int64_t)(parts * SPLIT_SAMPLES_PER_PART));
    bson_append_document_end(&stage, &arg);
    bson_append_document_end(&pipeline, &stage);
    bson_append_document_begin(&pipeline, "1", 1, &stage);
    bson_append_document_begin(&stage, "$project", 8, &arg);
    BSON_APPEND_INT32(&arg, "_id", 1);
    bson_append_document_end(&stage, &arg);
    bson_append_document_end(&pipeline, &stage);

    mc = mongoc_client_get_collection(client, db, coll);
    cur = mongoc_collection_aggregate(mc, MONGOC_QUERY_NONE, &pipeline, NULL, NULL);
    while (mongoc_cursor_next(cur, &doc)) {
        if (!bson_iter_init_find(&it, doc, "_id"))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            keys = xrealloc(keys, cap * sizeof *keys);
        }
        bson_value_copy(bson_iter_value(&it), &keys[n++]);
    }
    if (mongoc_cursor_error(cur, &error)) {
        ok = mcdc_error_from_bson(err, error.code, error.message, false);
        mcdc_error_prefix(err, "$sample of %s.%s", db, coll);
    }
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(mc);
    bson_destroy(&pipeline);
    if (!ok || n == 0) {
        split_points_free(keys, n);
        return ok;
    }

    qsort(keys, n, sizeof *keys, value_cmp);
    /* keep distinct keys only (a random cursor may return one twice) */
    for (size_t i = 0; i < n; i++) {
        if (distinct > 0 && keyrange_compare(&keys[distinct - 1], &keys[i]) == 0) {
            bson_value_destroy(&keys[i]);
            continue;
        }
        keys[distinct++] = keys[i];
    }
    out = xcalloc(parts, sizeof *out);
    for (size_t p = 1; p < parts; p++) {
        size_t at = p * distinct / parts;
        if (at == 0 || at >= distinct)
            continue;
        if (m > 0 && keyrange_compare(&out[m - 1], &keys[at - 1]) >= 0)
            continue;
        bson_value_copy(&keys[at - 1], &out[m++]); /* range p ends at its last sampled key */
    }
    split_points_free(keys, distinct);
    *points = out;
    *npoints = m;
    return true;
}
