/* Unit tests for offsets/dbzfile: Kafka Connect's FileOffsetBackingStore file
 * (the offsets file of Debezium Server and the embedded engine). The fixtures
 * in tests/fixtures/dbz-offsets were written by Kafka 4.3's
 * FileOffsetBackingStore itself (tests/debezium OffsetFile write):
 *   one-3x.dat    one 3.x partition
 *   three-19.dat  two 1.9 partitions (one with initsync) and a null value
 *   twenty.dat    twenty partitions (HashMap resized twice) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/xalloc.h"
#include "offsets/dbzfile.h"

#define KEY_3X "[\"inventory-connector\",{\"server_id\":\"dbserver1\"}]"
#define VALUE_3X "{\"sec\":1700000000,\"ord\":3,\"resume_token\":\"gQAAAAJfZGF0YQ==\"}"

static char *fixture_path(const char *name)
{
    const char *src = getenv("MCDC_SOURCE_DIR");
    return xasprintf("%s/tests/fixtures/dbz-offsets/%s", src ? src : ".", name);
}

static uint8_t *slurp(const char *name, size_t *len)
{
    char *path = fixture_path(name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *buf = xmalloc(1 << 16);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    free(path);
    return buf;
}

static void expect_entry(const struct dbz_offsets *m, const char *key, const char *value)
{
    const struct dbz_offset_entry *e = dbz_offsets_find(m, key, strlen(key));
    assert_non_null(e);
    if (!value) {
        assert_null(e->value);
        return;
    }
    assert_non_null(e->value);
    assert_int_equal(e->value_len, strlen(value));
    assert_memory_equal(e->value, value, strlen(value));
}

static void reads_one_entry_written_by_kafka(void **state)
{
    (void)state;
    struct dbz_offsets m = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    char *path = fixture_path("one-3x.dat");
    bool exists;
    assert_true(dbzfile_read(path, &m, &exists, &err));
    assert_true(exists);
    assert_int_equal(m.count, 1);
    expect_entry(&m, KEY_3X, VALUE_3X);
    dbz_offsets_free(&m);
    free(path);
}

static void reads_references_and_null_values(void **state)
{
    (void)state;
    struct dbz_offsets m = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    size_t len;
    uint8_t *data = slurp("three-19.dat", &len);
    assert_true(dbzfile_parse(data, len, &m, &err));
    assert_int_equal(m.count, 3);
    expect_entry(&m, "[\"inventory-connector\",{\"rs\":\"rs0\",\"server_id\":\"dbserver1\"}]",
                 "{\"sec\":1700000000,\"ord\":3,\"h\":null,\"resume_token\":"
                 "\"82655B1C00000000032B022C0100296E5A1004\"}");
    expect_entry(&m, "[\"inventory-connector\",{\"rs\":\"shard1\",\"server_id\":\"dbserver1\"}]",
                 "{\"sec\":1700000001,\"ord\":1,\"h\":null,\"initsync\":true}");
    expect_entry(&m, "[\"other\",{\"server_id\":\"x\"}]", NULL);
    dbz_offsets_free(&m);
    free(data);
}

/* One entry: the order of a HashMap is not an issue, so the whole file must
 * be the bytes FileOffsetBackingStore wrote. */
static void writes_the_bytes_kafka_writes(void **state)
{
    (void)state;
    size_t len, out_len;
    uint8_t *java = slurp("one-3x.dat", &len);
    struct dbz_offsets m = {0};
    dbz_offsets_put(&m, KEY_3X, strlen(KEY_3X), VALUE_3X, strlen(VALUE_3X));
    uint8_t *out;
    dbzfile_serialize(&m, &out, &out_len);
    assert_int_equal(out_len, len);
    assert_memory_equal(out, java, len);
    free(out);
    free(java);
    dbz_offsets_free(&m);
}

/* Twenty entries: Java's header (threshold 24 of 32 buckets after two
 * resizes) is reproduced, and the entries read back whatever their order. */
static void twenty_entries_header_and_round_trip(void **state)
{
    (void)state;
    size_t len, out_len;
    uint8_t *java = slurp("twenty.dat", &len);
    struct dbz_offsets m = {0}, back = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(dbzfile_parse(java, len, &m, &err));
    assert_int_equal(m.count, 20);
    expect_entry(&m, "[\"c7\",{\"server_id\":\"p\"}]", "{\"sec\":1700000007,\"ord\":1}");
    uint8_t *out;
    dbzfile_serialize(&m, &out, &out_len);
    assert_int_equal(out_len, len);
    /* magic .. the block with buckets and size: 0x51 bytes */
    assert_memory_equal(out, java, 0x51);
    assert_true(dbzfile_parse(out, out_len, &back, &err));
    assert_int_equal(back.count, 20);
    for (size_t i = 0; i < m.count; i++) {
        const struct dbz_offset_entry *e =
            dbz_offsets_find(&back, m.items[i].key, m.items[i].key_len);
        assert_non_null(e);
        assert_int_equal(e->value_len, m.items[i].value_len);
        assert_memory_equal(e->value, m.items[i].value, e->value_len);
    }
    free(out);
    free(java);
    dbz_offsets_free(&m);
    dbz_offsets_free(&back);
}

static void empty_map_round_trips(void **state)
{
    (void)state;
    struct dbz_offsets m = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    uint8_t *out;
    size_t len;
    dbzfile_serialize(&m, &out, &len);
    assert_true(dbzfile_parse(out, len, &m, &err));
    assert_int_equal(m.count, 0);
    free(out);
}

/* Every truncation and a flipped byte in each structural position is an
 * error naming the file format, never a crash or a partial map. */
static void damaged_files_are_refused(void **state)
{
    (void)state;
    size_t len;
    uint8_t *java = slurp("three-19.dat", &len);
    struct mcdc_error err = MCDC_ERROR_INIT;
    for (size_t cut = 0; cut < len; cut++) {
        struct dbz_offsets m = {0};
        assert_false(dbzfile_parse(java, cut, &m, &err));
        assert_int_equal(m.count, 0);
        assert_non_null(strstr(err.msg, "FileOffsetBackingStore"));
    }
    uint8_t *longer = xmalloc(len + 1);
    memcpy(longer, java, len);
    longer[len] = 0x78;
    struct dbz_offsets m = {0};
    assert_false(dbzfile_parse(longer, len + 1, &m, &err));
    assert_non_null(strstr(err.msg, "after the map"));
    /* another class name: "java.util.HashMap" -> "java.util.HashMaq" */
    memcpy(longer, java, len);
    longer[8 + 16] = 'q';
    assert_false(dbzfile_parse(longer, len, &m, &err));
    /* a text file is not one either */
    assert_false(dbzfile_parse((const uint8_t *)"{\"a\":1}", 7, &m, &err));
    assert_non_null(strstr(err.msg, "0xACED"));
    free(longer);
    free(java);
}

static void put_replaces_and_write_is_atomic(void **state)
{
    (void)state;
    char dir[] = "/tmp/mcdc-dbzfile-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = xasprintf("%s/offsets.dat", dir);
    struct dbz_offsets m = {0}, back = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool exists;
    assert_true(dbzfile_read(path, &m, &exists, &err));
    assert_false(exists);
    dbz_offsets_put(&m, "k", 1, "v1", 2);
    dbz_offsets_put(&m, "k", 1, "v2", 2);
    dbz_offsets_put(&m, "n", 1, NULL, 0);
    assert_int_equal(m.count, 2);
    dbz_offsets_put(&m, "gone", 4, "x", 1);
    dbz_offsets_remove(&m, "gone", 4);
    dbz_offsets_remove(&m, "absent", 6);
    assert_int_equal(m.count, 2);
    assert_true(dbzfile_write(path, &m, &err));
    assert_true(dbzfile_read(path, &back, &exists, &err));
    assert_true(exists);
    expect_entry(&back, "k", "v2");
    expect_entry(&back, "n", NULL);
    char *tmp = xasprintf("%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0);
    unlink(path);
    rmdir(dir);
    free(tmp);
    free(path);
    dbz_offsets_free(&m);
    dbz_offsets_free(&back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_one_entry_written_by_kafka),
        cmocka_unit_test(reads_references_and_null_values),
        cmocka_unit_test(writes_the_bytes_kafka_writes),
        cmocka_unit_test(twenty_entries_header_and_round_trip),
        cmocka_unit_test(empty_map_round_trips),
        cmocka_unit_test(damaged_files_are_refused),
        cmocka_unit_test(put_replaces_and_write_is_atomic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
