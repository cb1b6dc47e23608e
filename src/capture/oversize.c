/*
 * capture/oversize: the skip and split stages, skip stubs, the split
 * server-version check and the reassembly of split events (oversize.h).
 */
#include "capture/oversize.h"

#include <stdio.h>
#include <string.h>

static void append_size_lte(bson_t *arr, const char *key, const char *field, int64_t threshold)
{
    bson_t lte, args, size;

    BSON_APPEND_DOCUMENT_BEGIN(arr, key, &lte);
    BSON_APPEND_ARRAY_BEGIN(&lte, "$lte", &args);
    BSON_APPEND_DOCUMENT_BEGIN(&args, "0", &size);
    BSON_APPEND_UTF8(&size, "$bsonSize", field);
    bson_append_document_end(&args, &size);
    BSON_APPEND_INT64(&args, "1", threshold);
    bson_append_array_end(&lte, &args);
    bson_append_document_end(arr, &lte);
}

void oversize_skip_stage(bson_t *stage, int64_t threshold)
{
    bson_t rw, cond, ifd, and_arr, stub, sizes, sz;

    BSON_APPEND_DOCUMENT_BEGIN(stage, "$replaceWith", &rw);
    BSON_APPEND_DOCUMENT_BEGIN(&rw, "$cond", &cond);
    /* Debezium: {$and: [{$expr: {$lte: [{$bsonSize: "$fullDocument"}, T]}},
     * {$expr: {$lte: [{$bsonSize: "$fullDocumentBeforeChange"}, T]}}]} */
    BSON_APPEND_DOCUMENT_BEGIN(&cond, "if", &ifd);
    BSON_APPEND_ARRAY_BEGIN(&ifd, "$and", &and_arr);
    append_size_lte(&and_arr, "0", "$fullDocument", threshold);
    append_size_lte(&and_arr, "1", "$fullDocumentBeforeChange", threshold);
    bson_append_array_end(&ifd, &and_arr);
    bson_append_document_end(&cond, &ifd);
    BSON_APPEND_UTF8(&cond, "then", "$$ROOT");
    BSON_APPEND_DOCUMENT_BEGIN(&cond, "else", &stub);
    /* _id unchanged: the server refuses a pipeline that modifies it (280). */
    BSON_APPEND_UTF8(&stub, "_id", "$_id");
    BSON_APPEND_UTF8(&stub, "operationType", "$operationType");
    BSON_APPEND_UTF8(&stub, "clusterTime", "$clusterTime");
    BSON_APPEND_UTF8(&stub, "ns", "$ns");
    BSON_APPEND_UTF8(&stub, "documentKey", "$documentKey");
    BSON_APPEND_DOCUMENT_BEGIN(&stub, OVERSIZE_STUB_FIELD, &sizes);
    BSON_APPEND_DOCUMENT_BEGIN(&sizes, "fullDocument", &sz);
    BSON_APPEND_UTF8(&sz, "$bsonSize", "$fullDocument");
    bson_append_document_end(&sizes, &sz);
    BSON_APPEND_DOCUMENT_BEGIN(&sizes, "fullDocumentBeforeChange", &sz);
    BSON_APPEND_UTF8(&sz, "$bsonSize", "$fullDocumentBeforeChange");
    bson_append_document_end(&sizes, &sz);
    bson_append_document_end(&stub, &sizes);
    bson_append_document_end(&cond, &stub);
    bson_append_document_end(&rw, &cond);
    bson_append_document_end(stage, &rw);
}

void oversize_split_stage(bson_t *stage)
{
    bson_t empty;

    BSON_APPEND_DOCUMENT_BEGIN(stage, "$changeStreamSplitLargeEvent", &empty);
    bson_append_document_end(stage, &empty);
}

static int64_t size_of(const bson_t *sizes, const char *key)
{
    bson_iter_t it;

    if (bson_iter_init_find(&it, sizes, key) &&
        (BSON_ITER_HOLDS_INT32(&it) || BSON_ITER_HOLDS_INT64(&it)))
        return bson_iter_as_int64(&it);
    return -1;
}

void change_fields_scan(const bson_t *doc, struct change_fields *f)
{
    bson_iter_t it;

    memset(f, 0, sizeof *f);
    f->doc = doc;
    f->data = bson_get_data(doc);
    if (!bson_iter_init(&it, doc))
        return;
    /* By name length first: most names of an event match none. */
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key_unsafe(&it);
        switch (bson_iter_key_len(&it)) {
        case 3:
            if (!f->has_id && memcmp(k, "_id", 3) == 0) {
                f->id = it;
                f->has_id = true;
            }
            break;
        case 11:
            if (!f->has_time && memcmp(k, "clusterTime", 11) == 0) {
                f->time = it;
                f->has_time = true;
            }
            break;
        case 10:
            if (!f->has_split && memcmp(k, "splitEvent", 10) == 0) {
                f->split = it;
                f->has_split = true;
            }
            break;
        case sizeof OVERSIZE_STUB_FIELD - 1:
            if (!f->has_stub && memcmp(k, OVERSIZE_STUB_FIELD, sizeof OVERSIZE_STUB_FIELD - 1) == 0) {
                f->stub = it;
                f->has_stub = true;
            }
            break;
        default: break;
        }
    }
}

bool change_fields_of(const struct change_fields *f, const bson_t *doc)
{
    return f->doc == doc && f->data == bson_get_data(doc);
}

bool oversize_is_stub(const bson_t *doc, int64_t *full_size, int64_t *before_size)
{
    struct change_fields f;
    change_fields_scan(doc, &f);
    return oversize_stub_in(&f, full_size, before_size);
}

bool oversize_stub_in(const struct change_fields *f, int64_t *full_size, int64_t *before_size)
{
    bson_iter_t it = f->stub;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    bson_t sizes;

    if (!f->has_stub || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    bson_iter_document(&it, &len, &data);
    if (!bson_init_static(&sizes, data, len))
        return false;
    *full_size = size_of(&sizes, "fullDocument");
    *before_size = size_of(&sizes, "fullDocumentBeforeChange");
    return true;
}

bool oversize_split_supported(int major, int minor, int patch)
{
    if (major > 7 || (major == 7 && minor >= 0))
        return true;
    return major == 6 && minor == 0 && patch >= 9;
}

bool oversize_check_split_server(mongoc_client_t *client, struct mcdc_error *err)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_error_t error;
    bson_iter_t it, arr;
    int v[3] = {0, 0, 0};
    const char *text = "?";
    bool ok;

    BSON_APPEND_INT32(&cmd, "buildInfo", 1);
    ok = mongoc_client_command_simple(client, "admin", &cmd, NULL, &reply, &error);
    bson_destroy(&cmd);
    if (!ok) {
        bson_destroy(&reply);
        mcdc_error_set(err, MCDC_ERR_MONGO, (int)error.code,
                       "buildInfo (to check cursor.oversize.handling.mode split): %s",
                       error.message);
        err->retriable = true;
        return false;
    }
    if (bson_iter_init_find(&it, &reply, "versionArray") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &arr)) {
        for (int i = 0; i < 3 && bson_iter_next(&arr); i++)
            v[i] = (int)bson_iter_as_int64(&arr);
    }
    if (bson_iter_init_find(&it, &reply, "version") && BSON_ITER_HOLDS_UTF8(&it))
        text = bson_iter_utf8(&it, NULL);
    ok = oversize_split_supported(v[0], v[1], v[2]);
    if (!ok)
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                       "cursor.oversize.handling.mode split needs MongoDB 6.0.9+ or 7.0+ "
                       "($changeStreamSplitLargeEvent); the server is %s (expected fail or skip "
                       "on this server)",
                       text);
    bson_destroy(&reply);
    return ok;
}

void split_init(struct split_buffer *b)
{
    memset(b, 0, sizeof *b);
    bson_init(&b->fields);
    bson_init(&b->merged);
}

void split_destroy(struct split_buffer *b)
{
    bson_destroy(&b->fields);
    bson_destroy(&b->merged);
}

void split_reset(struct split_buffer *b)
{
    bson_reinit(&b->fields);
    b->active = false;
    b->next = 0;
    b->of = 0;
}

static bool split_marker(const struct change_fields *f, int32_t *fragment, int32_t *of)
{
    bson_iter_t it = f->split, sub;

    if (!f->has_split || !BSON_ITER_HOLDS_DOCUMENT(&it))
        return false;
    *fragment = 0;
    *of = 0;
    if (bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "fragment") &&
        (BSON_ITER_HOLDS_INT32(&sub) || BSON_ITER_HOLDS_INT64(&sub)))
        *fragment = (int32_t)bson_iter_as_int64(&sub);
    if (bson_iter_recurse(&it, &sub) && bson_iter_find(&sub, "of") &&
        (BSON_ITER_HOLDS_INT32(&sub) || BSON_ITER_HOLDS_INT64(&sub)))
        *of = (int32_t)bson_iter_as_int64(&sub);
    return true;
}

enum split_result split_add(struct split_buffer *b, const bson_t *doc, const bson_t **merged,
                            char *why, size_t why_size)
{
    int32_t fragment, of;
    bson_iter_t it;

    change_fields_scan(doc, &b->last);
    if (!split_marker(&b->last, &fragment, &of)) {
        if (!b->active)
            return SPLIT_WHOLE;
        snprintf(why, why_size,
                 "a whole change event arrived after fragment %d of %d of a split event "
                 "(fragments missing)",
                 (int)b->next - 1, (int)b->of);
        return SPLIT_BROKEN;
    }
    if (fragment < 1 || of < 1 || fragment > of ||
        (b->active ? (fragment != b->next || of != b->of) : fragment != 1)) {
        snprintf(why, why_size,
                 "split event fragment %d of %d arrived where fragment %d%s was expected",
                 (int)fragment, (int)of, b->active ? (int)b->next : 1,
                 b->active ? "" : " (a stream never starts inside a split event)");
        return SPLIT_BROKEN;
    }
    if (!b->active) {
        bson_reinit(&b->fields);
        b->active = true;
        b->of = of;
    }
    b->fragments++;
    b->next = fragment + 1;
    if (bson_iter_init(&it, doc)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key(&it);
            if (strcmp(k, "_id") != 0 && strcmp(k, "splitEvent") != 0)
                bson_append_iter(&b->fields, k, -1, &it);
        }
    }
    if (fragment < of)
        return SPLIT_MORE;
    /* _id last: the event is handed on without another copy of its
     * megabytes (readers look fields up by name, event.c). */
    if (bson_iter_init_find(&it, doc, "_id"))
        bson_append_iter(&b->fields, "_id", 3, &it);
    bson_destroy(&b->merged);
    bson_steal(&b->merged, &b->fields);
    bson_init(&b->fields);
    split_reset(b);
    b->events++;
    *merged = &b->merged;
    return SPLIT_DONE;
}
