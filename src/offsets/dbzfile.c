/*
 * offsets/dbzfile: reader and writer of Kafka Connect's FileOffsetBackingStore
 * file (see dbzfile.h). The stream grammar is the Java Object Serialization
 * Specification, chapter 6 ("Object Serialization Stream Protocol"):
 *
 *   stream     = magic(0xACED) version(5) content
 *   TC_OBJECT  classDesc newHandle classdata
 *   classDesc  = TC_CLASSDESC className serialVersionUID newHandle flags
 *                fieldCount fields classAnnotation(TC_ENDBLOCKDATA) superClassDesc
 *              | TC_REFERENCE handle | TC_NULL
 *   newArray   = TC_ARRAY classDesc newHandle size(int) values
 *
 * java.util.HashMap has a writeObject method (flags SC_WRITE_METHOD |
 * SC_SERIALIZABLE): its fields loadFactor (float) and threshold (int), then
 * block data holding the bucket count and the size (two ints), then size
 * key/value objects, then TC_ENDBLOCKDATA. Handles count from 0x7E0000 in
 * the order objects are first written: the HashMap class descriptor, the
 * map, the byte[] class descriptor, then each array.
 *
 * Thread: any.
 */
#include "offsets/dbzfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"

/* java.io.ObjectStreamConstants */
#define STREAM_MAGIC 0xACEDu
#define STREAM_VERSION 5u
#define TC_NULL 0x70
#define TC_REFERENCE 0x71
#define TC_CLASSDESC 0x72
#define TC_OBJECT 0x73
#define TC_STRING 0x74
#define TC_ARRAY 0x75
#define TC_BLOCKDATA 0x77
#define TC_ENDBLOCKDATA 0x78
#define TC_BLOCKDATALONG 0x7A
#define SC_WRITE_METHOD 0x01
#define SC_SERIALIZABLE 0x02
#define BASE_WIRE_HANDLE 0x7E0000u

/* serialVersionUIDs of the two classes (java.util.HashMap's declared one;
 * byte[]'s computed one, as every JVM writes it). */
#define HASHMAP_SUID 0x0507DAC1C31660D1ull
#define BYTES_SUID 0xACF317F8060854E0ull

/* Handles a real file needs: 3 + 2 per entry. */
#define HANDLES_MAX (1u << 22)

void dbz_offsets_free(struct dbz_offsets *map)
{
    if (!map)
        return;
    for (size_t i = 0; i < map->count; i++) {
        free(map->items[i].key);
        free(map->items[i].value);
    }
    free(map->items);
    map->items = NULL;
    map->count = 0;
}

static uint8_t *dup_bytes(const void *p, size_t n)
{
    if (!p)
        return NULL;
    uint8_t *d = xmalloc(n ? n : 1);
    if (n)
        memcpy(d, p, n);
    return d;
}

const struct dbz_offset_entry *dbz_offsets_find(const struct dbz_offsets *map, const void *key,
                                                size_t klen)
{
    for (size_t i = 0; i < map->count; i++) {
        const struct dbz_offset_entry *e = &map->items[i];
        if ((e->key == NULL) != (key == NULL))
            continue;
        if (e->key_len == klen && (klen == 0 || !memcmp(e->key, key, klen)))
            return e;
    }
    return NULL;
}

void dbz_offsets_remove(struct dbz_offsets *map, const void *key, size_t klen)
{
    const struct dbz_offset_entry *e = dbz_offsets_find(map, key, klen);
    if (!e)
        return;
    size_t i = (size_t)(e - map->items);
    free(map->items[i].key);
    free(map->items[i].value);
    map->items[i] = map->items[--map->count];
}

void dbz_offsets_put(struct dbz_offsets *map, const void *key, size_t klen, const void *value,
                     size_t vlen)
{
    struct dbz_offset_entry *e = (struct dbz_offset_entry *)dbz_offsets_find(map, key, klen);
    if (!e) {
        map->items = xrealloc(map->items, (map->count + 1) * sizeof *map->items);
        e = &map->items[map->count++];
        e->key = dup_bytes(key, klen);
        e->key_len = key ? klen : 0;
    } else {
        free(e->value);
    }
    e->value = dup_bytes(value, vlen);
    e->value_len = value ? vlen : 0;
}

/* ---- reader ---- */

enum handle_kind { H_CLASSDESC, H_OBJECT, H_STRING, H_ARRAY };

struct handle {
    enum handle_kind kind;
    char *name;     /* H_CLASSDESC: class name; H_STRING: the text */
    uint8_t flags;  /* H_CLASSDESC */
    uint8_t *bytes; /* H_ARRAY: borrowed copy owned here */
    size_t len;
};

struct reader {
    const uint8_t *p;
    size_t len, pos;
    size_t block_left; /* bytes left in the current block-data record */
    struct handle *handles;
    size_t nhandles;
    struct mcdc_error *err;
};

static bool fail(struct reader *r, const char *what)
{
    return mcdc_error_set(r->err, MCDC_ERR_IO, EINVAL,
                          "not a Kafka Connect FileOffsetBackingStore file: at byte %zu: %s",
                          r->pos, what);
}

static bool need(struct reader *r, size_t n)
{
    if (r->len - r->pos < n)
        return fail(r, "the stream ends early (truncated file)");
    return true;
}

static bool u8(struct reader *r, uint8_t *v)
{
    if (!need(r, 1))
        return false;
    *v = r->p[r->pos++];
    return true;
}

static bool u16(struct reader *r, uint16_t *v)
{
    if (!need(r, 2))
        return false;
    *v = (uint16_t)(r->p[r->pos] << 8 | r->p[r->pos + 1]);
    r->pos += 2;
    return true;
}

static bool u32(struct reader *r, uint32_t *v)
{
    if (!need(r, 4))
        return false;
    const uint8_t *b = r->p + r->pos;
    *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    r->pos += 4;
    return true;
}

static bool u64(struct reader *r, uint64_t *v)
{
    uint32_t hi, lo;
    if (!u32(r, &hi) || !u32(r, &lo))
        return false;
    *v = (uint64_t)hi << 32 | lo;
    return true;
}

/* A modified-UTF-8 string with a 2-byte length, NUL-terminated copy. */
static bool utf(struct reader *r, char **out)
{
    uint16_t n;
    if (!u16(r, &n) || !need(r, n))
        return false;
    *out = xstrndup((const char *)r->p + r->pos, n);
    r->pos += n;
    return true;
}

static uint32_t new_handle(struct reader *r, enum handle_kind kind)
{
    if (r->nhandles >= HANDLES_MAX)
        return UINT32_MAX;
    r->handles = xrealloc(r->handles, (r->nhandles + 1) * sizeof *r->handles);
    struct handle *h = &r->handles[r->nhandles];
    memset(h, 0, sizeof *h);
    h->kind = kind;
    return (uint32_t)r->nhandles++;
}

static bool reference(struct reader *r, enum handle_kind kind, uint32_t *idx)
{
    uint32_t h;
    if (!u32(r, &h))
        return false;
    if (h < BASE_WIRE_HANDLE || h - BASE_WIRE_HANDLE >= r->nhandles)
        return fail(r, "a back-reference to an object not yet seen");
    *idx = h - BASE_WIRE_HANDLE;
    if (r->handles[*idx].kind != kind)
        return fail(r, "a back-reference to an object of another kind");
    return true;
}

static bool class_desc(struct reader *r, uint32_t *idx, bool *is_null);

/* A field's class name (TC_STRING or a reference to one); discarded. */
static bool type_string(struct reader *r)
{
    uint8_t tc;
    uint32_t idx;
    if (!u8(r, &tc))
        return false;
    if (tc == TC_REFERENCE)
        return reference(r, H_STRING, &idx);
    if (tc != TC_STRING)
        return fail(r, "expected a field type name");
    char *s;
    if (!utf(r, &s))
        return false;
    idx = new_handle(r, H_STRING);
    if (idx == UINT32_MAX) {
        free(s);
        return fail(r, "too many objects");
    }
    r->handles[idx].name = s;
    return true;
}

/* TC_CLASSDESC's body (after the tag). Fields are checked by the caller
 * through the class name: only HashMap's and byte[]'s are accepted. */
static bool new_class_desc(struct reader *r, uint32_t *idx)
{
    char *name;
    uint64_t suid;
    uint8_t flags;
    uint16_t nfields;
    if (!utf(r, &name))
        return false;
    if (!u64(r, &suid) || !u8(r, &flags) || !u16(r, &nfields)) {
        free(name);
        return false;
    }
    *idx = new_handle(r, H_CLASSDESC);
    if (*idx == UINT32_MAX) {
        free(name);
        return fail(r, "too many objects");
    }
    r->handles[*idx].name = name;
    r->handles[*idx].flags = flags;
    bool hashmap = !strcmp(name, "java.util.HashMap"), bytes = !strcmp(name, "[B");
    if (!hashmap && !bytes)
        return fail(r, "a class other than java.util.HashMap and byte[] (not an offsets map)");
    if ((hashmap &&
         (suid != HASHMAP_SUID || flags != (SC_WRITE_METHOD | SC_SERIALIZABLE) || nfields != 2)) ||
        (bytes && (suid != BYTES_SUID || flags != SC_SERIALIZABLE || nfields != 0)))
        return fail(r, "a class descriptor that is not the JDK's");
    for (uint16_t i = 0; i < nfields; i++) {
        uint8_t type;
        char *fname;
        if (!u8(r, &type) || !utf(r, &fname))
            return false;
        bool ok = (i == 0 && type == 'F' && !strcmp(fname, "loadFactor")) ||
                  (i == 1 && type == 'I' && !strcmp(fname, "threshold"));
        free(fname);
        if (!ok)
            return fail(r, "java.util.HashMap fields other than loadFactor and threshold");
        if ((type == 'L' || type == '[') && !type_string(r))
            return false;
    }
    uint8_t tc;
    if (!u8(r, &tc))
        return false;
    if (tc != TC_ENDBLOCKDATA)
        return fail(r, "a class annotation (not written by ObjectOutputStream)");
    uint32_t super_idx;
    bool super_null;
    if (!class_desc(r, &super_idx, &super_null))
        return false;
    if (!super_null)
        return fail(r, "a serializable superclass (HashMap and byte[] have none)");
    return true;
}

static bool class_desc(struct reader *r, uint32_t *idx, bool *is_null)
{
    uint8_t tc;
    *is_null = false;
    if (!u8(r, &tc))
        return false;
    if (tc == TC_NULL) {
        *is_null = true;
        return true;
    }
    if (tc == TC_REFERENCE)
        return reference(r, H_CLASSDESC, idx);
    if (tc == TC_CLASSDESC)
        return new_class_desc(r, idx);
    return fail(r, "expected a class descriptor");
}

/* Reads n bytes of block data (HashMap's bucket count and size). */
static bool block_bytes(struct reader *r, uint8_t *out, size_t n)
{
    while (n > 0) {
        if (r->block_left == 0) {
            uint8_t tc;
            if (!u8(r, &tc))
                return false;
            if (tc == TC_BLOCKDATA) {
                uint8_t l;
                if (!u8(r, &l))
                    return false;
                r->block_left = l;
            } else if (tc == TC_BLOCKDATALONG) {
                uint32_t l;
                if (!u32(r, &l))
                    return false;
                r->block_left = l;
            } else {
                return fail(r, "expected HashMap's bucket count and size");
            }
            continue;
        }
        size_t take = n < r->block_left ? n : r->block_left;
        if (!need(r, take))
            return false;
        memcpy(out, r->p + r->pos, take);
        r->pos += take;
        r->block_left -= take;
        out += take;
        n -= take;
    }
    return true;
}

/* A key or value: null, a new byte[] or a reference to an earlier one. The
 * result is a copy (NULL for null). */
static bool byte_array(struct reader *r, uint8_t **out, size_t *out_len)
{
    uint8_t tc;
    *out = NULL;
    *out_len = 0;
    if (r->block_left != 0)
        return fail(r, "block data where a map key or value belongs");
    if (!u8(r, &tc))
        return false;
    if (tc == TC_NULL)
        return true;
    if (tc == TC_REFERENCE) {
        uint32_t idx;
        if (!reference(r, H_ARRAY, &idx))
            return false;
        *out = dup_bytes(r->handles[idx].bytes, r->handles[idx].len);
        *out_len = r->handles[idx].len;
        return true;
    }
    if (tc != TC_ARRAY)
        return fail(r, "a map key or value that is not a byte[]");
    uint32_t cidx;
    bool is_null;
    if (!class_desc(r, &cidx, &is_null))
        return false;
    if (is_null || strcmp(r->handles[cidx].name, "[B") != 0)
        return fail(r, "an array that is not a byte[]");
    uint32_t aidx = new_handle(r, H_ARRAY);
    if (aidx == UINT32_MAX)
        return fail(r, "too many objects");
    uint32_t n;
    if (!u32(r, &n))
        return false;
    if (n > r->len - r->pos)
        return fail(r, "a byte[] longer than the rest of the file");
    r->handles[aidx].bytes = dup_bytes(r->p + r->pos, n);
    r->handles[aidx].len = n;
    r->pos += n;
    *out = dup_bytes(r->handles[aidx].bytes, n);
    *out_len = n;
    return true;
}

static bool parse_map(struct reader *r, struct dbz_offsets *map)
{
    uint16_t magic, version;
    uint8_t tc;
    if (!u16(r, &magic) || !u16(r, &version))
        return false;
    if (magic != STREAM_MAGIC || version != STREAM_VERSION)
        return fail(r, "no Java serialization header (0xACED 0x0005)");
    if (!u8(r, &tc))
        return false;
    if (tc != TC_OBJECT)
        return fail(r, "expected an object");
    uint32_t cidx;
    bool is_null;
    if (!class_desc(r, &cidx, &is_null))
        return false;
    if (is_null || strcmp(r->handles[cidx].name, "java.util.HashMap") != 0)
        return fail(r, "the stored object is not a java.util.HashMap");
    if (new_handle(r, H_OBJECT) == UINT32_MAX)
        return fail(r, "too many objects");
    uint32_t load_factor_bits, threshold;
    if (!u32(r, &load_factor_bits) || !u32(r, &threshold))
        return false;
    uint8_t counts[8];
    if (!block_bytes(r, counts, sizeof counts))
        return false;
    uint32_t size = (uint32_t)counts[4] << 24 | (uint32_t)counts[5] << 16 |
                    (uint32_t)counts[6] << 8 | counts[7];
    if (size > (r->len - r->pos) / 2)
        return fail(r, "a map size larger than the file can hold");
    for (uint32_t i = 0; i < size; i++) {
        uint8_t *k, *v;
        size_t kl, vl;
        if (!byte_array(r, &k, &kl))
            return false;
        if (!byte_array(r, &v, &vl)) {
            free(k);
            return false;
        }
        if (dbz_offsets_find(map, k, kl)) {
            free(k);
            free(v);
            return fail(r, "a key stored twice");
        }
        map->items = xrealloc(map->items, (map->count + 1) * sizeof *map->items);
        map->items[map->count++] = (struct dbz_offset_entry){k, kl, v, vl};
    }
    if (r->block_left != 0)
        return fail(r, "unread block data after the map");
    if (!u8(r, &tc))
        return false;
    if (tc != TC_ENDBLOCKDATA)
        return fail(r, "more map content than its size says");
    if (r->pos != r->len)
        return fail(r, "bytes after the map");
    return true;
}

bool dbzfile_parse(const uint8_t *data, size_t len, struct dbz_offsets *map, struct mcdc_error *err)
{
    struct reader r = {.p = data, .len = len, .err = err};
    bool ok = parse_map(&r, map);
    for (size_t i = 0; i < r.nhandles; i++) {
        free(r.handles[i].name);
        free(r.handles[i].bytes);
    }
    free(r.handles);
    if (!ok)
        dbz_offsets_free(map);
    return ok;
}

/* ---- writer ---- */

struct wbuf {
    uint8_t *p;
    size_t len, cap;
};

static void put(struct wbuf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n > cap)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_u8(struct wbuf *b, uint8_t v)
{
    put(b, &v, 1);
}

static void put_u16(struct wbuf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)(v >> 8), (uint8_t)v};
    put(b, x, 2);
}

static void put_u32(struct wbuf *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(b, x, 4);
}

static void put_u64(struct wbuf *b, uint64_t v)
{
    put_u32(b, (uint32_t)(v >> 32));
    put_u32(b, (uint32_t)v);
}

static void put_utf(struct wbuf *b, const char *s)
{
    put_u16(b, (uint16_t)strlen(s));
    put(b, s, strlen(s));
}

/* Writes one key or value; *bytes_desc is the handle of byte[]'s class
 * descriptor once written (0 before), *next the next free handle. */
static void put_array(struct wbuf *b, const uint8_t *p, size_t n, uint32_t *bytes_desc,
                      uint32_t *next)
{
    if (!p) {
        put_u8(b, TC_NULL);
        return;
    }
    put_u8(b, TC_ARRAY);
    if (*bytes_desc) {
        put_u8(b, TC_REFERENCE);
        put_u32(b, *bytes_desc);
    } else {
        put_u8(b, TC_CLASSDESC);
        put_utf(b, "[B");
        put_u64(b, BYTES_SUID);
        put_u8(b, SC_SERIALIZABLE);
        put_u16(b, 0);
        put_u8(b, TC_ENDBLOCKDATA);
        put_u8(b, TC_NULL);
        *bytes_desc = (*next)++;
    }
    (*next)++; /* the array's own handle */
    put_u32(b, (uint32_t)n);
    put(b, p, n);
}

void dbzfile_serialize(const struct dbz_offsets *map, uint8_t **out, size_t *out_len)
{
    struct wbuf b = {0};
    put_u16(&b, STREAM_MAGIC);
    put_u16(&b, STREAM_VERSION);
    put_u8(&b, TC_OBJECT);
    put_u8(&b, TC_CLASSDESC);
    put_utf(&b, "java.util.HashMap");
    put_u64(&b, HASHMAP_SUID);
    put_u8(&b, SC_WRITE_METHOD | SC_SERIALIZABLE);
    put_u16(&b, 2);
    put_u8(&b, 'F');
    put_utf(&b, "loadFactor");
    put_u8(&b, 'I');
    put_utf(&b, "threshold");
    put_u8(&b, TC_ENDBLOCKDATA);
    put_u8(&b, TC_NULL);
    /* HashMap filled by put(): the table is allocated at 16 buckets on the
     * first put and doubles when the size passes 0.75 of it; an empty map
     * has no table and threshold 0 (writeObject then reports 16 buckets). */
    uint32_t buckets = 16, threshold = 0;
    if (map->count > 0) {
        while (map->count > (size_t)buckets * 3 / 4)
            buckets *= 2;
        threshold = buckets * 3 / 4;
    }
    put_u32(&b, 0x3F400000u); /* 0.75f */
    put_u32(&b, threshold);
    put_u8(&b, TC_BLOCKDATA);
    put_u8(&b, 8);
    put_u32(&b, buckets);
    put_u32(&b, (uint32_t)map->count);
    uint32_t next = BASE_WIRE_HANDLE + 2, bytes_desc = 0; /* after the class and the map */
    for (size_t i = 0; i < map->count; i++) {
        put_array(&b, map->items[i].key, map->items[i].key_len, &bytes_desc, &next);
        put_array(&b, map->items[i].value, map->items[i].value_len, &bytes_desc, &next);
    }
    put_u8(&b, TC_ENDBLOCKDATA);
    *out = b.p;
    *out_len = b.len;
}
