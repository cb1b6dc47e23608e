/* Unit tests for common: error, log, xalloc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(error_set_formats_and_returns_false),
        cmocka_unit_test(error_truncates_long_messages),
        cmocka_unit_test(unauthorized_is_shortened),
        cmocka_unit_test(log_writes_json_lines_with_component),
        cmocka_unit_test(log_level_parse_accepts_names),
        cmocka_unit_test(xasprintf_formats),
    };
    return cmocka_run_group_tests_name("common", tests, NULL, NULL);
}
