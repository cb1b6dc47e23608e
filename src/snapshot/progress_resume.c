/*
 * snapshot/progress_resume: the stored side of the initial snapshot's
 * progress (progress.h): the member taken out of a position's extra members,
 * its parse, the pieces a collection resumes in and the check against a new
 * plan. The tracker that writes the member is progress.c.
 */
#include "snapshot/progress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "snapshot/keyrange.h"
#include "snapshot/snapshot.h"

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
        bson_iter_as_int64(&it) != SNAPSHOT_PROGRESS_VERSION) {
        mcdc_error_set(err, MCDC_ERR_IO, EINVAL, "no \"v\": %d (written by another version)",
                       SNAPSHOT_PROGRESS_VERSION);
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
                                  "%s, named in the stored progress, is no longer in the "
                                  "snapshot's plan (dropped, renamed or excluded)",
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
