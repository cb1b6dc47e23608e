/* Unit tests for common: error, log, xalloc, clock, base64, jsonesc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/jsonesc.h"
#include "common/log.h"
#include "common/xalloc.h"

static void error_set_formats_and_returns_false(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_false(mcdc_error_set(&err, MCDC_ERR_IO, 2, "open %s failed", "x"));
    assert_int_equal(err.domain, MCDC_ERR_IO);
    assert_int_equal(err.code, 2);
    assert_false(err.retriable);
    assert_string_equal(err.msg, "open x failed");
    mcdc_error_prefix(&err, "rs%d", 0);
    assert_string_equal(err.msg, "rs0: open x failed");
    assert_false(mcdc_error_set_retriable(&err, MCDC_ERR_KAFKA, -1, "down"));
    assert_true(err.retriable);
    assert_string_equal(mcdc_err_domain_name(MCDC_ERR_KAFKA), "kafka");
}

static void error_truncates_long_messages(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    char big[1000];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mcdc_error_set(&err, MCDC_ERR_CONFIG, 0, "%s", big);
    assert_int_equal(strlen(err.msg), MCDC_ERROR_MSG_SIZE - 1);
}

static void unauthorized_is_shortened(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    const char *srv = "not authorized on admin to execute command { aggregate: 1, pipeline: [ { "
                      "$changeStream: { allChangesForCluster: true } } ], cursor: {}, lsid: { id: "
                      "UUID(\"2a08295e-c423-4685-9e4c-591b725ef39e\") }, $db: \"admin\" }";

    assert_false(mcdc_error_from_bson(&err, 13, srv, false));
    assert_int_equal(err.domain, MCDC_ERR_MONGO);
    assert_int_equal(err.code, 13);
    assert_string_equal(err.msg, "not authorized on admin to execute command aggregate (error 13 "
                                 "Unauthorized: the user lacks a privilege; `mongocdc check -c "
                                 "FILE` names it)");
    /* Other codes, and 13 with another text, are kept as they are. */
    assert_false(mcdc_error_from_bson(&err, 8000, srv, false));
    assert_memory_equal(err.msg, srv, 40);
    assert_false(mcdc_error_from_bson(&err, 13, "command find requires authentication", false));
    assert_string_equal(err.msg, "command find requires authentication");
}

static void log_writes_json_lines_with_component(void **state)
{
    (void)state;
    char path[] = "/tmp/mcdc-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(mcdc_log_open(MCDC_LOG_INFO, MCDC_LOG_FORMAT_JSON, path, &err));
    mcdc_log_set_component("rs0");
    LOG_INFO("hello \"%s\"\nline2\n", "world");
    LOG_DEBUG("not written");
    mcdc_log_close();
    FILE *f = fopen(path, "r");
    char line[512] = {0};
    assert_non_null(fgets(line, sizeof line, f));
    assert_non_null(strstr(line, "\"level\":\"info\",\"component\":\"rs0\","
                                 "\"msg\":\"hello \\\"world\\\"\\nline2\"}"));
    assert_null(fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
    mcdc_log_set_component(NULL);
}

static void log_level_parse_accepts_names(void **state)
{
    (void)state;
    enum mcdc_log_level lvl;
    assert_true(mcdc_log_level_parse("DEBUG", &lvl));
    assert_int_equal(lvl, MCDC_LOG_DEBUG);
    assert_true(mcdc_log_level_parse("warning", &lvl));
    assert_int_equal(lvl, MCDC_LOG_WARN);
    assert_false(mcdc_log_level_parse("loud", &lvl));
}

static void xasprintf_formats(void **state)
{
    (void)state;
    char *s = xasprintf("%s.%d", "a", 7);
    assert_string_equal(s, "a.7");
    free(s);
    s = xstrndup("abcdef", 3);
    assert_string_equal(s, "abc");
    free(s);
}

static void clock_deadline_is_normalised(void **state)
{
    (void)state;
    struct timespec before;
    clock_gettime(CLOCK_MONOTONIC, &before);
    struct timespec d = mcdc_clock_deadline(CLOCK_MONOTONIC, 1999);
    assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
    int64_t diff_ms = ((int64_t)d.tv_sec - before.tv_sec) * 1000 +
                      ((int64_t)d.tv_nsec - before.tv_nsec) / 1000000;
    assert_true(diff_ms >= 1999 && diff_ms < 1999 + 1000);
    int64_t a = mcdc_clock_mono_ms(), b = mcdc_clock_mono_ms();
    assert_true(b >= a);
    assert_true(mcdc_clock_mono_ns() / 1000000 >= a);
    int64_t w = mcdc_clock_wall_ms();
    assert_true(w > INT64_C(1600000000000));
    assert_true(mcdc_clock_wall_us() / 1000 >= w);
}

/* RFC 4648 §10 test vectors, both ways. */
static void base64_matches_rfc4648(void **state)
{
    (void)state;
    static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
                                        "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < 7; i++) {
        size_t n = strlen(plain[i]);
        char *e = mcdc_base64_encode((const uint8_t *)plain[i], n);
        assert_string_equal(e, coded[i]);
        assert_int_equal(strlen(e), mcdc_base64_len(n));
        uint8_t *d = NULL;
        size_t dn = 0;
        assert_true(mcdc_base64_decode(e, strlen(e), &d, &dn));
        assert_int_equal(dn, n);
        assert_memory_equal(d, plain[i], n);
        free(d);
        free(e);
    }
    uint8_t *d = NULL;
    size_t dn = 0;
    assert_false(mcdc_base64_decode("Zm9v!", 5, &d, &dn));
    assert_false(mcdc_base64_decode("Z", 1, &d, &dn));
}

static void jsonesc_dialects(void **state)
{
    (void)state;
    const char in[] = "a\"b\\c\n\t\r\x01\x1f\x7f\xc3\xa9";
    char out[128];
    size_t n = mcdc_json_escape(MCDC_JSON_MINIMAL, out, sizeof out, in, sizeof in - 1, NULL);
    assert_int_equal(n, strlen("a\\\"b\\\\c\\u000a\\u0009\\u000d\\u0001\\u001f\x7f\xc3\xa9"));
    assert_memory_equal(out, "a\\\"b\\\\c\\u000a\\u0009\\u000d\\u0001\\u001f\x7f\xc3\xa9", n);
    n = mcdc_json_escape(MCDC_JSON_LOG, out, sizeof out, in, sizeof in - 1, NULL);
    assert_int_equal(n, strlen("a\\\"b\\\\c\\n\\t\\r\\u0001\\u001f\x7f\xc3\xa9"));
    assert_memory_equal(out, "a\\\"b\\\\c\\n\\t\\r\\u0001\\u001f\x7f\xc3\xa9", n);
    /* Whole escapes only: "ab" fits in 3 bytes, the \u0001 after it does not. */
    size_t used = 0;
    n = mcdc_json_escape(MCDC_JSON_MINIMAL, out, 3, "ab\x01", 3, &used);
    assert_int_equal(n, 2);
    assert_int_equal(used, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_set_formats_and_returns_false),
        cmocka_unit_test(error_truncates_long_messages),
        cmocka_unit_test(unauthorized_is_shortened),
        cmocka_unit_test(log_writes_json_lines_with_component),
        cmocka_unit_test(log_level_parse_accepts_names),
        cmocka_unit_test(xasprintf_formats),
        cmocka_unit_test(clock_deadline_is_normalised),
        cmocka_unit_test(base64_matches_rfc4648),
        cmocka_unit_test(jsonesc_dialects),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
