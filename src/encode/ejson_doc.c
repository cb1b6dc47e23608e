/*
 * encode/ejson_doc: documents and arrays in extended JSON (debezium-format.md
 * §2.2): members in order, `"name": value` separated as the caller asks, and
 * the Kafka key's _id.
 *
 * The member loop walks the BSON itself instead of calling bson_iter_next
 * per member: it finds a name's end eight bytes at a time, checks it for
 * escapes and hashes it (for the repeated-name table, ejson_names.c) from
 * the same words, and writes the common scalars (doubles, integers,
 * booleans, null) straight into space reserved once per member. It stops
 * exactly where bson_iter_next would: fixed-size elements and strings are
 * checked here the way libbson checks them (the value must end before the
 * document's last byte; a boolean is 0 or 1; a string's length counts its
 * final NUL), and every other element is read through
 * bson_iter_init_from_data_at_offset, which applies libbson's own checks and
 * gives the iterator ejson_write_value needs.
 *
 * Debezium's documents are Java maps, so a name repeated in one BSON
 * document is printed once (ejson_names_internal.h).
 */
#include "encode/ejson.h"

#include <string.h>

#include "common/xalloc.h"
#include "encode/digits_internal.h"
#include "encode/ejson_internal.h"
#include "encode/ejson_names_internal.h"

/* The member loop's steps are inlined into it; its rare paths are not, which
 * keeps its registers for the common case. */
#if defined(__GNUC__)
#define EJSON_HOT_INLINE inline __attribute__((always_inline))
#define EJSON_COLD __attribute__((noinline, cold)) /* out of the member loop */
#else
#define EJSON_HOT_INLINE inline
#define EJSON_COLD
#endif

/* One element of a document, as bson_iter_next would position on it. */
struct member {
    uint32_t off;  /* the type byte */
    uint32_t next; /* the next element's type byte */
    uint8_t type;
    size_t key_len;
    /* names of fewer than 16 bytes read as two words (short_key; the
     * bytes past key_len zeroed), else both 0 */
    bool short_key;
    uint64_t w0, w1;
    bool has_iter; /* the caller's iterator is on this element */
};

/* Bytes of a word below byte n (n < 8). */
static inline uint64_t low_bytes(size_t n)
{
    return (UINT64_C(1) << (8 * n)) - 1;
}

/*
 * Positions m on the element at off of data (len bytes, a document that
 * bson_iter_init_from_data accepted, off < len). Returns false where
 * bson_iter_next returns false: no NUL ends the name, an unknown or EOD
 * type, or a value that does not end before the document's last byte.
 */

static EJSON_HOT_INLINE bool member_at(const uint8_t *data, uint32_t len, uint32_t off,
                                       struct member *m, bson_iter_t *it)
{
    const char *k = (const char *)data + off + 1;
    size_t avail = len - off - 1; /* bytes from the name to the document's end */
    m->off = off;
    m->type = data[off];
    m->short_key = false;
    m->has_iter = false;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    {
        uint64_t w0, w1, z;
        if (avail >= 16) {
            memcpy(&w0, k, 8);
            memcpy(&w1, k + 8, 8);
        } else { /* near the end: the bytes past it read as NULs */
            unsigned char tail[16] = {0};
            memcpy(tail, k, avail);
            memcpy(&w0, tail, 8);
            memcpy(&w1, tail + 8, 8);
        }
        if ((z = has_zero_byte(w0)) != 0) {
            m->key_len = (size_t)__builtin_ctzll(z) / 8;
            m->w0 = w0 & low_bytes(m->key_len);
            m->w1 = 0;
            m->short_key = true;
        } else if ((z = has_zero_byte(w1)) != 0) {
            m->key_len = 8 + (size_t)__builtin_ctzll(z) / 8;
            m->w0 = w0;
            m->w1 = w1 & low_bytes(m->key_len - 8);
            m->short_key = true;
        }
        if (m->short_key && m->key_len >= avail) {
            return false; /* the NUL found is past the end */
        }
    }
#endif
    if (!m->short_key) {
        const char *nul = memchr(k, 0, avail);
        if (!nul) {
            return false;
        }
        m->key_len = (size_t)(nul - k);
        m->w0 = m->w1 = 0;
    }
    uint32_t o = off + 1 + (uint32_t)m->key_len + 1; /* the value */
    switch (m->type) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_TIMESTAMP:
        m->next = o + 8;
        break;
    case BSON_TYPE_INT32:
        m->next = o + 4;
        break;
    case BSON_TYPE_NULL:
        m->next = o;
        break;
    case BSON_TYPE_BOOL:
        if (o >= len || data[o] > 1) {
            return false;
        }
        m->next = o + 1;
        break;
    case BSON_TYPE_UTF8: {
        /* libbson's checks: the length fits, counts the NUL, and the
         * string ends with one before the document's last byte */
        uint32_t l;
        if (o + 4 >= len) {
            return false;
        }
        memcpy(&l, data + o, 4);
        l = BSON_UINT32_FROM_LE(l);
        if (l == 0 || l > len - (o + 4) || o + 4 + l >= len || data[o + 4 + l - 1] != 0) {
            return false;
        }
        m->next = o + 4 + l;
        break;
    }
    default:
        if (!bson_iter_init_from_data_at_offset(it, data, len, off, (uint32_t)m->key_len)) {
            return false;
        }
        m->has_iter = true;
        m->next = it->next_off;
        break;
    }
    return m->next < len;
}

/* True if m's name is short (short_key) and needs no escape. */
static inline bool name_is_plain(const struct member *m)
{
    if (!m->short_key) {
        return false;
    }
    /* the bytes past the name become 'a' for the test */
    uint64_t fill = EJSON_ONES * 'a';
    uint64_t t0 = m->key_len >= 8 ? m->w0 : m->w0 | (fill & ~low_bytes(m->key_len));
    uint64_t t1 = m->key_len <= 8 ? fill : m->w1 | (fill & ~low_bytes(m->key_len - 8));
    return plain_ascii8(t0) && plain_ascii8(t1);
}

/* Writes `"name": ` for m, whose name is plain (name_is_plain), at p
 * (room for 20 bytes); returns the end. */
static inline char *put_plain_name(char *p, const struct member *m)
{
    *p = '"';
    memcpy(p + 1, &m->w0, 8);
    memcpy(p + 9, &m->w1, 8);
    memcpy(p + 1 + m->key_len, "\": ", 3);
    return p + 4 + m->key_len;
}

static inline size_t put_digits_i64(int64_t v, char *p)
{
    size_t neg = v < 0;
    *p = '-';
    return neg + digits_u64(neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, p + neg);
}

/*
 * Writes m's value at p (room for 64 bytes) when it is a double, int32,
 * int64, boolean or null whose form in mode is a plain number or literal (or
 * STRICT's $numberLong), as ejson_write_value would; returns the end, or
 * NULL (nothing written) for any other value.
 */
static inline char *put_plain_scalar(char *p, const uint8_t *data, const struct member *m,
                                     enum ejson_mode mode)
{
    const uint8_t *v = data + m->off + 1 + m->key_len + 1;
    switch (m->type) {
    case BSON_TYPE_DOUBLE: {
        double d;
        memcpy(&d, v, 8);
        d = BSON_DOUBLE_FROM_LE(d);
        if (mode == EJSON_CANONICAL || (mode == EJSON_RELAXED && (d != d || d - d != 0))) {
            return NULL;
        }
        p += ejson_java_double(d, p);
        break;
    }
    case BSON_TYPE_INT32: {
        int32_t i;
        memcpy(&i, v, 4);
        if (mode == EJSON_CANONICAL) {
            return NULL;
        }
        i = (int32_t)BSON_UINT32_FROM_LE((uint32_t)i);
#ifdef MCDC_DIGIT_WORDS
        if (i < 0) {
            *p++ = '-';
        }
        p += digits_u32(i < 0 ? 0u - (uint32_t)i : (uint32_t)i, p);
#else
        p += put_digits_i64(i, p);
#endif
        break;
    }
    case BSON_TYPE_INT64: {
        int64_t i;
        memcpy(&i, v, 8);
        i = (int64_t)BSON_UINT64_FROM_LE((uint64_t)i);
        if (mode == EJSON_RELAXED) {
            p += put_digits_i64(i, p);
        } else {
            memcpy(p, "{\"$numberLong\": \"", 17);
            p += 17;
            p += put_digits_i64(i, p);
            memcpy(p, "\"}", 2);
            p += 2;
        }
        break;
    }
    case BSON_TYPE_BOOL:
        if (*v) {
            memcpy(p, "true", 4);
            p += 4;
        } else {
            memcpy(p, "false", 5);
            p += 5;
        }
        break;
    case BSON_TYPE_NULL:
        memcpy(p, "null", 4);
        p += 4;
        break;
    default:
        return NULL;
    }
    return p;
}

/* it on the element at off (key_len bytes of name) for ejson_write_value,
 * unless member_at left it there (has_iter); the element passed member_at's
 * checks, so libbson accepts it too. */
static const bson_iter_t *member_iter(const uint8_t *data, uint32_t len, uint32_t off,
                                      size_t key_len, bool has_iter, bson_iter_t *it)
{
    if (!has_iter) {
        bson_iter_init_from_data_at_offset(it, data, len, off, (uint32_t)key_len);
    }
    return it;
}

/* True if m's name is short and ASCII (then Java's string has its bytes;
 * any other name is compared as Java decodes it, by names_add). */
static inline bool short_ascii(const struct member *m)
{
    return m->short_key && ((m->w0 | m->w1) & EJSON_HIGHS) == 0;
}

#define SHAPE_MAX 4096 /* names kept of a top-level document */

/*
 * The names of the document being written. A top-level document first
 * compares its names with buf->shape (those of the last top-level document,
 * known distinct and plain); at the first difference it opens the hash
 * table with the names before it, and from there on writes its own names
 * into buf->shape as long as they stay distinct and plain. Other documents
 * use the table from the start.
 */
struct doc_names {
    struct names *table; /* opened by the caller when !shape_match */
    bool open;           /* table in use */
    bool shape_match;    /* the names so far are shape[0..n) */
    bool shape_rec;      /* buf->shape[0..n) are this document's names */
    size_t n;            /* names seen */
    /* buf->shape as the document started (unchanged while it matches) */
    const uint64_t *shape;
    size_t shape_len;
};

/* Opens table holding the first count names of data (all of them distinct
 * short ASCII names, as buf->shape's are). */
static EJSON_COLD void open_table_after(struct ejson_buf *buf, struct names *table,
                                        const uint8_t *data, uint32_t len, size_t count)
{
    names_open(buf, table, len);
    struct member m;
    bson_iter_t it;
    uint32_t off = 4;
    for (size_t j = 0; j < count && member_at(data, len, off, &m, &it); j++, off = m.next) {
        names_add_ascii(buf, table, data, len, (const char *)data + off + 1, m.key_len,
                        name_hash16(m.w0, m.w1, m.key_len));
    }
}

/* Doubles buf->shape's room (aborts on out-of-memory). */
static EJSON_COLD void shape_grow(struct ejson_buf *buf)
{
    size_t cap = buf->shape_cap ? 2 * buf->shape_cap : 64;
    buf->shape = xrealloc(buf->shape, cap * 2 * sizeof buf->shape[0]);
    buf->shape_cap = cap;
}

/* Stores m's name as buf->shape's i-th (m short and plain). */
static inline void shape_put(struct ejson_buf *buf, size_t i, const struct member *m)
{
    if (i >= buf->shape_cap) {
        shape_grow(buf);
    }
    buf->shape[2 * i] = m->w0;
    buf->shape[2 * i + 1] = m->w1;
}

/*
 * Counts member m (at data, len bytes) in dn. Returns false if its name
 * repeats an earlier one; sets *plain when the name is short and needs no
 * escape (put_plain_name may write it).
 */
static EJSON_HOT_INLINE bool name_seen(struct ejson_buf *buf, struct doc_names *dn,
                                       const uint8_t *data, uint32_t len, const struct member *m,
                                       bool *plain)
{
    size_t i = dn->n++;
    if (dn->shape_match) {
        if (i < dn->shape_len && m->short_key && m->w0 == dn->shape[2 * i] &&
            m->w1 == dn->shape[2 * i + 1]) {
            *plain = true;
            return true;
        }
        dn->shape_match = false;
        open_table_after(buf, dn->table, data, len, i);
        dn->open = true;
    }
    *plain = name_is_plain(m);
    const char *k = (const char *)data + m->off + 1;
    bool added = short_ascii(m) ? names_add_ascii(buf, dn->table, data, len, k, m->key_len,
                                                  name_hash16(m->w0, m->w1, m->key_len))
                                : names_add(buf, dn->table, data, len, k, m->key_len);
    if (dn->shape_rec) {
        if (added && *plain && i < SHAPE_MAX) {
            shape_put(buf, i, m);
        } else {
            dn->shape_rec = false; /* the names before it stay distinct */
            buf->shape_len = i;
        }
    }
    return added;
}

/* ejson_write_members; top for a document written by ejson_write_document. */
static void write_members(struct ejson_buf *buf, const uint8_t *data, uint32_t len, bool array,
                          bool top, enum ejson_mode mode, enum ejson_separators sep)
{
    bson_iter_t check;
    if (!data || !bson_iter_init_from_data(&check, data, len)) {
        /* libbson rejects a malformed sub-document; render it empty rather
         * than reading past it. Unreachable for documents that passed
         * the enclosing walk's length checks. */
        put(buf, array ? "[]" : "{}", 2);
        return;
    }
    size_t start = buf->len;
    struct names table = {0};
    struct doc_names dn = {.table = &table,
                           .shape_match = top && buf->shape_len > 0,
                           .shape_rec = top,
                           .shape = buf->shape,
                           .shape_len = buf->shape_len};
    bool repeated = false;
    if (!array && !dn.shape_match) {
        names_open(buf, &table, len);
        dn.open = true;
    }
    bool first = true;
    put(buf, array ? "[" : "{", 1);
    struct member m;
    bson_iter_t it; /* elements the loop does not write itself */
    for (uint32_t off = 4; member_at(data, len, off, &m, &it); off = m.next) {
        bool plain = false;
        if (!array) {
            if (!name_seen(buf, &dn, data, len, &m, &plain)) {
                repeated = true; /* finish the table, then start over */
            }
            if (repeated) {
                continue;
            }
        }
        /* a separator, a short name and a plain scalar through p; buf->len
         * is set once (stores through p could alias buf's fields) */
        reserve(buf, 96);
        char *p = buf->data + buf->len;
        if (!first) {
            p[0] = ',';
            p[1] = ' ';
            p += sep == EJSON_SEP_COMPACT ? 1 : 2;
        }
        first = false;
        if (plain) {
            p = put_plain_name(p, &m);
        } else if (!array) {
            buf->len = (size_t)(p - buf->data);
            ejson_write_string_bounded(buf, (const char *)data + off + 1, m.key_len,
                                       (size_t)(len - (off + 1)));
            PUT_LIT(buf, ": ");
            reserve(buf, 64);
            p = buf->data + buf->len;
        }
        char *end = put_plain_scalar(p, data, &m, mode);
        if (end) {
            buf->len = (size_t)(end - buf->data);
        } else if (m.type == BSON_TYPE_UTF8) {
            buf->len = (size_t)(p - buf->data);
            uint32_t at = off + 1 + (uint32_t)m.key_len + 1 + 4; /* after the length */
            ejson_write_string(buf, (const char *)data + at, m.next - at - 1);
        } else {
            buf->len = (size_t)(p - buf->data);
            ejson_write_value(buf, member_iter(data, len, off, m.key_len, m.has_iter, &it), mode,
                              sep);
        }
    }
    if (dn.shape_rec && !dn.shape_match) {
        buf->shape_len = dn.n;
    }
    if (repeated) {
        buf->len = start;
        names_write_collapsed(buf, &table, data, len, mode, sep);
    } else {
        put(buf, array ? "]" : "}", 1);
    }
    if (dn.open) {
        names_close(buf, &table);
    }
}

void ejson_write_members(struct ejson_buf *buf, const uint8_t *data, uint32_t len, bool array,
                         enum ejson_mode mode, enum ejson_separators sep)
{
    write_members(buf, data, len, array, false, mode, sep);
}

void ejson_write_document(struct ejson_buf *buf, const bson_t *doc, enum ejson_mode mode,
                          enum ejson_separators sep)
{
    write_members(buf, bson_get_data(doc), doc->len, false, true, mode, sep);
}

bool ejson_write_key(struct ejson_buf *buf, const bson_t *doc)
{
    bson_iter_t it, last;
    bool found = false;
    if (!bson_iter_init(&it, doc)) {
        return false;
    }
    /* the last _id: BsonDocument.get() sees the last of repeated names */
    while (bson_iter_next(&it)) {
        if (bson_iter_key_len(&it) == 3 && memcmp(bson_iter_key_unsafe(&it), "_id", 3) == 0) {
            last = it;
            found = true;
        }
    }
    if (!found) {
        return false;
    }
    ejson_write_value(buf, &last, EJSON_RELAXED, EJSON_SEP_COMPACT);
    return true;
}
