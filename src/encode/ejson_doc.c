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
 * exactly where bson_iter_next would: fixed-size elements are checked here
 * the way libbson checks them (the value must end before the document's
 * last byte; a boolean is 0 or 1), and every other element is read through
 * bson_iter_init_from_data_at_offset, which applies libbson's own checks and
 * gives the iterator ejson_write_value needs.
 *
 * Debezium's documents are Java maps, so a name repeated in one BSON
 * document is printed once (ejson_names_internal.h).
 */
#include "encode/ejson.h"

#include <string.h>

#include "encode/digits_internal.h"
#include "encode/ejson_internal.h"
#include "encode/ejson_names_internal.h"

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
    /* the element through libbson (types the loop does not write itself) */
    bool has_iter;
    bson_iter_t it;
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
static inline bool member_at(const uint8_t *data, uint32_t len, uint32_t off, struct member *m)
{
    const char *k = (const char *)data + off + 1;
    size_t avail = len - off - 1; /* bytes from the name to the document's end */
    m->off = off;
    m->type = data[off];
    m->short_key = false;
    m->has_iter = false;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (avail >= 16) {
        uint64_t w0, w1, z;
        memcpy(&w0, k, 8);
        memcpy(&w1, k + 8, 8);
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
    default:
        if (!bson_iter_init_from_data_at_offset(&m->it, data, len, off,
                                                (uint32_t)m->key_len)) {
            return false;
        }
        m->has_iter = true;
        m->next = m->it.next_off;
        break;
    }
    return m->next < len;
}

/*
 * Writes `"name": ` (after the separator unless first) for m when its name
 * is short and needs no escape; returns false (nothing written) otherwise.
 * Room for 24 bytes must be reserved.
 */
static inline bool put_plain_name(struct ejson_buf *buf, const struct member *m, bool first,
                                  enum ejson_separators sep)
{
    if (!m->short_key) {
        return false;
    }
    /* the bytes past the name become 'a' for the test */
    uint64_t fill = EJSON_ONES * 'a';
    uint64_t t0 = m->key_len >= 8 ? m->w0 : m->w0 | (fill & ~low_bytes(m->key_len));
    uint64_t t1 = m->key_len <= 8 ? fill : m->w1 | (fill & ~low_bytes(m->key_len - 8));
    if (!plain_ascii8(t0) || !plain_ascii8(t1)) {
        return false;
    }
    char *p = buf->data + buf->len;
    if (!first) {
        *p++ = ',';
        if (sep != EJSON_SEP_COMPACT) {
            *p++ = ' ';
        }
    }
    *p = '"';
    memcpy(p + 1, &m->w0, 8);
    memcpy(p + 9, &m->w1, 8);
    memcpy(p + 1 + m->key_len, "\": ", 3);
    buf->len = (size_t)(p + 4 + m->key_len - buf->data);
    return true;
}

static inline size_t put_digits_i64(int64_t v, char *p)
{
    if (v < 0) {
        *p = '-';
        return 1 + digits_u64((uint64_t)0 - (uint64_t)v, p + 1);
    }
    return digits_u64((uint64_t)v, p);
}

/*
 * Writes m's value when it is a double, int32, int64, boolean or null whose
 * form in mode is a plain number or literal (or STRICT's $numberLong), as
 * ejson_write_value would; returns false (nothing written) for any other
 * value. Room for 64 bytes must be reserved.
 */
static inline bool put_plain_scalar(struct ejson_buf *buf, const uint8_t *data,
                                    const struct member *m, enum ejson_mode mode)
{
    const uint8_t *v = data + m->off + 1 + m->key_len + 1;
    char *p = buf->data + buf->len;
    switch (m->type) {
    case BSON_TYPE_DOUBLE: {
        double d;
        memcpy(&d, v, 8);
        if (mode == EJSON_CANONICAL || (mode == EJSON_RELAXED && (d != d || d - d != 0))) {
            return false;
        }
        p += ejson_java_double(d, p);
        break;
    }
    case BSON_TYPE_INT32: {
        int32_t i;
        memcpy(&i, v, 4);
        if (mode == EJSON_CANONICAL) {
            return false;
        }
        p += put_digits_i64((int32_t)BSON_UINT32_FROM_LE((uint32_t)i), p);
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
        return false;
    }
    buf->len = (size_t)(p - buf->data);
    return true;
}

/* An iterator on m for ejson_write_value (m passed member_at's checks). */
static const bson_iter_t *member_iter(const uint8_t *data, uint32_t len, struct member *m)
{
    if (!m->has_iter) {
        /* accepted above, so libbson accepts it too */
        bson_iter_init_from_data_at_offset(&m->it, data, len, m->off, (uint32_t)m->key_len);
        m->has_iter = true;
    }
    return &m->it;
}

void ejson_write_members(struct ejson_buf *buf, const uint8_t *data, uint32_t len, bool array,
                         enum ejson_mode mode, enum ejson_separators sep)
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
    struct names names = {0};
    bool repeated = false;
    if (!array) {
        names_open(buf, &names, len);
    }
    bool first = true;
    put(buf, array ? "[" : "{", 1);
    struct member m;
    for (uint32_t off = 4; member_at(data, len, off, &m); off = m.next) {
        const char *key = (const char *)data + off + 1;
        if (!array) {
            bool added = m.short_key && m.w0 == (m.w0 & ~EJSON_HIGHS) &&
                                 m.w1 == (m.w1 & ~EJSON_HIGHS)
                             ? names_add_ascii(buf, &names, data, len, key, m.key_len,
                                               name_hash16(m.w0, m.w1, m.key_len))
                             : names_add(buf, &names, data, len, key, m.key_len);
            if (!added) {
                repeated = true; /* finish the table, then start over */
            }
            if (repeated) {
                continue;
            }
        }
        reserve(buf, 96); /* a separator, a short name, a plain scalar */
        if (array) {
            if (!first) {
                put_sep(buf, sep);
            }
        } else if (!put_plain_name(buf, &m, first, sep)) {
            if (!first) {
                put_sep(buf, sep);
            }
            ejson_write_string_bounded(buf, key, m.key_len,
                                       (size_t)(len - (off + 1)));
            PUT_LIT(buf, ": ");
            reserve(buf, 64);
        }
        first = false;
        if (!put_plain_scalar(buf, data, &m, mode)) {
            ejson_write_value(buf, member_iter(data, len, &m), mode, sep);
        }
    }
    if (repeated) {
        buf->len = start;
        names_write_collapsed(buf, &names, data, len, mode, sep);
    } else {
        put(buf, array ? "]" : "}", 1);
    }
    if (!array) {
        names_close(buf, &names);
    }
}

void ejson_write_document(struct ejson_buf *buf, const bson_t *doc, enum ejson_mode mode,
                          enum ejson_separators sep)
{
    ejson_write_members(buf, bson_get_data(doc), doc->len, false, mode, sep);
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
