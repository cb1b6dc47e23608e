/*
 * topology/gate_order: the BSON comparison order of chunk bounds (see
 * gate.h; MongoDB manual, "Comparison/Sort Order").
 */
#include <string.h>

#include "topology/gate.h"
#include "topology/gate_internal.h"

/* Canonical type rank of the comparison order. */
static int type_rank(bson_type_t t)
{
    switch (t) {
    case BSON_TYPE_MINKEY: return 0;
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL: return 1;
    case BSON_TYPE_INT32:
    case BSON_TYPE_INT64:
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DECIMAL128: return 2;
    case BSON_TYPE_SYMBOL:
    case BSON_TYPE_UTF8: return 3;
    case BSON_TYPE_DOCUMENT: return 4;
    case BSON_TYPE_ARRAY: return 5;
    case BSON_TYPE_BINARY: return 6;
    case BSON_TYPE_OID: return 7;
    case BSON_TYPE_BOOL: return 8;
    case BSON_TYPE_DATE_TIME: return 9;
    case BSON_TYPE_TIMESTAMP: return 10;
    case BSON_TYPE_REGEX: return 11;
    case BSON_TYPE_MAXKEY: return 13;
    default: return 12;
    }
}

static int cmp_bytes(const void *a, size_t alen, const void *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c != 0)
        return c < 0 ? -1 : 1;
    return alen < blen ? -1 : alen > blen ? 1 : 0;
}

static int cmp_num(const bson_iter_t *a, const bson_iter_t *b)
{
    if (BSON_ITER_HOLDS_DOUBLE(a) || BSON_ITER_HOLDS_DOUBLE(b)) {
        double x = bson_iter_as_double(a), y = bson_iter_as_double(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    int64_t x = bson_iter_as_int64(a), y = bson_iter_as_int64(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

int gate_compare_values(const bson_iter_t *a, const bson_iter_t *b)
{
    bson_type_t ta = bson_iter_type(a), tb = bson_iter_type(b);
    int ra = type_rank(ta), rb = type_rank(tb);
    const bson_value_t *va, *vb;

    if (ra != rb)
        return ra < rb ? -1 : 1;
    va = bson_iter_value((bson_iter_t *)a);
    vb = bson_iter_value((bson_iter_t *)b);
    switch (ra) {
    case 0:
    case 1:
    case 13: return 0;
    case 2: return cmp_num(a, b);
    case 3: {
        uint32_t la, lb;
        const char *sa = ta == BSON_TYPE_UTF8 ? bson_iter_utf8(a, &la) : bson_iter_symbol(a, &la);
        const char *sb = tb == BSON_TYPE_UTF8 ? bson_iter_utf8(b, &lb) : bson_iter_symbol(b, &lb);
        return cmp_bytes(sa, la, sb, lb);
    }
    case 7: return cmp_bytes(va->value.v_oid.bytes, 12, vb->value.v_oid.bytes, 12);
    case 8: return (int)va->value.v_bool - (int)vb->value.v_bool;
    case 9: {
        int64_t x = va->value.v_datetime, y = vb->value.v_datetime;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    case 10: {
        uint64_t x = ((uint64_t)va->value.v_timestamp.timestamp << 32) | va->value.v_timestamp.increment;
        uint64_t y = ((uint64_t)vb->value.v_timestamp.timestamp << 32) | vb->value.v_timestamp.increment;
        return x < y ? -1 : x > y ? 1 : 0;
    }
    case 6:
        if (va->value.v_binary.data_len != vb->value.v_binary.data_len)
            return va->value.v_binary.data_len < vb->value.v_binary.data_len ? -1 : 1;
        if (va->value.v_binary.subtype != vb->value.v_binary.subtype)
            return va->value.v_binary.subtype < vb->value.v_binary.subtype ? -1 : 1;
        return cmp_bytes(va->value.v_binary.data, va->value.v_binary.data_len,
                         vb->value.v_binary.data, vb->value.v_binary.data_len);
    default: {
        /* documents, arrays, regexes and the rest: by their raw bytes (only
         * equality matters for chunk bounds of these rare shard-key types) */
        const uint8_t *da, *db;
        uint32_t la, lb;
        if ((ra == 4 || ra == 5)) {
            if (ra == 4) {
                bson_iter_document(a, &la, &da);
                bson_iter_document(b, &lb, &db);
            } else {
                bson_iter_array(a, &la, &da);
                bson_iter_array(b, &lb, &db);
            }
            return cmp_bytes(da, la, db, lb);
        }
        return 0;
    }
    }
}


int gate_cmp_key_bound(const struct keyval *vals, size_t n, const bson_t *bound)
{
    bson_iter_t it;
    size_t i = 0;
    if (!bson_iter_init(&it, bound))
        return 0;
    while (i < n && bson_iter_next(&it)) {
        int c = gate_compare_values(&vals[i].it, &it);
        if (c != 0)
            return c;
        i++;
    }
    return 0;
}

/* chunks[i] holds the key */
static bool holds(const struct chunk *ch, const struct keyval *vals, size_t nvals)
{
    return gate_cmp_key_bound(vals, nvals, ch->min) >= 0 &&
           gate_cmp_key_bound(vals, nvals, ch->max) < 0;
}

size_t gate_chunk_find(const struct chunk *chunks, size_t n, const struct keyval *vals,
                       size_t nvals)
{
    size_t lo = 0, hi = n;

    /* lo: the first chunk whose min is above the key */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (gate_cmp_key_bound(vals, nvals, chunks[mid].min) < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo > 0 && holds(&chunks[lo - 1], vals, nvals))
        return lo - 1;
    for (size_t i = 0; i < n; i++)
        if (holds(&chunks[i], vals, nvals))
            return i;
    return n;
}
