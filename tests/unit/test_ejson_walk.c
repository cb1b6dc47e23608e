/*
 * The extended-JSON writer's own walk over BSON (src/encode/ejson_doc.c) and
 * its cache of the last document's member names, against libbson and
 * against a writer without history:
 *
 *  - a mutated document is written exactly as the document rebuilt from the
 *    elements bson_iter_next accepts in it (so the walk stops where libbson
 *    stops, and reads each element as libbson does);
 *  - a sequence of documents written into one reused buffer (the names of
 *    one document are compared with those of the last) gives the bytes each
 *    gives into a fresh buffer, including documents that repeat a name
 *    after a matching prefix (debezium-format.md §2: documents are maps).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bson/bson.h>

#include "encode/ejson.h"

static const enum ejson_mode modes[] = {EJSON_STRICT, EJSON_RELAXED, EJSON_CANONICAL};

/* doc written into a fresh buffer, as a NUL-terminated malloc'd string. */
static char *fresh(const bson_t *doc, enum ejson_mode mode)
{
    struct ejson_buf buf = {0};
    ejson_write_document(&buf, doc, mode, EJSON_SEP_COMPACT);
    char *s = ejson_buf_steal(&buf, NULL);
    ejson_buf_free(&buf);
    return s;
}

/* doc written into the shared buffer (after whatever it wrote before)
 * equals doc written into a fresh one. */
static void check_reused(struct ejson_buf *shared, const bson_t *doc, enum ejson_mode mode)
{
    char *want = fresh(doc, mode);
    ejson_buf_reset(shared);
    ejson_write_document(shared, doc, mode, EJSON_SEP_COMPACT);
    ejson_buf_append(shared, "", 1);
    assert_string_equal(shared->data, want);
    free(want);
}

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Seed documents with every BSON type, names of 0..20 bytes and names that
 * need escapes, nested documents and arrays. */
static bson_t *seed(int which)
{
    bson_t *doc = bson_new();
    bson_t sub, arr, *sub_scope;
    bson_oid_t oid;
    bson_decimal128_t dec;
    uint8_t bin[6] = {1, 2, 3, 4, 5, 6};
    bson_oid_init_from_string(&oid, "5f43a1b2c3d4e5f601234567");
    bson_decimal128_from_string("1.25E-3", &dec);
    switch (which) {
    case 0:
        BSON_APPEND_INT64(doc, "_id", 7);
        BSON_APPEND_DOUBLE(doc, "price", 12.5);
        BSON_APPEND_INT32(doc, "qty", -3);
        BSON_APPEND_BOOL(doc, "ok", true);
        BSON_APPEND_NULL(doc, "");
        BSON_APPEND_UTF8(doc, "a name of twenty b", "text \"quoted\" \xc3\xa9");
        BSON_APPEND_DATE_TIME(doc, "when", 1694627139123);
        BSON_APPEND_OID(doc, "eight_ch", &oid);
        BSON_APPEND_DOUBLE(doc, "v", 1.0 / 3.0);
        BSON_APPEND_INT64(doc, "l", INT64_MIN);
        break;
    case 1:
        BSON_APPEND_OID(doc, "_id", &oid);
        BSON_APPEND_DOCUMENT_BEGIN(doc, "addr", &sub);
        BSON_APPEND_UTF8(&sub, "city", "Lyon");
        BSON_APPEND_INT32(&sub, "zip", 69001);
        BSON_APPEND_INT32(&sub, "zip", 69002);
        bson_append_document_end(doc, &sub);
        BSON_APPEND_ARRAY_BEGIN(doc, "tags", &arr);
        BSON_APPEND_UTF8(&arr, "0", "x");
        BSON_APPEND_DOUBLE(&arr, "1", -0.0);
        BSON_APPEND_BOOL(&arr, "2", false);
        bson_append_array_end(doc, &arr);
        BSON_APPEND_BINARY(doc, "bin", BSON_SUBTYPE_BINARY, bin, sizeof bin);
        BSON_APPEND_TIMESTAMP(doc, "ts", 1700000000, 3);
        BSON_APPEND_DECIMAL128(doc, "dec", &dec);
        BSON_APPEND_CODE(doc, "code", "function(){}");
        BSON_APPEND_SYMBOL(doc, "sym", "s");
        BSON_APPEND_UNDEFINED(doc, "u");
        BSON_APPEND_MINKEY(doc, "min");
        BSON_APPEND_MAXKEY(doc, "max");
        break;
    default:
        BSON_APPEND_INT32(doc, "q\"uote", 1);
        BSON_APPEND_INT32(doc, "back\\slash", 2);
        BSON_APPEND_INT32(doc, "tab\there", 3);
        BSON_APPEND_INT32(doc, "caf\xc3\xa9", 4);
        BSON_APPEND_DOUBLE(doc, "fifteen_bytes__", 1e300);
        BSON_APPEND_DOUBLE(doc, "sixteen_bytes___", -1e-300);
        BSON_APPEND_DBPOINTER(doc, "ptr", "db.coll", &oid);
        sub_scope = BCON_NEW("x", BCON_INT32(1), "x", BCON_UTF8("y"));
        BSON_APPEND_CODE_WITH_SCOPE(doc, "cws", "f()", sub_scope);
        bson_destroy(sub_scope);
        BSON_APPEND_INT32(doc, "caf\xc3\xa9", 5);
        break;
    }
    return doc;
}

/* /ejson/walk/stops_where_libbson_stops */
static void test_mutated(void **state)
{
    (void)state;
    struct ejson_buf shared = {0};
    int compared = 0;
    for (int round = 0; round < 30000; round++) {
        bson_t *base = seed(round % 3);
        uint32_t len = base->len;
        uint8_t *bytes = bson_malloc(len);
        memcpy(bytes, bson_get_data(base), len);
        int flips = 1 + (int)(rnd() % 3);
        for (int f = 0; f < flips; f++) {
            /* not the length prefix or the last byte: a document libbson
             * refuses outright is not this test's subject */
            uint32_t at = 4 + (uint32_t)(rnd() % (len - 5));
            uint64_t r = rnd();
            bytes[at] = (r & 1) ? (uint8_t)(r >> 8) : (uint8_t)(bytes[at] ^ (1u << (r >> 8) % 8));
        }
        bson_t doc;
        assert_true(bson_init_static(&doc, bytes, len));
        /* the reference: what libbson's iterator accepts, copied */
        bson_t *ref = bson_new();
        bson_iter_t it;
        bool copied = bson_iter_init(&it, &doc);
        while (copied && bson_iter_next(&it)) {
            /* libbson re-encodes these from C strings (a regex's unknown
             * options dropped, a code or collection name cut at a NUL), so
             * a mutated one would not copy as it is */
            bson_type_t t = bson_iter_type(&it);
            copied = t != BSON_TYPE_REGEX && t != BSON_TYPE_CODEWSCOPE &&
                     t != BSON_TYPE_DBPOINTER && bson_append_iter(ref, NULL, 0, &it);
        }
        if (copied) {
            enum ejson_mode mode = modes[round % 3];
            char *want = fresh(ref, mode);
            char *got = fresh(&doc, mode);
            assert_string_equal(got, want);
            free(got);
            free(want);
            check_reused(&shared, &doc, mode);
            compared++;
        }
        bson_destroy(ref);
        bson_free(bytes);
        bson_destroy(base);
    }
    /* most mutations leave something libbson can copy */
    assert_true(compared > 15000);
    ejson_buf_free(&shared);
}

/* A document of count names "f<i>" (i from first), int32 values; names in
 * repeat[] (indexes, -1 ends) are appended again at the end. */
static bson_t *numbered(int first, int count, const int *repeat)
{
    bson_t *doc = bson_new();
    char key[24];
    for (int i = 0; i < count; i++) {
        snprintf(key, sizeof key, "f%d", first + i);
        BSON_APPEND_INT32(doc, key, i);
    }
    for (; repeat && *repeat >= 0; repeat++) {
        snprintf(key, sizeof key, "f%d", first + *repeat);
        BSON_APPEND_INT32(doc, key, 100 + *repeat);
    }
    return doc;
}

/* /ejson/walk/name_cache_changes_no_byte */
static void test_name_cache(void **state)
{
    (void)state;
    static const int rep_first[] = {0, -1}, rep_last[] = {9, -1}, none[] = {-1};
    struct {
        int first, count;
        const int *repeat;
    } seq[] = {
        {0, 10, none},      /* fills the cache */
        {0, 10, none},      /* all names match */
        {0, 10, rep_first}, /* matches, then repeats the first name */
        {0, 10, none},      /* the cache holds the names before the repeat */
        {0, 5, none},       /* a prefix */
        {0, 12, none},      /* longer */
        {0, 12, rep_last},  /* repeats a name that the cache holds */
        {3, 10, none},      /* differs from the first name */
        {0, 5000, none},    /* more names than the cache keeps (4096) */
        {0, 5000, rep_last}, {0, 0, none}, {0, 3, none},
    };
    struct ejson_buf shared = {0};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
        for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
            bson_t *doc = numbered(seq[i].first, seq[i].count, seq[i].repeat);
            check_reused(&shared, doc, modes[m]);
            bson_destroy(doc);
        }
        for (int s = 0; s < 3; s++) {
            bson_t *doc = seed(s);
            check_reused(&shared, doc, modes[m]);
            check_reused(&shared, doc, modes[m]);
            bson_destroy(doc);
        }
    }
    ejson_buf_free(&shared);

    /* the repeat found after a matching prefix: first position, last value */
    struct ejson_buf buf = {0};
    bson_t *a = BCON_NEW("x", BCON_INT32(1), "y", BCON_INT32(2), "z", BCON_INT32(3));
    bson_t *b = BCON_NEW("x", BCON_INT32(1), "y", BCON_INT32(2), "x", BCON_INT32(9));
    ejson_write_document(&buf, a, EJSON_RELAXED, EJSON_SEP_COMPACT);
    ejson_buf_reset(&buf);
    ejson_write_document(&buf, b, EJSON_RELAXED, EJSON_SEP_COMPACT);
    ejson_buf_append(&buf, "", 1);
    assert_string_equal(buf.data, "{\"x\": 9,\"y\": 2}");
    ejson_buf_free(&buf);
    bson_destroy(a);
    bson_destroy(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mutated),
        cmocka_unit_test(test_name_cache),
    };
    return cmocka_run_group_tests_name("ejson_walk", tests, NULL, NULL);
}
