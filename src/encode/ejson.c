/*
 * encode/ejson: the extended-JSON writer (debezium-format.md §2).
 *
 * Walks BSON with bson_iter_t and appends into a caller-owned, reused
 * ejson_buf. Punctuation follows StrictCharacterStreamJsonWriter (§2.2):
 * `"name": value` always; members and array elements separated by `,` with
 * Debezium's compact settings (indent on, empty indent and newline strings)
 * or `, ` with the driver defaults. Each BSON type is rendered as the Java
 * driver's JsonWriter renders it in STRICT or RELAXED mode (§2.3, the
 * *Converter classes of org.bson.json), or in EXTENDED (canonical) mode for
 * the project's own stored values. Strings go through jstring.c,
 * doubles through jdouble.c.
 *
 * This file renders one value per BSON type and holds the STRICT / RELAXED /
 * CANONICAL choices; documents and arrays (their members, repeated names, the key's
 * _id) are in ejson_doc.c, whose member loop writes the commonest values
 * itself (plain doubles, int32, int64, booleans, null, strings) with the
 * same choices as below and hands every other value to ejson_write_value.
 *
 * Space is reserved once per scalar (the widest form of that scalar) and the
 * bytes are then stored without further checks, so a field costs no call
 * into the allocator once the buffer has reached its steady size.
 */
#include "encode/ejson.h"

#include <string.h>

#include "common/base64.h"
#include "encode/digits_internal.h"
#include "encode/ejson_internal.h"

static size_t fmt_i64(int64_t v, char *out)
{
    if (v < 0) {
        out[0] = '-';
        return 1 + digits_u64((uint64_t)0 - (uint64_t)v, out + 1);
    }
    return digits_u64((uint64_t)v, out);
}

static void put_i64(struct ejson_buf *buf, int64_t v)
{
    reserve(buf, 24);
    buf->len += fmt_i64(v, buf->data + buf->len);
}

/* `"$numberLong": "v"` wrapped in braces. */
static void put_number_long(struct ejson_buf *buf, int64_t v)
{
    PUT_LIT(buf, "{\"$numberLong\": \"");
    put_i64(buf, v);
    PUT_LIT(buf, "\"}");
}

/* Writes `{"$<name>": <string>}` where open is the literal `{"$<name>": `. */
static void put_wrapped_string(struct ejson_buf *buf, const char *open, const char *s, uint32_t n)
{
    put(buf, open, strlen(open));
    ejson_write_string(buf, s, n);
    PUT_LIT(buf, "}");
}

static void put_double(struct ejson_buf *buf, double v, enum ejson_mode mode)
{
    if (mode == EJSON_CANONICAL || (mode == EJSON_RELAXED && (v != v || v - v != 0))) {
        /* RelaxedExtendedJsonDoubleConverter falls back to the extended form
         * for NaN and the infinities; ExtendedJsonDoubleConverter always
         * writes it. */
        PUT_LIT(buf, "{\"$numberDouble\": \"");
        reserve(buf, 32);
        buf->len += ejson_java_double(v, buf->data + buf->len);
        PUT_LIT(buf, "\"}");
        return;
    }
    reserve(buf, 32);
    buf->len += ejson_java_double(v, buf->data + buf->len);
}

static void put_base64(struct ejson_buf *buf, const uint8_t *d, uint32_t n)
{
    reserve(buf, mcdc_base64_len(n));
    buf->len += mcdc_base64_encode_to(d, n, buf->data + buf->len);
}

static void put_oid(struct ejson_buf *buf, const bson_oid_t *oid)
{
    static const char hex[] = "0123456789abcdef";
    PUT_LIT(buf, "{\"$oid\": \"");
    reserve(buf, 24);
    char *p = buf->data + buf->len;
    for (int i = 0; i < 12; i++) {
        p[2 * i] = hex[oid->bytes[i] >> 4];
        p[2 * i + 1] = hex[oid->bytes[i] & 15];
    }
    buf->len += 24;
    PUT_LIT(buf, "\"}");
}

static void put_binary(struct ejson_buf *buf, bson_subtype_t subtype, const uint8_t *d, uint32_t n,
                       enum ejson_mode mode, enum ejson_separators sep)
{
    /* String.format("%02X", subtype): two uppercase hex digits. */
    static const char hexu[] = "0123456789ABCDEF";
    char st[2] = {hexu[(subtype >> 4) & 15], hexu[subtype & 15]};
    if (mode == EJSON_STRICT) {
        PUT_LIT(buf, "{\"$binary\": \"");
        put_base64(buf, d, n);
        PUT_LIT(buf, "\"");
        put_sep(buf, sep);
        PUT_LIT(buf, "\"$type\": \"");
    } else {
        PUT_LIT(buf, "{\"$binary\": {\"base64\": \"");
        put_base64(buf, d, n);
        PUT_LIT(buf, "\"");
        put_sep(buf, sep);
        PUT_LIT(buf, "\"subType\": \"");
    }
    put(buf, st, 2);
    if (mode == EJSON_STRICT) {
        PUT_LIT(buf, "\"}");
    } else {
        PUT_LIT(buf, "\"}}");
    }
}

/*
 * BsonRegularExpression sorts its options (Arrays.sort on the UTF-16 units of
 * the string). Options are ASCII in practice; a non-ASCII option string is
 * sorted by code point, which equals UTF-16 order except between
 * supplementary characters and U+E000..U+FFFF.
 */
static void put_regex_options(struct ejson_buf *buf, const char *opts)
{
    size_t n = strlen(opts);
    char small[32];
    bool ascii = true;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)opts[i] >= 0x80) {
            ascii = false;
            break;
        }
    }
    if (!ascii || n > sizeof small) {
        /* Rare: keep the driver's bytes order-insensitive only for ASCII. */
        ejson_write_string(buf, opts, n);
        return;
    }
    memcpy(small, opts, n);
    for (size_t i = 1; i < n; i++) { /* insertion sort: a handful of letters */
        char c = small[i];
        size_t j = i;
        while (j > 0 && (unsigned char)small[j - 1] > (unsigned char)c) {
            small[j] = small[j - 1];
            j--;
        }
        small[j] = c;
    }
    ejson_write_string(buf, small, n);
}

/*
 * RELAXED dates in range: ZonedDateTime.ofInstant(ms, UTC) formatted with
 * ISO_OFFSET_DATE_TIME: seconds always, a fraction only when non-zero and
 * without trailing zeros, then "Z". ms is in [0, 253402300799999].
 */
static void put_iso_date(struct ejson_buf *buf, int64_t ms)
{
    int64_t days = ms / 86400000;
    int64_t rem = ms % 86400000;
    int hh = (int)(rem / 3600000);
    int mi = (int)(rem / 60000 % 60);
    int ss = (int)(rem / 1000 % 60);
    int frac = (int)(rem % 1000);
    /* civil_from_days (Howard Hinnant's algorithm), days since 1970-01-01 */
    int64_t z = days + 719468;
    int64_t era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int d = (int)(doy - (153 * mp + 2) / 5 + 1);
    int m = (int)(mp < 10 ? mp + 3 : mp - 9);
    if (m <= 2) {
        y++;
    }
    reserve(buf, 40);
    char *p = buf->data + buf->len;
    int yy = (int)y;
    p[0] = (char)('0' + yy / 1000);
    p[1] = (char)('0' + yy / 100 % 10);
    p[2] = (char)('0' + yy / 10 % 10);
    p[3] = (char)('0' + yy % 10);
    p[4] = '-';
    p[5] = (char)('0' + m / 10);
    p[6] = (char)('0' + m % 10);
    p[7] = '-';
    p[8] = (char)('0' + d / 10);
    p[9] = (char)('0' + d % 10);
    p[10] = 'T';
    p[11] = (char)('0' + hh / 10);
    p[12] = (char)('0' + hh % 10);
    p[13] = ':';
    p[14] = (char)('0' + mi / 10);
    p[15] = (char)('0' + mi % 10);
    p[16] = ':';
    p[17] = (char)('0' + ss / 10);
    p[18] = (char)('0' + ss % 10);
    p += 19;
    if (frac) {
        *p++ = '.';
        *p++ = (char)('0' + frac / 100);
        if (frac % 100) {
            *p++ = (char)('0' + frac / 10 % 10);
            if (frac % 10) {
                *p++ = (char)('0' + frac % 10);
            }
        }
    }
    *p++ = 'Z';
    buf->len = (size_t)(p - buf->data);
}

static void put_date(struct ejson_buf *buf, int64_t ms, enum ejson_mode mode)
{
    if (mode == EJSON_STRICT) {
        /* LegacyExtendedJsonDateTimeConverter */
        PUT_LIT(buf, "{\"$date\": ");
        put_i64(buf, ms);
        PUT_LIT(buf, "}");
    } else if (mode == EJSON_RELAXED && ms >= 0 && ms <= INT64_C(253402300799999)) {
        PUT_LIT(buf, "{\"$date\": \"");
        put_iso_date(buf, ms);
        PUT_LIT(buf, "\"}");
    } else {
        PUT_LIT(buf, "{\"$date\": ");
        put_number_long(buf, ms);
        PUT_LIT(buf, "}");
    }
}

static void write_nested(struct ejson_buf *buf, const bson_iter_t *iter, bool array,
                         enum ejson_mode mode, enum ejson_separators sep)
{
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (array) {
        bson_iter_array(iter, &len, &data);
    } else {
        bson_iter_document(iter, &len, &data);
    }
    ejson_write_members(buf, data, len, array, mode, sep);
}

void ejson_write_value(struct ejson_buf *buf, const bson_iter_t *iter, enum ejson_mode mode,
                       enum ejson_separators sep)
{
    switch (bson_iter_type_unsafe(iter)) {
    case BSON_TYPE_DOUBLE:
        put_double(buf, bson_iter_double_unsafe(iter), mode);
        break;
    case BSON_TYPE_UTF8: {
        uint32_t n;
        const char *s = bson_iter_utf8(iter, &n);
        ejson_write_string(buf, s, n);
        break;
    }
    case BSON_TYPE_DOCUMENT:
        write_nested(buf, iter, false, mode, sep);
        break;
    case BSON_TYPE_ARRAY:
        write_nested(buf, iter, true, mode, sep);
        break;
    case BSON_TYPE_BINARY: {
        bson_subtype_t st;
        uint32_t n;
        const uint8_t *d;
        bson_iter_binary(iter, &st, &n, &d);
        put_binary(buf, st, d, n, mode, sep);
        break;
    }
    case BSON_TYPE_UNDEFINED:
        PUT_LIT(buf, "{\"$undefined\": true}");
        break;
    case BSON_TYPE_OID:
        put_oid(buf, bson_iter_oid(iter));
        break;
    case BSON_TYPE_BOOL:
        if (bson_iter_bool_unsafe(iter)) {
            PUT_LIT(buf, "true");
        } else {
            PUT_LIT(buf, "false");
        }
        break;
    case BSON_TYPE_DATE_TIME:
        put_date(buf, bson_iter_date_time(iter), mode);
        break;
    case BSON_TYPE_NULL:
        PUT_LIT(buf, "null");
        break;
    case BSON_TYPE_REGEX: {
        const char *opts;
        const char *re = bson_iter_regex(iter, &opts);
        if (mode == EJSON_STRICT) {
            PUT_LIT(buf, "{\"$regex\": ");
            ejson_write_string(buf, re, strlen(re));
            put_sep(buf, sep);
            PUT_LIT(buf, "\"$options\": ");
            put_regex_options(buf, opts);
            PUT_LIT(buf, "}");
        } else {
            PUT_LIT(buf, "{\"$regularExpression\": {\"pattern\": ");
            ejson_write_string(buf, re, strlen(re));
            put_sep(buf, sep);
            PUT_LIT(buf, "\"options\": ");
            put_regex_options(buf, opts);
            PUT_LIT(buf, "}}");
        }
        break;
    }
    case BSON_TYPE_DBPOINTER: {
        uint32_t n;
        const char *ns;
        const bson_oid_t *oid;
        bson_iter_dbpointer(iter, &n, &ns, &oid);
        if (mode == EJSON_CANONICAL) {
            /* ExtendedJsonDBPointerConverter (the other modes write the
             * legacy DBRef shape, which parses back as a document). */
            PUT_LIT(buf, "{\"$dbPointer\": {\"$ref\": ");
            ejson_write_string(buf, ns, n);
            put_sep(buf, sep);
            PUT_LIT(buf, "\"$id\": ");
            put_oid(buf, oid);
            PUT_LIT(buf, "}}");
            break;
        }
        PUT_LIT(buf, "{\"$ref\": ");
        ejson_write_string(buf, ns, n);
        put_sep(buf, sep);
        PUT_LIT(buf, "\"$id\": ");
        put_oid(buf, oid);
        PUT_LIT(buf, "}");
        break;
    }
    case BSON_TYPE_CODE: {
        uint32_t n;
        const char *code = bson_iter_code(iter, &n);
        put_wrapped_string(buf, "{\"$code\": ", code, n);
        break;
    }
    case BSON_TYPE_SYMBOL: {
        uint32_t n;
        const char *sym = bson_iter_symbol(iter, &n);
        put_wrapped_string(buf, "{\"$symbol\": ", sym, n);
        break;
    }
    case BSON_TYPE_CODEWSCOPE: {
        uint32_t n, scope_len;
        const uint8_t *scope_data;
        const char *code = bson_iter_codewscope(iter, &n, &scope_len, &scope_data);
        PUT_LIT(buf, "{\"$code\": ");
        ejson_write_string(buf, code, n);
        put_sep(buf, sep);
        PUT_LIT(buf, "\"$scope\": ");
        ejson_write_members(buf, scope_data, scope_len, false, mode, sep);
        PUT_LIT(buf, "}");
        break;
    }
    case BSON_TYPE_INT32: {
        if (mode == EJSON_CANONICAL) {
            PUT_LIT(buf, "{\"$numberInt\": \"");
            put_i64(buf, bson_iter_int32_unsafe(iter));
            PUT_LIT(buf, "\"}");
        } else {
            put_i64(buf, bson_iter_int32_unsafe(iter));
        }
        break;
    }
    case BSON_TYPE_TIMESTAMP: {
        uint32_t t, i;
        bson_iter_timestamp(iter, &t, &i);
        PUT_LIT(buf, "{\"$timestamp\": {\"t\": ");
        put_i64(buf, t);
        put_sep(buf, sep);
        PUT_LIT(buf, "\"i\": ");
        put_i64(buf, i);
        PUT_LIT(buf, "}}");
        break;
    }
    case BSON_TYPE_INT64: {
        int64_t v = bson_iter_int64_unsafe(iter);
        if (mode != EJSON_RELAXED) {
            put_number_long(buf, v);
        } else {
            put_i64(buf, v);
        }
        break;
    }
    case BSON_TYPE_DECIMAL128: {
        bson_decimal128_t dec;
        bson_iter_decimal128(iter, &dec);
        PUT_LIT(buf, "{\"$numberDecimal\": \"");
        reserve(buf, 48);
        buf->len += ejson_decimal128_string(&dec, buf->data + buf->len);
        PUT_LIT(buf, "\"}");
        break;
    }
    case BSON_TYPE_MAXKEY:
        PUT_LIT(buf, "{\"$maxKey\": 1}");
        break;
    case BSON_TYPE_MINKEY:
        PUT_LIT(buf, "{\"$minKey\": 1}");
        break;
    case BSON_TYPE_EOD:
    default:
        /* An unknown type byte: bson_iter_next stops before it, so this
         * only happens for a caller-built iterator. */
        PUT_LIT(buf, "null");
        break;
    }
}
