/*
 * encode/ejson_names: repeated member names (ejson_names_internal.h): the
 * hash table of a document's names, Java's view of a name that is not valid
 * UTF-8, and the rewrite of a document that repeats a name.
 */
#include <string.h>

#include "common/xalloc.h"
#include "encode/ejson_internal.h"
#include "encode/ejson_names_internal.h"

#define NAMES_MIN 16
#define NAMES_MAX 4096 /* initial size limit; larger tables grow */
#define NAME_EMITTED UINT64_C(0x80000000)
#define NAME_OFFSET UINT64_C(0x7fffffff)

static uint64_t name_hash(const char *k, size_t n, size_t readable)
{
    uint64_t h = (uint64_t)n * NAME_HASH_K1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        h = (h ^ w) * NAME_HASH_K2;
    }
    if (i < n) {
        uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (readable - i >= 8) {
            memcpy(&w, k + i, 8);
            w &= (UINT64_C(1) << (8 * (n - i))) - 1;
        } else {
            memcpy(&w, k + i, n - i);
        }
#else
        (void)readable;
        memcpy(&w, k + i, n - i);
#endif
        h = (h ^ w) * NAME_HASH_K2;
    }
    return h ^ (h >> 29);
}

/*
 * A member name as Java sees it: its bytes, unless they are invalid UTF-8;
 * then their JDK decoding re-encoded (each malformed sequence one U+FFFD), so
 * that names Java reads as the same string compare equal here too.
 */
struct jname {
    const char *p;
    size_t n;
    size_t readable; /* bytes readable from p, for name_hash */
    char *owned;
};

static bool has_high_byte(const char *k, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        if (w & UINT64_C(0x8080808080808080)) {
            return true;
        }
    }
    for (; i < n; i++) {
        if ((unsigned char)k[i] & 0x80) {
            return true;
        }
    }
    return false;
}

static void jname_get(struct jname *jn, const char *k, size_t n, size_t readable)
{
    jn->p = k;
    jn->n = n;
    jn->readable = readable;
    jn->owned = NULL;
    if (!has_high_byte(k, n) || ejson_utf8_valid_java(k, n)) {
        return;
    }
    jn->owned = xmalloc(3 * n + 1); /* pathological names only */
    jn->n = ejson_java_utf8(k, n, jn->owned);
    jn->p = jn->owned;
    jn->readable = jn->n;
}

static void jname_done(struct jname *jn)
{
    free(jn->owned);
}

static void names_reserve(struct ejson_buf *buf, size_t need)
{
    if (buf->keys_cap < need) {
        size_t cap = buf->keys_cap ? buf->keys_cap : 256;
        while (cap < need) {
            cap *= 2;
        }
        buf->keys = xrealloc(buf->keys, cap * sizeof buf->keys[0]);
        buf->keys_cap = cap;
    }
}

/* Opens a table sized for a document of len bytes: an element with a
 * short name and a number takes 8-12 bytes, so len / 6 slots keeps the load
 * under one half without growing in the usual case. */
void names_open(struct ejson_buf *buf, struct names *t, uint32_t len)
{
    size_t want = len / 6, size = NAMES_MIN;
    while (size < want && size < NAMES_MAX) {
        size *= 2;
    }
    t->base = buf->keys_top;
    t->size = size;
    t->count = 0;
    names_reserve(buf, t->base + t->size);
    memset(buf->keys + t->base, 0, t->size * sizeof buf->keys[0]);
    buf->keys_top = t->base + t->size;
}

static const char *entry_name(const uint8_t *data, uint64_t e, size_t *n)
{
    const char *k = (const char *)data + (e & NAME_OFFSET) + 1;
    *n = strlen(k);
    return k;
}

/*
 * Finds name jn (hash h) in t; returns its slot, or the empty slot where it
 * belongs (*found false).
 */
static size_t names_find(const struct ejson_buf *buf, const struct names *t, const uint8_t *data,
                         uint32_t len, const struct jname *jn, uint64_t h, bool *found)
{
    size_t mask = t->size - 1;
    size_t i = (size_t)h & mask;
    for (;;) {
        uint64_t e = buf->keys[t->base + i];
        if (e == 0) {
            *found = false;
            return i;
        }
        if ((e >> 32) == (h >> 32)) {
            size_t en;
            const char *ek = entry_name(data, e, &en);
            struct jname ej;
            jname_get(&ej, ek, en, (size_t)(data + len - (const uint8_t *)ek));
            bool same = ej.n == jn->n && memcmp(ej.p, jn->p, jn->n) == 0;
            jname_done(&ej);
            if (same) {
                *found = true;
                return i;
            }
        }
        i = (i + 1) & mask;
    }
}

/* Doubles the table (it is the top region of buf->keys). */
static void names_grow(struct ejson_buf *buf, struct names *t, const uint8_t *data, uint32_t len)
{
    size_t old = t->base, osize = t->size, nsize = osize * 2;
    names_reserve(buf, old + osize + nsize);
    uint64_t *tmp = buf->keys + old + osize;
    memset(tmp, 0, nsize * sizeof tmp[0]);
    for (size_t i = 0; i < osize; i++) {
        uint64_t e = buf->keys[old + i];
        if (e == 0) {
            continue;
        }
        size_t en;
        const char *ek = entry_name(data, e, &en);
        struct jname ej;
        jname_get(&ej, ek, en, (size_t)(data + len - (const uint8_t *)ek));
        size_t j = (size_t)name_hash(ej.p, ej.n, ej.readable) & (nsize - 1);
        jname_done(&ej);
        while (tmp[j] != 0) {
            j = (j + 1) & (nsize - 1);
        }
        tmp[j] = e;
    }
    memmove(buf->keys + old, tmp, nsize * sizeof tmp[0]);
    t->size = nsize;
    buf->keys_top = old + nsize;
}

/* The table slot of the member named k (n bytes, inside data): its entry
 * when *found, else the free slot it would take; *h its name's hash. */
static size_t names_slot(struct ejson_buf *buf, struct names *t, const uint8_t *data,
                         uint32_t len, const char *k, size_t n, uint64_t *h, bool *found)
{
    struct jname jn;
    jname_get(&jn, k, n, (size_t)(data + len - (const uint8_t *)k));
    *h = name_hash(jn.p, jn.n, jn.readable);
    size_t i = names_find(buf, t, data, len, &jn, *h, found);
    jname_done(&jn);
    return i;
}

/*
 * Adds the member named k (n bytes, inside data). Returns false if its name was seen
 * before in this document (the entry then points at this later element).
 */
bool names_add(struct ejson_buf *buf, struct names *t, const uint8_t *data, uint32_t len,
               const char *k, size_t n)
{
    if ((t->count + 1) * 2 > t->size) {
        names_grow(buf, t, data, len);
    }
    uint64_t h;
    bool found;
    size_t i = names_slot(buf, t, data, len, k, n, &h, &found);
    uint64_t off = (uint64_t)((const uint8_t *)k - 1 - data); /* the element's type byte */
    if (found) {
        buf->keys[t->base + i] = (buf->keys[t->base + i] & ~NAME_OFFSET) | off;
        return false;
    }
    buf->keys[t->base + i] = (h & ~UINT64_C(0xffffffff)) | off;
    t->count++;
    return true;
}

/*
 * Writes a document that repeats a name: each name once, at its first
 * position, with its last value. t already holds every name with the offset
 * of its last element (the first pass ran to the end).
 */
void names_write_collapsed(struct ejson_buf *buf, struct names *t, const uint8_t *data,
                           uint32_t len, enum ejson_mode mode, enum ejson_separators sep)
{
    bson_iter_t it;
    bool first = true;
    put(buf, "{", 1);
    if (bson_iter_init_from_data(&it, data, len)) {
        while (bson_iter_next(&it)) {
            const char *k = bson_iter_key_unsafe(&it);
            size_t n = bson_iter_key_len(&it);
            uint64_t h;
            bool found;
            size_t i = names_slot(buf, t, data, len, k, n, &h, &found);
            uint64_t e = buf->keys[t->base + i];
            if (!found || (e & NAME_EMITTED)) {
                continue;
            }
            buf->keys[t->base + i] = e | NAME_EMITTED;
            /* the last occurrence's name may have other bytes (invalid
             * UTF-8 that decodes alike), hence its own length */
            size_t last_n;
            entry_name(data, e, &last_n);
            bson_iter_t last;
            if (!bson_iter_init_from_data_at_offset(&last, data, len, (uint32_t)(e & NAME_OFFSET),
                                                    (uint32_t)last_n)) {
                continue;
            }
            if (!first) {
                put_sep(buf, sep);
            }
            first = false;
            ejson_write_string(buf, k, n);
            PUT_LIT(buf, ": ");
            ejson_write_value(buf, &last, mode, sep);
        }
    }
    put(buf, "}", 1);
}
