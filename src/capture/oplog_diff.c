/*
 * oplog_diff: $v: 2 update diffs to the $v: 1 modifier form (see
 * oplog_diff.h; server document_diff_serialization.h).
 */
#include "capture/oplog_diff.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

#define MAX_DEPTH 100 /* BSON nesting limit of the server */

struct v1 {
    bson_t set, unset, push;
    uint32_t n_set, n_unset, n_push;
    struct mcdc_error *err;
};

/* "<prefix><name>": prefix is "" or ends with '.'. Caller frees. */
static char *join(const char *prefix, const char *name, size_t name_len)
{
    size_t pl = strlen(prefix);
    char *s = xmalloc(pl + name_len + 1);
    memcpy(s, prefix, pl);
    memcpy(s + pl, name, name_len);
    s[pl + name_len] = '\0';
    return s;
}

static enum oplog_diff_result decode_any(struct v1 *v, const bson_iter_t *sub, const char *path,
                                         int depth);

/* d / u / i members: every field of the section becomes a path. */
static enum oplog_diff_result section(struct v1 *v, bson_iter_t *it, const char *prefix, char kind)
{
    bson_iter_t f;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &f)) {
        mcdc_error_set(v->err, MCDC_ERR_ENCODE, 0, "$v: 2 diff: `%c` under \"%s\" is not a document",
                       kind, prefix);
        return OPLOG_DIFF_MALFORMED;
    }
    while (bson_iter_next(&f)) {
        char *path = join(prefix, bson_iter_key(&f), bson_iter_key_len(&f));
        if (kind == 'd') {
            bson_append_bool(&v->unset, path, -1, true);
            v->n_unset++;
        } else {
            bson_append_value(&v->set, path, -1, bson_iter_value(&f));
            v->n_set++;
        }
        free(path);
    }
    return OPLOG_DIFF_DECODED;
}

static enum oplog_diff_result decode_object(struct v1 *v, bson_iter_t *it, const char *prefix,
                                            int depth)
{
    enum oplog_diff_result r = OPLOG_DIFF_DECODED;
    while (r == OPLOG_DIFF_DECODED && bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        size_t kl = bson_iter_key_len(it);
        if (kl == 1 && (k[0] == 'd' || k[0] == 'u' || k[0] == 'i')) {
            r = section(v, it, prefix, k[0]);
        } else if (kl > 1 && k[0] == 's') {
            char *path = join(prefix, k + 1, kl - 1);
            r = decode_any(v, it, path, depth + 1);
            free(path);
        } else {
            mcdc_error_set(v->err, MCDC_ERR_ENCODE, 0,
                           "$v: 2 diff: unknown member \"%s\" under \"%s\"", k, prefix);
            r = OPLOG_DIFF_MALFORMED;
        }
    }
    return r;
}

/* An array diff at path (no trailing dot). */
static enum oplog_diff_result decode_array(struct v1 *v, bson_iter_t *it, const char *path,
                                           int depth)
{
    enum oplog_diff_result r = OPLOG_DIFF_DECODED;
    char *prefix = join(path, ".", 1);
    while (r == OPLOG_DIFF_DECODED && bson_iter_next(it)) {
        const char *k = bson_iter_key(it);
        size_t kl = bson_iter_key_len(it);
        char *end = NULL;
        if (kl == 1 && k[0] == 'a')
            continue;
        if (kl == 1 && k[0] == 'l') {
            /* Truncation to the first n elements: {$push: {path: {$each: [],
             * $slice: n}}}, the $v: 1 operator that does exactly that. */
            bson_t spec, each;
            int64_t n = BSON_ITER_HOLDS_NUMBER(it) ? bson_iter_as_int64(it) : -1;
            if (n < 0 || n > INT32_MAX) {
                mcdc_error_set(v->err, MCDC_ERR_ENCODE, 0,
                               "$v: 2 diff: array length `l` under \"%s\" is not a length", path);
                r = OPLOG_DIFF_MALFORMED;
                break;
            }
            bson_append_document_begin(&v->push, path, -1, &spec);
            bson_append_array_begin(&spec, "$each", -1, &each);
            bson_append_array_end(&spec, &each);
            bson_append_int32(&spec, "$slice", -1, (int32_t)n);
            bson_append_document_end(&v->push, &spec);
            v->n_push++;
            continue;
        }
        if (kl < 2 || (k[0] != 'u' && k[0] != 's') || k[1] < '0' || k[1] > '9' ||
            (strtoul(k + 1, &end, 10), *end != '\0')) {
            mcdc_error_set(v->err, MCDC_ERR_ENCODE, 0,
                           "$v: 2 diff: unknown array member \"%s\" under \"%s\"", k, path);
            r = OPLOG_DIFF_MALFORMED;
            break;
        }
        char *elem = join(prefix, k + 1, kl - 1);
        if (k[0] == 'u') {
            bson_append_value(&v->set, elem, -1, bson_iter_value(it));
            v->n_set++;
        } else {
            r = decode_any(v, it, elem, depth + 1);
        }
        free(elem);
    }
    free(prefix);
    return r;
}

/* A sub-diff (object or array, told apart by `a: true`) of the field at path. */
static enum oplog_diff_result decode_any(struct v1 *v, const bson_iter_t *sub, const char *path,
                                         int depth)
{
    bson_iter_t it, probe;
    if (depth > MAX_DEPTH) {
        mcdc_error_set(v->err, MCDC_ERR_ENCODE, 0, "$v: 2 diff nested deeper than %d", MAX_DEPTH);
        return OPLOG_DIFF_MALFORMED;
    }
    if (!BSON_ITER_HOLDS_DOCUMENT(sub) || !bson_iter_recurse(sub, &it)) {
        mcdc_error_set(v->err, MCDC_ERR_ENCODE, 0, "$v: 2 diff: sub-diff of \"%s\" is not a document",
                       path);
        return OPLOG_DIFF_MALFORMED;
    }
    probe = it;
    if (bson_iter_find(&probe, "a") && bson_iter_as_bool(&probe))
        return decode_array(v, &it, path, depth);
    char *prefix = join(path, ".", 1);
    enum oplog_diff_result r = decode_object(v, &it, prefix, depth);
    free(prefix);
    return r;
}

enum oplog_diff_result oplog_diff_to_v1(const bson_t *o, bson_t *out, struct mcdc_error *err)
{
    bson_iter_t it, diff;
    struct v1 v;
    enum oplog_diff_result r;

    if (!bson_iter_init_find(&it, o, "$v") || !BSON_ITER_HOLDS_NUMBER(&it) ||
        bson_iter_as_int64(&it) != 2)
        return OPLOG_DIFF_NOT_V2;
    if (!bson_iter_init_find(&it, o, "diff") || !BSON_ITER_HOLDS_DOCUMENT(&it) ||
        !bson_iter_recurse(&it, &diff)) {
        mcdc_error_set(err, MCDC_ERR_ENCODE, 0, "$v: 2 update without a diff document");
        return OPLOG_DIFF_MALFORMED;
    }
    bson_init(&v.set);
    bson_init(&v.unset);
    bson_init(&v.push);
    v.n_set = v.n_unset = v.n_push = 0;
    v.err = err;
    r = decode_object(&v, &diff, "", 0);
    if (r == OPLOG_DIFF_DECODED) {
        bson_init(out);
        BSON_APPEND_INT32(out, "$v", 1);
        if (v.n_set)
            BSON_APPEND_DOCUMENT(out, "$set", &v.set);
        if (v.n_unset)
            BSON_APPEND_DOCUMENT(out, "$unset", &v.unset);
        if (v.n_push)
            BSON_APPEND_DOCUMENT(out, "$push", &v.push);
    }
    bson_destroy(&v.set);
    bson_destroy(&v.unset);
    bson_destroy(&v.push);
    return r;
}
