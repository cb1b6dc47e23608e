/*
 * keyrange_walk: reads the `_id`s of one collection through the key ranges of
 * snapshot/keyrange, bracket by bracket and chunk by chunk, as a chunked
 * snapshot does, for the integration test that checks the filters against
 * the simulator (tests/integration/test_keyrange.py).
 *
 *   keyrange_walk URI DB COLL CHUNK [EXTRA_JSON]
 *   keyrange_walk URI DB COLL spans [POINT_JSON ...]
 *
 * The second form reads the spans (-, p1], (p1, p2], ..., (pn, -) of the
 * split points (each as keyrange_key_to_json writes) with
 * keyrange_span_filter, printing "S <i> <filter>" and "K <i> <key>".
 *
 * Prints one line per query ("F <bracket> <filter as canonical extended
 * JSON>") and per key read ("K <bracket> <key as keyrange_key_to_json>"; "M" for the
 * maximum key of a bracket).
 * Exits 0; 1 on a failed query or bad arguments; 3 when the server returns
 * keys that keyrange_compare does not find strictly increasing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "snapshot/keyrange.h"

static mongoc_collection_t *coll;
static bson_t extra = BSON_INITIALIZER;
static bson_value_t prev;
static bool have_prev;

/* Runs one query; prints it and its keys; returns the number of keys, -1 on error. The
 * last key read is copied into *last (destroyed first when set). */
static int run(enum keyrange_bracket b, const bson_value_t *after, const bson_value_t *upto,
               const bson_t *opts, bool track, bson_value_t *last, bool *have_last)
{
    bson_t filter = BSON_INITIALIZER;
    struct mcdc_error err = MCDC_ERROR_INIT;
    mongoc_cursor_t *cur;
    const bson_t *doc;
    bson_error_t error;
    bson_iter_t it;
    char *json;
    int n = 0;

    if (!keyrange_filter(b, after, upto, &extra, &filter, &err)) {
        fprintf(stderr, "filter: %s\n", err.msg);
        return -1;
    }
    json = bson_as_canonical_extended_json(&filter, NULL);
    printf("F %s %s\n", keyrange_bracket_name(b), json);
    bson_free(json);
    cur = mongoc_collection_find_with_opts(coll, &filter, opts, NULL);
    while (mongoc_cursor_next(cur, &doc)) {
        if (!bson_iter_init_find(&it, doc, "_id")) {
            fprintf(stderr, "a document without _id\n");
            n = -1;
            break;
        }
        json = keyrange_key_to_json(bson_iter_value(&it));
        printf("%s %s %s\n", track ? "K" : "M", keyrange_bracket_name(b), json);
        free(json);
        if (track) {
            if (have_prev && keyrange_compare(&prev, bson_iter_value(&it)) >= 0) {
                fprintf(stderr, "keys out of BSON order\n");
                exit(3);
            }
            if (have_prev)
                bson_value_destroy(&prev);
            bson_value_copy(bson_iter_value(&it), &prev);
            have_prev = true;
        }
        if (*have_last)
            bson_value_destroy(last);
        bson_value_copy(bson_iter_value(&it), last);
        *have_last = true;
        n++;
    }
    if (mongoc_cursor_error(cur, &error)) {
        fprintf(stderr, "find: %s\n", error.message);
        n = -1;
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(&filter);
    return n;
}

static int spans(int npoints, char **json)
{
    bson_value_t *points = calloc((size_t)npoints + 1, sizeof *points);
    struct mcdc_error err = MCDC_ERROR_INIT;
    int rc = 0;

    for (int i = 0; i < npoints; i++) {
        if (!keyrange_key_from_json(json[i], &points[i], &err)) {
            fprintf(stderr, "point %d: %s\n", i, err.msg);
            return 1;
        }
    }
    for (int i = 0; i <= npoints && rc == 0; i++) {
        bson_t filter = BSON_INITIALIZER;
        mongoc_cursor_t *cur;
        const bson_t *doc;
        bson_error_t error;
        bson_iter_t it;
        char *text;
        if (!keyrange_span_filter(i > 0 ? &points[i - 1] : NULL, i < npoints ? &points[i] : NULL,
                                  &extra, &filter, &err)) {
            fprintf(stderr, "span %d: %s\n", i, err.msg);
            return 1;
        }
        text = bson_as_canonical_extended_json(&filter, NULL);
        printf("S %d %s\n", i, text);
        bson_free(text);
        cur = mongoc_collection_find_with_opts(coll, &filter, NULL, NULL);
        while (mongoc_cursor_next(cur, &doc)) {
            if (!bson_iter_init_find(&it, doc, "_id"))
                continue;
            text = keyrange_key_to_json(bson_iter_value(&it));
            printf("K %d %s\n", i, text);
            free(text);
        }
        if (mongoc_cursor_error(cur, &error)) {
            fprintf(stderr, "find: %s\n", error.message);
            rc = 1;
        }
        mongoc_cursor_destroy(cur);
        bson_destroy(&filter);
    }
    for (int i = 0; i < npoints; i++)
        bson_value_destroy(&points[i]);
    free(points);
    return rc;
}

int main(int argc, char **argv)
{
    mongoc_client_t *client;
    bson_error_t error;
    int64_t chunk;
    int rc = 0;

    if (argc >= 5 && strcmp(argv[4], "spans") == 0) {
        mongoc_init();
        client = mongoc_client_new(argv[1]);
        if (client == NULL)
            return 1;
        coll = mongoc_client_get_collection(client, argv[2], argv[3]);
        rc = spans(argc - 5, argv + 5);
        mongoc_collection_destroy(coll);
        mongoc_client_destroy(client);
        mongoc_cleanup();
        return rc;
    }
    if (argc < 5 || (chunk = atoll(argv[4])) <= 0) {
        fprintf(stderr, "usage: keyrange_walk URI DB COLL CHUNK [EXTRA_JSON]\n"
                        "       keyrange_walk URI DB COLL spans [POINT_JSON ...]\n");
        return 1;
    }
    if (argc > 5) {
        bson_destroy(&extra);
        if (!bson_init_from_json(&extra, argv[5], -1, &error)) {
            fprintf(stderr, "extra: %s\n", error.message);
            return 1;
        }
    }
    mongoc_init();
    client = mongoc_client_new(argv[1]);
    if (client == NULL) {
        fprintf(stderr, "bad URI\n");
        return 1;
    }
    coll = mongoc_client_get_collection(client, argv[2], argv[3]);
    for (int b = 0; b < KEYRANGE_BRACKET_COUNT && rc == 0; b++) {
        bson_t mopts = BSON_INITIALIZER, copts = BSON_INITIALIZER;
        bson_value_t max, last;
        bool have_max = false, have_last = false;
        keyrange_max_opts(&mopts);
        keyrange_chunk_opts(chunk, true, &copts);
        int n = run((enum keyrange_bracket)b, NULL, NULL, &mopts, false, &max, &have_max);
        if (n < 0)
            rc = 1;
        while (rc == 0 && n > 0) {
            bool singleton = keyrange_bracket_singleton((enum keyrange_bracket)b);
            n = run((enum keyrange_bracket)b, have_last ? &last : NULL, singleton ? NULL : &max,
                    &copts, true, &last, &have_last);
            if (n < 0)
                rc = 1;
            if (singleton || n < chunk || (have_last && keyrange_compare(&last, &max) == 0))
                break;
        }
        if (have_max)
            bson_value_destroy(&max);
        if (have_last)
            bson_value_destroy(&last);
        bson_destroy(&mopts);
        bson_destroy(&copts);
    }
    if (have_prev)
        bson_value_destroy(&prev);
    mongoc_collection_destroy(coll);
    mongoc_client_destroy(client);
    bson_destroy(&extra);
    mongoc_cleanup();
    return rc;
}
