/*
 * fields: field.exclude.list and field.renames (Debezium's FieldSelector;
 * debezium-format.md §7.2).
 *
 * An entry is "<db>.<coll>.<path>" (renames: "...:<newName>"); db and coll
 * may contain '*' wildcards and match case-insensitively; the path's
 * segments are matched exactly. The collection part is the second dotted
 * segment, so entries cannot name collections whose names contain dots.
 *
 * Documents (after, before, snapshot rows): a path descends into
 * sub-documents and into every document element of arrays. An exclusion
 * removes the field. A rename removes it and appends it under the new name at
 * the end of its document, as Debezium's remove + put does. Renaming a field
 * that does not exist is a no-op (DBZ-1848).
 *
 * Rename collision policy (Debezium's, the default and only policy): renaming
 * onto a field that already exists fails the event (Debezium throws
 * IllegalArgumentException "Document already contains field : x"); the
 * encoder turns that into an ENCODE error naming the document key, the
 * collection and the field, and the worker decides what to do with it.
 *
 * updatedFields (dotted keys): numeric segments are ignored for matching; a
 * key equal to or below an excluded path is removed; a key that is a prefix of
 * an excluded path is descended into; renames rewrite the matching segment
 * and move the key to the end. removedFields/truncatedArrays names: dropped
 * when the name is a prefix of or equal to an excluded path, renamed when a
 * rename path is a prefix of or equal to it; the first matching entry wins.
 *
 * Every pass copies into one of two bson_t the encoder reuses, so steady
 * state allocates nothing; with no matching rule the input is used as is.
 */
#include "encode/encode_internal.h"

#include <ctype.h>
#include <string.h>

#include "common/xalloc.h"

/* ---- rules -------------------------------------------------------------- */

static bool parse_rule(const char *entry, bool rename, struct field_rule *r, struct mcdc_error *err)
{
    const char *what = rename ? "field.renames" : "field.exclude.list";
    char *text = xstrdup(entry);
    memset(r, 0, sizeof *r);
    if (rename) {
        char *colon = strrchr(text, ':');
        if (colon == NULL || colon[1] == '\0' || strchr(colon + 1, '.')) {
            free(text);
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                                  "%s: entry \"%s\" is not <db>.<collection>.<field>:<newName>",
                                  what, entry);
        }
        *colon = '\0';
        r->rename_to = xstrdup(colon + 1);
    }
    size_t nseg = 1;
    for (const char *p = text; *p; p++)
        nseg += *p == '.';
    if (nseg < 3) {
        free(r->rename_to);
        free(text);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                              "%s: entry \"%s\" is not <db>.<collection>.<field>", what, entry);
    }
    char **segs = xcalloc(nseg, sizeof *segs);
    size_t i = 0;
    for (char *p = text, *dot;; p = dot + 1) {
        dot = strchr(p, '.');
        segs[i++] = dot ? xstrndup(p, (size_t)(dot - p)) : xstrdup(p);
        if (dot == NULL)
            break;
    }
    free(text);
    for (size_t k = 0; k < nseg; k++) {
        if (segs[k][0] == '\0') {
            for (size_t j = 0; j < nseg; j++)
                free(segs[j]);
            free(segs);
            free(r->rename_to);
            return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "%s: entry \"%s\" has an empty part",
                                  what, entry);
        }
    }
    r->db_glob = segs[0];
    r->coll_glob = segs[1];
    r->depth = nseg - 2;
    r->path = xcalloc(r->depth, sizeof *r->path);
    for (size_t k = 0; k < r->depth; k++)
        r->path[k] = segs[k + 2];
    free(segs);
    return true;
}

static void free_rule(struct field_rule *r)
{
    free(r->db_glob);
    free(r->coll_glob);
    for (size_t k = 0; k < r->depth; k++)
        free(r->path[k]);
    free(r->path);
    free(r->rename_to);
}

bool fields_init(struct field_rules *fr, const struct mcdc_config *cfg, struct mcdc_error *err)
{
    memset(fr, 0, sizeof *fr);
    size_t n = cfg->field_exclude.count + cfg->field_renames.count;
    if (n == 0)
        return true;
    fr->rules = xcalloc(n, sizeof *fr->rules);
    for (size_t i = 0; i < cfg->field_exclude.count; i++, fr->count++)
        if (!parse_rule(cfg->field_exclude.items[i], false, &fr->rules[fr->count], err))
            goto fail;
    fr->exclude_count = fr->count;
    for (size_t i = 0; i < cfg->field_renames.count; i++, fr->count++)
        if (!parse_rule(cfg->field_renames.items[i], true, &fr->rules[fr->count], err))
            goto fail;
    return true;
fail:
    fields_free(fr);
    return false;
}

void fields_free(struct field_rules *fr)
{
    for (size_t i = 0; i < fr->count; i++)
        free_rule(&fr->rules[i]);
    free(fr->rules);
    memset(fr, 0, sizeof *fr);
}

/* Case-insensitive glob ('*' = any run) of pattern against s[0..n). */
static bool glob_match(const char *pat, const char *s, size_t n)
{
    if (*pat == '\0')
        return n == 0;
    if (*pat == '*') {
        for (size_t i = 0; i <= n; i++)
            if (glob_match(pat + 1, s + i, n - i))
                return true;
        return false;
    }
    return n > 0 && tolower((unsigned char)*pat) == tolower((unsigned char)*s) &&
           glob_match(pat + 1, s + 1, n - 1);
}

void fields_select(const struct field_rules *fr, const char *db, size_t db_len, const char *coll,
                   size_t coll_len, struct field_sel *sel)
{
    sel->rules = NULL;
    sel->count = 0;
    for (size_t i = 0; i < fr->count; i++) {
        const struct field_rule *r = &fr->rules[i];
        if (!glob_match(r->db_glob, db, db_len) || !glob_match(r->coll_glob, coll, coll_len))
            continue;
        if (sel->rules == NULL)
            sel->rules = xcalloc(fr->count, sizeof *sel->rules);
        sel->rules[sel->count++] = r;
    }
}

void fields_sel_free(struct field_sel *sel)
{
    free(sel->rules);
    sel->rules = NULL;
    sel->count = 0;
}

/* ---- documents ---------------------------------------------------------- */

static bool apply_doc(const bson_t *src, bson_t *dst, const struct field_rule *r, size_t depth,
                      const char **clash);

/* Appends the value at it under key, applying r below depth when it is a
 * document or an array of documents. */
static bool apply_value(const bson_iter_t *it, bson_t *dst, const char *key, int keylen,
                        const struct field_rule *r, size_t depth, const char **clash)
{
    uint32_t len = 0;
    const uint8_t *data = NULL;
    bson_t view, child;
    if (BSON_ITER_HOLDS_DOCUMENT(it)) {
        bson_iter_document(it, &len, &data);
        if (!bson_init_static(&view, data, len))
            return bson_append_iter(dst, key, keylen, it);
        bson_append_document_begin(dst, key, keylen, &child);
        bool ok = apply_doc(&view, &child, r, depth, clash);
        bson_append_document_end(dst, &child);
        return ok;
    }
    if (BSON_ITER_HOLDS_ARRAY(it)) {
        bson_iter_t el;
        bson_append_array_begin(dst, key, keylen, &child);
        bool ok = bson_iter_recurse(it, &el);
        while (ok && bson_iter_next(&el)) {
            if (BSON_ITER_HOLDS_DOCUMENT(&el))
                ok = apply_value(&el, &child, bson_iter_key(&el), -1, r, depth, clash);
            else
                bson_append_iter(&child, NULL, 0, &el);
        }
        bson_append_array_end(dst, &child);
        return ok;
    }
    return bson_append_iter(dst, key, keylen, it);
}

static bool apply_doc(const bson_t *src, bson_t *dst, const struct field_rule *r, size_t depth,
                      const char **clash)
{
    bson_iter_t it, found;
    bool have = false, taken = false;
    const char *seg = r->path[depth];
    bool leaf = depth + 1 == r->depth;
    if (!bson_iter_init(&it, src))
        return true;
    while (bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        if (strcmp(key, seg) != 0) {
            if (leaf && r->rename_to && strcmp(key, r->rename_to) == 0)
                taken = true;
            bson_append_iter(dst, NULL, 0, &it);
        } else if (!leaf) {
            if (!apply_value(&it, dst, key, -1, r, depth + 1, clash))
                return false;
        } else if (r->rename_to) {
            found = it;
            have = true;
        }
        /* else: excluded leaf, dropped */
    }
    if (have) {
        if (taken) {
            *clash = r->rename_to;
            return false;
        }
        bson_append_iter(dst, r->rename_to, -1, &found);
    }
    return true;
}

const bson_t *fields_apply_document(const struct field_sel *sel, const bson_t *doc, bson_t pair[2],
                                    const char **clash)
{
    const bson_t *cur = doc;
    int w = 0;
    for (size_t i = 0; i < sel->count; i++) {
        bson_reinit(&pair[w]);
        if (!apply_doc(cur, &pair[w], sel->rules[i], 0, clash))
            return NULL;
        cur = &pair[w];
        w ^= 1;
    }
    return cur;
}

/* ---- dotted paths ------------------------------------------------------- */

static bool all_digits(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* Non-numeric segments of a dotted name, as [start, end) offsets. */
struct segs {
    size_t start[32], end[32];
    size_t count;
    bool overflow;
};

static void split_name(const char *s, size_t n, struct segs *sg)
{
    sg->count = 0;
    sg->overflow = false;
    size_t a = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        if (!all_digits(s + a, i - a)) {
            if (sg->count == 32) {
                sg->overflow = true;
                return;
            }
            sg->start[sg->count] = a;
            sg->end[sg->count++] = i;
        }
        a = i + 1;
    }
}

/* How many leading segments of the name equal the rule path's. */
static size_t common_prefix(const char *s, const struct segs *sg, const struct field_rule *r)
{
    size_t m = 0;
    while (m < sg->count && m < r->depth) {
        size_t len = sg->end[m] - sg->start[m];
        if (strlen(r->path[m]) != len || memcmp(r->path[m], s + sg->start[m], len) != 0)
            break;
        m++;
    }
    return m;
}

/* Appends name with segment k replaced by the rule's new name. */
static void renamed_name(struct ejson_buf *out, const char *s, size_t n, const struct segs *sg,
                         size_t k, const char *to)
{
    ejson_buf_append(out, s, sg->start[k]);
    ejson_buf_append(out, to, strlen(to));
    ejson_buf_append(out, s + sg->end[k], n - sg->end[k]);
}

static bool has_key(const bson_t *doc, const char *key, size_t n)
{
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return false;
    while (bson_iter_next(&it))
        if (bson_iter_key_len(&it) == n && memcmp(bson_iter_key(&it), key, n) == 0)
            return true;
    return false;
}

static bool apply_updated(const bson_t *src, bson_t *dst, const struct field_rule *r,
                          const char **clash)
{
    bson_iter_t it;
    struct segs sg;
    struct ejson_buf nb = {0};
    bool ok = true;
    if (!bson_iter_init(&it, src))
        return true;
    /* First pass: keys that stay; renamed keys are appended afterwards. */
    while (ok && bson_iter_next(&it)) {
        const char *key = bson_iter_key(&it);
        size_t n = bson_iter_key_len(&it);
        split_name(key, n, &sg);
        size_t m = sg.overflow ? 0 : common_prefix(key, &sg, r);
        if (!sg.overflow && m == r->depth && m > 0) {
            continue; /* excluded, or renamed below */
        } else if (!sg.overflow && m == sg.count && m > 0 && m < r->depth) {
            ok = apply_value(&it, dst, key, (int)n, r, m, clash);
        } else {
            bson_append_iter(dst, key, (int)n, &it);
        }
    }
    if (ok && r->rename_to && bson_iter_init(&it, src)) {
        while (ok && bson_iter_next(&it)) {
            const char *key = bson_iter_key(&it);
            size_t n = bson_iter_key_len(&it);
            split_name(key, n, &sg);
            if (sg.overflow || common_prefix(key, &sg, r) != r->depth)
                continue;
            ejson_buf_reset(&nb);
            renamed_name(&nb, key, n, &sg, r->depth - 1, r->rename_to);
            bool same = nb.len == n && memcmp(nb.data, key, n) == 0;
            if (!same && (has_key(dst, nb.data, nb.len) || has_key(src, nb.data, nb.len))) {
                *clash = r->rename_to;
                ok = false;
                break;
            }
            bson_append_iter(dst, nb.data, (int)nb.len, &it);
        }
    }
    ejson_buf_free(&nb);
    return ok;
}

const bson_t *fields_apply_updated(const struct field_sel *sel, const bson_t *updated,
                                   bson_t pair[2], const char **clash)
{
    const bson_t *cur = updated;
    int w = 0;
    for (size_t i = 0; i < sel->count; i++) {
        bson_reinit(&pair[w]);
        if (!apply_updated(cur, &pair[w], sel->rules[i], clash))
            return NULL;
        cur = &pair[w];
        w ^= 1;
    }
    return cur;
}

bool fields_map_name(const struct field_sel *sel, const char *name, size_t n, struct ejson_buf *out)
{
    struct segs sg;
    split_name(name, n, &sg);
    if (!sg.overflow && sg.count > 0) {
        for (size_t i = 0; i < sel->count; i++) {
            const struct field_rule *r = sel->rules[i];
            size_t m = common_prefix(name, &sg, r);
            if (r->rename_to == NULL) {
                if (m == sg.count && sg.count <= r->depth)
                    return false; /* removal of the excluded field or a parent */
            } else if (m == r->depth) {
                renamed_name(out, name, n, &sg, r->depth - 1, r->rename_to);
                return true;
            }
        }
    }
    ejson_buf_append(out, name, n);
    return true;
}
