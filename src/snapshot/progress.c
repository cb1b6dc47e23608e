/*
 * snapshot/progress: the initial snapshot's progress member, its parse at
 * start and the task thread's tracker (see progress.h for the format).
 */
#include "snapshot/progress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "encode/ejson.h"
#include "snapshot/keyrange.h"
#include "snapshot/snapshot.h"

#define PROGRESS_VERSION 1

/* ---- stored side ---- */

static const bson_value_t *opt(const bson_value_t *v)
{
    return v->value_type == BSON_TYPE_EOD ? NULL : v;
}

bool snapshot_progress_extract(const char *extra_json, char **member, char **rest,
                               struct mcdc_error *err)
{
    bson_t *extra, others = BSON_INITIALIZER;
    bson_error_t be;
    bson_iter_t it;
    bool ok = true;

    *member = *rest = NULL;
    if (extra_json == NULL) {
        bson_destroy(&others);
        return true;
    }
    extra = bson_new_from_json((const uint8_t *)extra_json, -1, &be);
    if (extra == NULL) {
        bson_destroy(&others);
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset extra members: %s", be.message);
    }
    if (bson_iter_init(&it, extra)) {
        while (bson_iter_next(&it)) {
            if (strcmp(bson_iter_key(&it), SNAPSHOT_PROGRESS_KEY) != 0) {
                bson_append_iter(&others, NULL, 0, &it);
            } else if (BSON_ITER_HOLDS_UTF8(&it)) {
                free(*member);
                *member = xstrdup(bson_iter_utf8(&it, NULL));
            } else {
                ok = mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "offset member %s is not a string",
                                    SNAPSHOT_PROGRESS_KEY);
            }
        }
    }
    if (ok && !bson_empty(&others)) {
        /* canonical: parsed back to the same types when the position is stored */
        char *t = bson_as_canonical_extended_json(&others, NULL);
        *rest = xstrdup(t);
        bson_free(t);
    }
    if (!ok) {
        free(*member);
        *member = NULL;
    }
    bson_destroy(&others);
    bson_destroy(extra);
    return ok;
}

void snapshot_resume_free(struct snapshot_resume *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->ndone; i++)
        free(r->done[i]);
    free(r->done);
    for (size_t i = 0; i < r->nranges; i++) {
        struct progress_range *g = &r->ranges[i];
        free(g->ns);
        bson_value_destroy(&g->lo);
        bson_value_destroy(&g->hi);
        bson_value_destroy(&g->after);
    }
    free(r->ranges);
    free(r);
}

/* The key of a {"_id": key} document member it points at into *out (a copy). */
static bool key_member(const bson_iter_t *it, bson_value_t *out, const char *ns, const char *name,
                       struct mcdc_error *err)
{
    bson_iter_t sub;
    if (!BSON_ITER_HOLDS_DOCUMENT(it) || !bson_iter_recurse(it, &sub) || !bson_iter_next(&sub) ||
        strcmp(bson_iter_key(&sub), "_id") != 0)
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "range of %s: %s is not {\"_id\": key}",
                              ns, name);
    bson_value_copy(bson_iter_value(&sub), out);
    return true;
}

static bool parse_range(const bson_iter_t *item, struct progress_range *g, struct mcdc_error *err)
{
    bson_iter_t it;
    bool done = false;

    if (!BSON_ITER_HOLDS_DOCUMENT(item) || !bson_iter_recurse(item, &it))
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "a range is not an object");
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (strcmp(k, "ns") == 0 && BSON_ITER_HOLDS_UTF8(&it) && g->ns == NULL)
            g->ns = xstrdup(bson_iter_utf8(&it, NULL));
        else if (strcmp(k, "done") == 0 && BSON_ITER_HOLDS_BOOL(&it))
            done = bson_iter_bool(&it);
    }
    if (g->ns == NULL || strchr(g->ns, '.') == NULL)
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "a range without a \"db.coll\" ns");
    bson_iter_recurse(item, &it);
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        bson_value_t *dst = strcmp(k, "lo") == 0      ? &g->lo
                            : strcmp(k, "hi") == 0    ? &g->hi
                            : strcmp(k, "after") == 0 ? &g->after
                                                      : NULL;
        if (dst != NULL && dst->value_type == BSON_TYPE_EOD &&
            !key_member(&it, dst, g->ns, k, err))
            return false;
    }
    if (done == (g->after.value_type != BSON_TYPE_EOD))
        return mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                              "range of %s: neither done nor with an after key, or both", g->ns);
    g->state = done ? PROGRESS_DONE : PROGRESS_PARTIAL;
    return true;
}

bool snapshot_resume_parse(const char *text, struct snapshot_resume **out,
                           struct mcdc_error *err)
{
    struct snapshot_resume *r = xcalloc(1, sizeof *r);
    bson_error_t be;
    bson_iter_t it, arr;
    bson_t *doc = bson_new_from_json((const uint8_t *)text, -1, &be);
    bool ok = false;

    *out = NULL;
    if (doc == NULL) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "not JSON: %s", be.message);
        goto done;
    }
    if (!bson_iter_init_find(&it, doc, "v") || !BSON_ITER_HOLDS_INT(&it) ||
        bson_iter_as_int64(&it) != PROGRESS_VERSION) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "no \"v\": %d (written by another version)",
                       PROGRESS_VERSION);
        goto done;
    }
    if (bson_iter_init_find(&it, doc, "done")) {
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &arr)) {
            mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "\"done\" is not an array");
            goto done;
        }
        while (bson_iter_next(&arr)) {
            if (!BSON_ITER_HOLDS_UTF8(&arr)) {
                mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "\"done\" holds a non-string");
                goto done;
            }
            r->done = xrealloc(r->done, (r->ndone + 1) * sizeof *r->done);
            r->done[r->ndone++] = xstrdup(bson_iter_utf8(&arr, NULL));
        }
    }
    if (bson_iter_init_find(&it, doc, "ranges")) {
        if (!BSON_ITER_HOLDS_ARRAY(&it) || !bson_iter_recurse(&it, &arr)) {
            mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "\"ranges\" is not an array");
            goto done;
        }
        while (bson_iter_next(&arr)) {
            r->ranges = xrealloc(r->ranges, (r->nranges + 1) * sizeof *r->ranges);
            memset(&r->ranges[r->nranges], 0, sizeof *r->ranges);
            if (!parse_range(&arr, &r->ranges[r->nranges++], err))
                goto done;
        }
    }
    *out = r;
    r = NULL;
    ok = true;
done:
    if (doc != NULL)
        bson_destroy(doc);
    snapshot_resume_free(r);
    if (!ok)
        mcdc_error_prefix(err, "offset member %s", SNAPSHOT_PROGRESS_KEY);
    return ok;
}

bool snapshot_resume_done(const struct snapshot_resume *r, const char *ns)
{
    for (size_t i = 0; i < r->ndone; i++)
        if (strcmp(r->done[i], ns) == 0)
            return true;
    return false;
}

bool snapshot_resume_names(const struct snapshot_resume *r, const char *ns)
{
    for (size_t i = 0; i < r->nranges; i++)
        if (strcmp(r->ranges[i].ns, ns) == 0)
            return true;
    return snapshot_resume_done(r, ns);
}

/* Orders ranges by lower bound, the open one first. */
static int range_cmp(const void *a, const void *b)
{
    const struct progress_range *x = *(const struct progress_range *const *)a;
    const struct progress_range *y = *(const struct progress_range *const *)b;
    const bson_value_t *lx = opt(&x->lo), *ly = opt(&y->lo);
    if (lx == NULL || ly == NULL)
        return (lx != NULL) - (ly != NULL);
    return keyrange_compare(lx, ly);
}

static void piece_add(struct progress_piece **out, size_t *n, const bson_value_t *lo,
                      const bson_value_t *hi, const bson_value_t *after, enum progress_state st)
{
    *out = xrealloc(*out, (*n + 1) * sizeof **out);
    (*out)[*n] = (struct progress_piece){lo, hi, after, st};
    (*n)++;
}

bool snapshot_resume_pieces(const struct snapshot_resume *r, const char *ns,
                            struct progress_piece **out, size_t *n, struct mcdc_error *err)
{
    const struct progress_range **mine = NULL;
    const bson_value_t *cursor = NULL; /* the previous range's hi */
    size_t m = 0;
    bool first = true, open_end = false, ok = true;

    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < r->nranges; i++) {
        if (strcmp(r->ranges[i].ns, ns) != 0)
            continue;
        mine = xrealloc(mine, (m + 1) * sizeof *mine);
        mine[m++] = &r->ranges[i];
    }
    if (m == 0)
        return true;
    qsort(mine, m, sizeof *mine, range_cmp);
    for (size_t i = 0; i < m && ok; i++) {
        const bson_value_t *lo = opt(&mine[i]->lo), *hi = opt(&mine[i]->hi);
        const bson_value_t *after = opt(&mine[i]->after);
        if (!first && (open_end || lo == NULL || keyrange_compare(lo, cursor) < 0)) {
            ok = mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "ranges of %s overlap", ns);
            break;
        }
        if ((lo != NULL && hi != NULL && keyrange_compare(hi, lo) <= 0) ||
            (after != NULL && ((lo != NULL && keyrange_compare(after, lo) <= 0) ||
                               (hi != NULL && keyrange_compare(after, hi) > 0)))) {
            ok = mcdc_error_set(err, MCDC_ERR_IO, EINVAL,
                                "a range of %s is empty or its after key is outside it", ns);
            break;
        }
        /* the keys between the previous range (or the lowest key) and this one */
        if (first ? lo != NULL : keyrange_compare(lo, cursor) > 0)
            piece_add(out, n, first ? NULL : cursor, lo, NULL, PROGRESS_NOT_STARTED);
        piece_add(out, n, lo, hi, after, mine[i]->state);
        cursor = hi;
        open_end = hi == NULL;
        first = false;
    }
    if (ok && !open_end)
        piece_add(out, n, cursor, NULL, NULL, PROGRESS_NOT_STARTED);
    free(mine);
    if (!ok) {
        free(*out);
        *out = NULL;
        *n = 0;
        mcdc_error_prefix(err, "offset member %s", SNAPSHOT_PROGRESS_KEY);
    }
    return ok;
}

/* ---- the tracker ---- */

struct entry {
    size_t coll;               /* index into colls */
    struct ejson_buf bounds;   /* `"lo":...,"hi":...` (unescaped), may be empty */
    struct ejson_buf prefix;   /* `{"ns":...,<bounds>,"after":`, escaped (written once) */
    struct ejson_buf frag;     /* the range's object, escaped for the string member */
    enum progress_state state;
};

struct tcoll {
    char *ns;
    size_t left; /* entries not done */
    bool done;   /* in the done list */
};

struct snapshot_progress {
    char *base; /* the other members' text without its closing brace, or NULL */
    struct entry *entries;
    size_t n, cap;
    struct tcoll *colls;
    size_t ncolls;
    char **done_order; /* done collections in the order they finished (borrowed from colls) */
    size_t ndone;
    struct ejson_buf head, out, scratch;
    bool head_valid;
};

/* Appends s[0..n) escaped for a JSON string: the progress JSON holds no raw
 * control character (every string in it is written escaped), so quotes and
 * backslashes are all there is to escape. */
static void put_escaped(struct ejson_buf *b, const char *s, size_t n)
{
    char *o;
    ejson_buf_grow(b, 2 * n);
    o = b->data + b->len;
    for (size_t i = 0; i < n; i++) {
        /* a backslash written always, kept only before a quote or a backslash
         * (no branch per byte: this runs on every record's key) */
        *o = '\\';
        o += s[i] == '"' || s[i] == '\\';
        *o++ = s[i];
    }
    b->len = (size_t)(o - b->data);
    b->data[b->len] = '\0';
}

static void put(struct ejson_buf *b, const char *s)
{
    ejson_buf_append(b, s, strlen(s));
}

struct snapshot_progress *progress_new(const char *base)
{
    struct snapshot_progress *p = xcalloc(1, sizeof *p);
    if (base != NULL) {
        size_t n = strlen(base);
        while (n > 0 && base[n - 1] != '}')
            n--;
        if (n > 0) {
            size_t k = n - 1;
            p->base = xstrndup(base, k);
            /* a base with members gets a comma before ours */
            while (k > 0 && (base[k - 1] == ' ' || base[k - 1] == '\n'))
                k--;
            if (k > 0 && base[k - 1] == '{') {
                free(p->base);
                p->base = NULL;
            }
        }
    }
    return p;
}

void progress_free(struct snapshot_progress *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->n; i++) {
        ejson_buf_free(&p->entries[i].bounds);
        ejson_buf_free(&p->entries[i].prefix);
        ejson_buf_free(&p->entries[i].frag);
    }
    free(p->entries);
    for (size_t i = 0; i < p->ncolls; i++)
        free(p->colls[i].ns);
    free(p->colls);
    free(p->done_order);
    ejson_buf_free(&p->head);
    ejson_buf_free(&p->out);
    ejson_buf_free(&p->scratch);
    free(p->base);
    free(p);
}

static size_t coll_of(struct snapshot_progress *p, const char *ns)
{
    if (p->ncolls > 0 && strcmp(p->colls[p->ncolls - 1].ns, ns) == 0)
        return p->ncolls - 1;
    p->colls = xrealloc(p->colls, (p->ncolls + 1) * sizeof *p->colls);
    p->colls[p->ncolls] = (struct tcoll){xstrdup(ns), 0, false};
    return p->ncolls++;
}

static void coll_done(struct snapshot_progress *p, size_t c)
{
    p->colls[c].done = true;
    p->done_order = xrealloc(p->done_order, (p->ndone + 1) * sizeof *p->done_order);
    p->done_order[p->ndone++] = p->colls[c].ns;
    p->head_valid = false;
}

void progress_add_done_coll(struct snapshot_progress *p, const char *ns)
{
    coll_done(p, coll_of(p, ns));
}

/* Rewrites e's escaped object for its state; key is the after key (PARTIAL).
 * Per record only the key is written and escaped; the rest is e->prefix. */
static void entry_render(struct snapshot_progress *p, struct entry *e, const bson_value_t *key)
{
    struct ejson_buf *s = &p->scratch;
    const char *ns = p->colls[e->coll].ns;

    ejson_buf_reset(s);
    if (e->prefix.len == 0) {
        put(s, "{\"ns\":");
        ejson_write_string(s, ns, strlen(ns));
        ejson_buf_append(s, e->bounds.data, e->bounds.len);
        put(s, ",\"after\":");
        put_escaped(&e->prefix, s->data, s->len);
        ejson_buf_reset(s);
    }
    ejson_buf_reset(&e->frag);
    if (e->state == PROGRESS_DONE) {
        /* the prefix without its `,"after":` */
        static const char after[] = ",\\\"after\\\":";
        ejson_buf_append(&e->frag, e->prefix.data, e->prefix.len - (sizeof after - 1));
        put(s, ",\"done\":true}");
    } else {
        ejson_buf_append(&e->frag, e->prefix.data, e->prefix.len);
        keyrange_key_write(s, key);
        put(s, "}");
    }
    put_escaped(&e->frag, s->data, s->len);
}

size_t progress_add(struct snapshot_progress *p, const char *ns, const bson_value_t *lo,
                    const bson_value_t *hi, enum progress_state st, const bson_value_t *after)
{
    struct entry *e;

    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->entries = xrealloc(p->entries, p->cap * sizeof *p->entries);
    }
    e = &p->entries[p->n];
    memset(e, 0, sizeof *e);
    e->coll = coll_of(p, ns);
    e->state = st;
    if (lo != NULL) {
        put(&e->bounds, ",\"lo\":");
        keyrange_key_write(&e->bounds, lo);
    }
    if (hi != NULL) {
        put(&e->bounds, ",\"hi\":");
        keyrange_key_write(&e->bounds, hi);
    }
    if (st != PROGRESS_DONE)
        p->colls[e->coll].left++;
    if (st != PROGRESS_NOT_STARTED)
        entry_render(p, e, after);
    p->head_valid = false;
    return p->n++;
}

size_t progress_count(const struct snapshot_progress *p)
{
    return p->n;
}

void progress_truncate(struct snapshot_progress *p, size_t n)
{
    while (p->n > n) {
        struct entry *e = &p->entries[--p->n];
        if (e->state != PROGRESS_DONE)
            p->colls[e->coll].left--;
        ejson_buf_free(&e->bounds);
        ejson_buf_free(&e->prefix);
        ejson_buf_free(&e->frag);
    }
    p->head_valid = false;
}

/* Whether doc's keys and strings are all written as they are (no U+FFFD
 * replacement: ejson_utf8_valid_java), recursively. */
static bool doc_exact(const uint8_t *data, uint32_t len)
{
    bson_t d;
    bson_iter_t it;
    if (!bson_init_static(&d, data, len) || !bson_iter_init(&it, &d))
        return false;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        const bson_value_t *v = bson_iter_value(&it);
        if (!ejson_utf8_valid_java(k, strlen(k)) ||
            (v->value_type == BSON_TYPE_UTF8 &&
             !ejson_utf8_valid_java(v->value.v_utf8.str, v->value.v_utf8.len)) ||
            ((v->value_type == BSON_TYPE_DOCUMENT || v->value_type == BSON_TYPE_ARRAY) &&
             !doc_exact(v->value.v_doc.data, v->value.v_doc.data_len)))
            return false;
    }
    return true;
}

/* Whether key's canonical JSON parses back to key itself: false for strings
 * (also inside documents) that are not valid UTF-8, which the writer stores
 * with U+FFFD (keyrange_key_to_json) and which would then sort elsewhere. */
static bool key_exact(const bson_value_t *key)
{
    switch (key->value_type) {
    case BSON_TYPE_UTF8:
        return ejson_utf8_valid_java(key->value.v_utf8.str, key->value.v_utf8.len);
    case BSON_TYPE_SYMBOL:
        return ejson_utf8_valid_java(key->value.v_symbol.symbol, key->value.v_symbol.len);
    case BSON_TYPE_CODE:
        return ejson_utf8_valid_java(key->value.v_code.code, key->value.v_code.code_len);
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        return doc_exact(key->value.v_doc.data, key->value.v_doc.data_len);
    default:
        return true;
    }
}

void progress_advance(struct snapshot_progress *p, size_t e, const bson_value_t *key)
{
    struct entry *x = &p->entries[e];
    /* A key that cannot be stored exactly leaves the range where it was: a
     * resume then emits this row again (and the next ones up to an exact
     * key) rather than risk passing over keys it never emitted. */
    if (!key_exact(key))
        return;
    x->state = PROGRESS_PARTIAL;
    entry_render(p, x, key);
}

void progress_finish(struct snapshot_progress *p, size_t e)
{
    struct entry *x = &p->entries[e];
    if (x->state == PROGRESS_DONE)
        return;
    x->state = PROGRESS_DONE;
    entry_render(p, x, NULL);
    p->head_valid = false;
    if (--p->colls[x->coll].left == 0)
        coll_done(p, x->coll);
}

/* The part that changes only when a range finishes: the base, the member's
 * name, the done list and the done ranges of collections not done. */
static void head_render(struct snapshot_progress *p)
{
    struct ejson_buf *h = &p->head, *s = &p->scratch;
    bool any = false;

    ejson_buf_reset(h);
    if (p->base != NULL) {
        put(h, p->base);
        put(h, ",");
    } else {
        put(h, "{");
    }
    put(h, "\"" SNAPSHOT_PROGRESS_KEY "\":\"");
    ejson_buf_reset(s);
    put(s, "{\"v\":1,\"done\":[");
    for (size_t i = 0; i < p->ndone; i++) {
        if (i > 0)
            put(s, ",");
        ejson_write_string(s, p->done_order[i], strlen(p->done_order[i]));
    }
    put(s, "],\"ranges\":[");
    put_escaped(h, s->data, s->len);
    for (size_t i = 0; i < p->n; i++) {
        const struct entry *e = &p->entries[i];
        if (e->state != PROGRESS_DONE || p->colls[e->coll].done)
            continue;
        if (any)
            put(h, ",");
        ejson_buf_append(h, e->frag.data, e->frag.len);
        any = true;
    }
    p->head_valid = true;
}

const char *progress_text(struct snapshot_progress *p, size_t *shared)
{
    struct ejson_buf *o = &p->out;
    bool any;

    if (!p->head_valid)
        head_render(p);
    ejson_buf_reset(o);
    ejson_buf_append(o, p->head.data, p->head.len);
    if (shared != NULL)
        *shared = p->head.len;
    any = p->head.data[p->head.len - 1] != '[';
    for (size_t i = 0; i < p->n; i++) {
        const struct entry *e = &p->entries[i];
        if (e->state != PROGRESS_PARTIAL)
            continue;
        if (any)
            put(o, ",");
        ejson_buf_append(o, e->frag.data, e->frag.len);
        any = true;
    }
    put(o, "]}\"}");
    ejson_buf_grow(o, 0); /* ejson_buf_append does not terminate */
    o->data[o->len] = '\0';
    return o->data;
}

/* ---- the check against a new plan ---- */

bool snapshot_resume_check(const struct snapshot_plan *plan, const struct snapshot_resume *r,
                           char *summary, size_t n, struct mcdc_error *err)
{
    size_t done = 0, resumed = 0, ranges = 0, ranges_done = 0;

    for (size_t i = 0; i < r->ndone + r->nranges; i++) {
        const char *ns = i < r->ndone ? r->done[i] : r->ranges[i - r->ndone].ns;
        bool found = false;
        for (size_t c = 0; c < plan->count && !found; c++) {
            const struct snapshot_coll *k = &plan->colls[c];
            size_t dl = strlen(k->db);
            found = strncmp(ns, k->db, dl) == 0 && ns[dl] == '.' && strcmp(ns + dl + 1, k->coll) == 0;
        }
        if (!found)
            return mcdc_error_set(err, MCDC_ERR_IO, ENOENT,
                                  "%s, copied in part by the interrupted snapshot, is no longer "
                                  "in the snapshot's plan (dropped, renamed or excluded)",
                                  ns);
    }
    for (size_t c = 0; c < plan->count; c++) {
        const struct snapshot_coll *k = &plan->colls[c];
        struct progress_piece *pieces;
        size_t np;
        char ns[512];
        snprintf(ns, sizeof ns, "%s.%s", k->db, k->coll);
        if (snapshot_resume_done(r, ns)) {
            done++;
            continue;
        }
        if (!snapshot_resume_pieces(r, ns, &pieces, &np, err))
            return false;
        if (np > 0)
            resumed++;
        for (size_t i = 0; i < np; i++) {
            ranges += pieces[i].state != PROGRESS_NOT_STARTED;
            ranges_done += pieces[i].state == PROGRESS_DONE;
        }
        free(pieces);
    }
    snprintf(summary, n, "%zu of %zu collections done, %zu resumed (%zu _id ranges started, %zu "
             "of them done)",
             done, plan->count, resumed, ranges, ranges_done);
    return true;
}
