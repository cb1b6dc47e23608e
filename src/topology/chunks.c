/*
 * topology/chunks: chunk ownership filters for per-shard snapshots (see
 * chunks.h for why; mongo-sim-spec.md §6.3 for the documents).
 */
#include "topology/chunks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "snapshot/hashkey.h"

/* {"$ifNull": ["$<field>", null]}: the shard key value, null when missing. */
static void append_key_value(bson_t *arr, const char *idx, const char *field)
{
    bson_t doc, args;
    char path[512];

    snprintf(path, sizeof path, "$%s", field);
    bson_append_document_begin(arr, idx, -1, &doc);
    bson_append_array_begin(&doc, "$ifNull", -1, &args);
    bson_append_utf8(&args, "0", 1, path, -1);
    bson_append_null(&args, "1", 1);
    bson_append_array_end(&doc, &args);
    bson_append_document_end(arr, &doc);
}

/* {op: [<key value>, {"$literal": v}]} appended to parent under key. */
static void append_cmp(bson_t *parent, const char *key, const char *op, const char *field,
                       const bson_value_t *v)
{
    bson_t doc, args, lit;

    bson_append_document_begin(parent, key, -1, &doc);
    bson_append_array_begin(&doc, op, -1, &args);
    append_key_value(&args, "0", field);
    bson_append_document_begin(&args, "1", 1, &lit);
    bson_append_value(&lit, "$literal", -1, v);
    bson_append_document_end(&args, &lit);
    bson_append_array_end(&doc, &args);
    bson_append_document_end(parent, &doc);
}

/*
 * Lexicographic bound on fields[i..n): lower (key >= vals) when lower, else
 * upper (key < vals). For i < n-1: {$or: [{strict: [k_i, v_i]},
 * {$and: [{$eq: [k_i, v_i]}, <bound on i+1..>]}]}.
 */
static void append_bound(bson_t *parent, const char *key, const char *const *fields,
                         const bson_value_t *vals, size_t i, size_t n, bool lower)
{
    bson_t or_doc, or_arr, and_doc, and_arr;

    if (i + 1 == n) {
        append_cmp(parent, key, lower ? "$gte" : "$lt", fields[i], &vals[i]);
        return;
    }
    bson_append_document_begin(parent, key, -1, &or_doc);
    bson_append_array_begin(&or_doc, "$or", -1, &or_arr);
    append_cmp(&or_arr, "0", lower ? "$gt" : "$lt", fields[i], &vals[i]);
    bson_append_document_begin(&or_arr, "1", 1, &and_doc);
    bson_append_array_begin(&and_doc, "$and", -1, &and_arr);
    append_cmp(&and_arr, "0", "$eq", fields[i], &vals[i]);
    append_bound(&and_arr, "1", fields, vals, i + 1, n, lower);
    bson_append_array_end(&and_doc, &and_arr);
    bson_append_document_end(&or_arr, &and_doc);
    bson_append_array_end(&or_doc, &or_arr);
    bson_append_document_end(parent, &or_doc);
}

/* The values of doc's fields in order (at most max); returns how many. */
static size_t values_of(const bson_t *doc, bson_value_t *vals, size_t max)
{
    bson_iter_t it;
    size_t n = 0;
    if (!bson_iter_init(&it, doc))
        return 0;
    while (n < max && bson_iter_next(&it))
        vals[n++] = *bson_iter_value(&it);
    return n;
}

#define MAX_KEY_FIELDS 32

void chunks_range_filter(const bson_t *pattern, const bson_t *const *mins,
                         const bson_t *const *maxs, size_t n, bson_t *out)
{
    const char *fields[MAX_KEY_FIELDS];
    bson_value_t lo[MAX_KEY_FIELDS], hi[MAX_KEY_FIELDS];
    size_t nf = 0;
    bson_iter_t it;
    bson_t expr, ranges;

    if (bson_iter_init(&it, pattern)) {
        while (nf < MAX_KEY_FIELDS && bson_iter_next(&it))
            fields[nf++] = bson_iter_key(&it);
    }
    bson_append_document_begin(out, "$expr", -1, &expr);
    bson_append_array_begin(&expr, "$or", -1, &ranges);
    for (size_t i = 0, k = 0; i < n && nf > 0; i++) {
        char idx[24];
        bson_t rdoc, rarr;
        if (values_of(mins[i], lo, nf) != nf || values_of(maxs[i], hi, nf) != nf)
            continue; /* a malformed bound: claim nothing for it */
        snprintf(idx, sizeof idx, "%zu", k++);
        bson_append_document_begin(&ranges, idx, -1, &rdoc);
        bson_append_array_begin(&rdoc, "$and", -1, &rarr);
        append_bound(&rarr, "0", fields, lo, 0, nf, true);
        append_bound(&rarr, "1", fields, hi, 0, nf, false);
        bson_append_array_end(&rdoc, &rarr);
        bson_append_document_end(&ranges, &rdoc);
    }
    bson_append_array_end(&expr, &ranges);
    bson_append_document_end(out, &expr);
}

/* One find over the config database (chunks sorted by min); the caller destroys the cursor. */
static mongoc_cursor_t *config_find(mongoc_client_t *c, const char *coll, const bson_t *filter)
{
    mongoc_collection_t *mc = mongoc_client_get_collection(c, "config", coll);
    bson_t opts = BSON_INITIALIZER, sort;
    mongoc_cursor_t *cur;

    BSON_APPEND_DOCUMENT_BEGIN(&opts, "sort", &sort);
    BSON_APPEND_INT32(&sort, "min", 1);
    bson_append_document_end(&opts, &sort);
    cur = mongoc_collection_find_with_opts(mc, filter, strcmp(coll, "chunks") == 0 ? &opts : NULL,
                                           NULL);
    bson_destroy(&opts);
    mongoc_collection_destroy(mc);
    return cur;
}

/* Appends to outs[j] the filter of collection `meta` (a config.collections
 * document) for shards[j], from one read of its chunks; returns false with
 * err on a failed read. */
static bool collection_filter(mongoc_client_t *c, const bson_t *meta, const char *ns,
                              const char *const *shards, size_t nshards, bson_t *outs,
                              struct mcdc_error *err)
{
    bson_iter_t it;
    bson_t pattern, filter = BSON_INITIALIZER, f;
    const uint8_t *data;
    uint32_t len;
    bson_t **mins = NULL, **maxs = NULL;
    char **owner = NULL;
    size_t n = 0, cap = 0;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    bson_error_t error;
    bool ok = true, hashed;

    if (!bson_iter_init_find(&it, meta, "key") || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return true;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&pattern, data, len))
        return true;
    hashed = hashkey_pattern_hashed(&pattern);
    /* 5.0+ chunks are keyed by the collection's uuid, 4.4 by ns. */
    if (bson_iter_init_find(&it, meta, "uuid"))
        bson_append_value(&filter, "uuid", -1, bson_iter_value(&it));
    else
        BSON_APPEND_UTF8(&filter, "ns", ns);
    cur = config_find(c, "chunks", &filter);
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t a, b, sh;
        const uint8_t *bdata;
        uint32_t blen;
        if (!bson_iter_init_find(&a, doc, "min") || !BSON_ITER_HOLDS_DOCUMENT(&a) ||
            !bson_iter_init_find(&b, doc, "max") || !BSON_ITER_HOLDS_DOCUMENT(&b) ||
            !bson_iter_init_find(&sh, doc, "shard") || !BSON_ITER_HOLDS_UTF8(&sh))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            mins = xrealloc(mins, cap * sizeof *mins);
            maxs = xrealloc(maxs, cap * sizeof *maxs);
            owner = xrealloc(owner, cap * sizeof *owner);
        }
        bson_iter_document(&a, &len, &data);
        bson_iter_document(&b, &blen, &bdata);
        mins[n] = bson_new_from_data(data, len);
        maxs[n] = bson_new_from_data(bdata, blen);
        if (mins[n] == NULL || maxs[n] == NULL) {
            bson_destroy(mins[n]);
            bson_destroy(maxs[n]);
            continue;
        }
        owner[n] = xstrdup(bson_iter_utf8(&sh, NULL));
        n++;
    }
    if (mongoc_cursor_error(cur, &error)) {
        mcdc_error_from_bson(err, error.code, error.message, true);
        mcdc_error_prefix(err, "cannot read config.chunks of %s", ns);
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    for (size_t j = 0; ok && j < nshards; j++) {
        const bson_t **lo = xcalloc(n ? n : 1, sizeof *lo), **hi = xcalloc(n ? n : 1, sizeof *hi);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            if (strcmp(owner[i], shards[j]) == 0) {
                lo[m] = mins[i];
                hi[m++] = maxs[i];
            }
        }
        bson_append_document_begin(&outs[j], ns, -1, &f);
        if (hashed) /* bounds are hash values: filtered by the reader (snapshot/hashkey.h) */
            hashkey_filter(&pattern, lo, hi, m, &f);
        else
            chunks_range_filter(&pattern, lo, hi, m, &f);
        bson_append_document_end(&outs[j], &f);
        free(lo);
        free(hi);
    }
    for (size_t i = 0; i < n; i++) {
        bson_destroy(mins[i]);
        bson_destroy(maxs[i]);
        free(owner[i]);
    }
    free(mins);
    free(maxs);
    free(owner);
    bson_destroy(&filter);
    return ok;
}

bool chunks_owned_filters(mongoc_client_pool_t *pool, const char *const *shards, size_t nshards,
                          bson_t *outs, struct mcdc_error *err)
{
    mongoc_client_t *c = mongoc_client_pool_pop(pool);
    bson_t all = BSON_INITIALIZER;
    mongoc_cursor_t *cur = config_find(c, "collections", &all);
    const bson_t *doc;
    bson_error_t error;
    bson_t metas = BSON_INITIALIZER;
    bool ok = true;
    bson_iter_t it;

    /* Gather first: one cursor at a time on the client. */
    while (mongoc_cursor_next(cur, &doc)) {
        bson_iter_t id, dropped;
        if (!bson_iter_init_find(&id, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&id))
            continue;
        if (bson_iter_init_find(&dropped, doc, "dropped") && bson_iter_as_bool(&dropped))
            continue; /* 4.4 keeps dropped collections */
        bson_append_document(&metas, bson_iter_utf8(&id, NULL), -1, doc);
    }
    if (mongoc_cursor_error(cur, &error)) {
        mcdc_error_from_bson(err, error.code, error.message, true);
        mcdc_error_prefix(err, "cannot read config.collections");
        ok = false;
    }
    mongoc_cursor_destroy(cur);
    if (ok && bson_iter_init(&it, &metas)) {
        while (ok && bson_iter_next(&it)) {
            const uint8_t *data;
            uint32_t len;
            bson_t meta;
            bson_iter_document(&it, &len, &data);
            if (bson_init_static(&meta, data, len))
                ok = collection_filter(c, &meta, bson_iter_key(&it), shards, nshards, outs, err);
        }
    }
    bson_destroy(&metas);
    bson_destroy(&all);
    mongoc_client_pool_push(pool, c);
    return ok;
}
