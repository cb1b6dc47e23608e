/*
 * snapshot/progress: the task thread's tracker of the initial snapshot's
 * progress, which writes the offset member of each record (see progress.h
 * for the format; its parse at start is progress_resume.c).
 */
#include "snapshot/progress.h"

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "encode/ejson.h"
#include "snapshot/keyrange.h"

#define VERSION_TEXT_(v) #v
#define VERSION_TEXT(v) VERSION_TEXT_(v)

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
    put(s, "{\"v\":" VERSION_TEXT(SNAPSHOT_PROGRESS_VERSION) ",\"done\":[");
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
