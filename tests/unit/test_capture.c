/*
 * Unit tests for capture/resume: the start point, the snapshot plan per
 * snapshot.mode, the classification of server replies, backoff delays and
 * resume-token times. Tables of inputs with the expected decision.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "capture/resume.h"

/* A position without calling the offsets module: only the fields resume.c reads. */
static void pos_blank(struct mcdc_position *p)
{
    memset(p, 0, sizeof *p);
    bson_init(&p->resume_token);
    p->sec = -1;
    p->ord = -1;
}

static void start_point_prefers_token_then_optime_then_config(void **state)
{
    (void)state;
    struct mcdc_position p;
    struct resume_start s;

    resume_start_point(NULL, -1, &s);
    assert_int_equal(s.kind, RESUME_START_NOW);

    pos_blank(&p);
    resume_start_point(&p, -1, &s);
    assert_int_equal(s.kind, RESUME_START_NOW);

    /* capture.start.op.time: a BSON timestamp value (seconds << 32 | inc) */
    resume_start_point(&p, ((int64_t)1700000000 << 32) | 7, &s);
    assert_int_equal(s.kind, RESUME_START_AT_OPTIME);
    assert_int_equal(s.sec, 1700000000u);
    assert_int_equal(s.ord, 7u);

    p.sec = 1700000100;
    p.ord = 3;
    resume_start_point(&p, ((int64_t)1700000000 << 32) | 7, &s);
    assert_int_equal(s.kind, RESUME_START_AT_OPTIME);
    assert_int_equal(s.sec, 1700000100u);
    assert_int_equal(s.ord, 3u);

    BSON_APPEND_UTF8(&p.resume_token, "_data", "826553F100000000012B0229296E04");
    p.has_resume_token = true;
    resume_start_point(&p, -1, &s);
    assert_int_equal(s.kind, RESUME_START_AFTER_TOKEN);
    assert_ptr_equal(s.token, &p.resume_token);

    /* a position from a token only (sec -1) still resumes after the token */
    p.sec = -1;
    p.ord = -1;
    resume_start_point(&p, -1, &s);
    assert_int_equal(s.kind, RESUME_START_AFTER_TOKEN);
    bson_destroy(&p.resume_token);
}

static void plan_follows_snapshot_mode(void **state)
{
    (void)state;
    struct mcdc_position done, interrupted;
    bool warn;
    static const struct {
        enum mcdc_snapshot_mode mode;
        enum resume_plan none, complete, initsync;
        bool warn_initsync;
    } rows[] = {
        {MCDC_SNAPSHOT_INITIAL, RESUME_PLAN_SNAPSHOT_THEN_STREAM, RESUME_PLAN_STREAM,
         RESUME_PLAN_SNAPSHOT_THEN_STREAM, false},
        {MCDC_SNAPSHOT_WHEN_NEEDED, RESUME_PLAN_SNAPSHOT_THEN_STREAM, RESUME_PLAN_STREAM,
         RESUME_PLAN_SNAPSHOT_THEN_STREAM, false},
        {MCDC_SNAPSHOT_ALWAYS, RESUME_PLAN_SNAPSHOT_THEN_STREAM, RESUME_PLAN_SNAPSHOT_THEN_STREAM,
         RESUME_PLAN_SNAPSHOT_THEN_STREAM, false},
        {MCDC_SNAPSHOT_INITIAL_ONLY, RESUME_PLAN_SNAPSHOT_ONLY, RESUME_PLAN_NOTHING,
         RESUME_PLAN_SNAPSHOT_ONLY, false},
        {MCDC_SNAPSHOT_NEVER, RESUME_PLAN_STREAM, RESUME_PLAN_STREAM, RESUME_PLAN_STREAM, true},
        {MCDC_SNAPSHOT_NO_DATA, RESUME_PLAN_STREAM, RESUME_PLAN_STREAM, RESUME_PLAN_STREAM, true},
    };

    pos_blank(&done);
    done.sec = 1700000000;
    done.ord = 1;
    pos_blank(&interrupted);
    interrupted.sec = 1700000000;
    interrupted.ord = 1;
    interrupted.initsync = true;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        assert_int_equal(resume_plan_start(rows[i].mode, false, NULL, &warn), rows[i].none);
        assert_false(warn);
        assert_int_equal(resume_plan_start(rows[i].mode, true, &done, &warn), rows[i].complete);
        assert_false(warn);
        assert_int_equal(resume_plan_start(rows[i].mode, true, &interrupted, &warn),
                         rows[i].initsync);
        assert_int_equal(warn, rows[i].warn_initsync);
    }

    assert_true(resume_resnapshot_on_history_lost(MCDC_SNAPSHOT_INITIAL));
    assert_true(resume_resnapshot_on_history_lost(MCDC_SNAPSHOT_WHEN_NEEDED));
    assert_true(resume_resnapshot_on_history_lost(MCDC_SNAPSHOT_ALWAYS));
    assert_false(resume_resnapshot_on_history_lost(MCDC_SNAPSHOT_NEVER));
    assert_false(resume_resnapshot_on_history_lost(MCDC_SNAPSHOT_NO_DATA));
    assert_false(resume_resnapshot_on_history_lost(MCDC_SNAPSHOT_INITIAL_ONLY));
}

/* Server replies (mongo-sim-spec.md §3.12, §4.1-4.5) and the decision expected. */
static void classify_table(void **state)
{
    (void)state;
    static const struct {
        uint32_t domain, code;
        const char *msg;
        bool resumable, non_resumable;
        enum resume_action want;
    } rows[] = {
        {MONGOC_ERROR_SERVER, 286,
         "Resume of change stream was not possible, as the resume point may no longer be in "
         "the oplog.",
         false, true, RESUME_ACTION_HISTORY_LOST},
        {MONGOC_ERROR_SERVER, 136,
         "Executor error during getMore :: caused by :: CollectionScan died due to position in "
         "capped collection being deleted. Last seen record id: RecordId(7302135454012948481)",
         false, false, RESUME_ACTION_HISTORY_LOST},
        {MONGOC_ERROR_SERVER, 280,
         "Resume of change stream was not possible, as the resume point may no longer be in "
         "the oplog.",
         false, true, RESUME_ACTION_HISTORY_LOST},
        {MONGOC_ERROR_SERVER, 280,
         "cannot resume stream; the resume token was not found. {_data: \"8265\"}", false, true,
         RESUME_ACTION_HISTORY_LOST},
        {MONGOC_ERROR_QUERY, 40585,
         "resume of change stream was not possible, as the resume token was not found.", false,
         false, RESUME_ACTION_HISTORY_LOST},
        {MONGOC_ERROR_SERVER, 280, "injected", true, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_QUERY, 40576, "resume point may no longer be in the oplog", false, false,
         RESUME_ACTION_HISTORY_LOST},
        {MONGOC_ERROR_SERVER, 10107, "not primary", true, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 11602, "operation was interrupted", true, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 189, "PrimarySteppedDown", true, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 91, "The server is in quiesce mode", true, false,
         RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 43, "cursor id 8130516622143745021 not found", false, false,
         RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 216, "election in progress", false, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 11601, "operation was interrupted", false, false,
         RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER, 260,
         "Attempting to resume a change stream using 'resumeAfter' is not allowed from an "
         "invalidate notification.",
         false, false, RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 40573, "The $changeStream stage is only supported on replica sets",
         false, false, RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 13, "not authorized on admin to execute command", false, false,
         RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 18, "Authentication failed.", false, false, RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 10334, "BSONObj size: 17000000 is invalid", false, false,
         RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 40415, "BSON field '$changeStream.foo' is an unknown field.", false,
         false, RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 51111,
         "Invalid Regex in $regexMatch: pattern string is longer than the limit set by the "
         "application",
         false, false, RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 51091, "Regular expression is invalid: missing )", false, false,
         RESUME_ACTION_FATAL},
        {MONGOC_ERROR_SERVER, 12345, "some new server error", false, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_SOCKET,
         "Failed to read 4 bytes: socket error or timeout", false, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_STREAM, MONGOC_ERROR_STREAM_CONNECT,
         "Failed to connect to target host: 127.0.0.1:1", false, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_SERVER_SELECTION, MONGOC_ERROR_SERVER_SELECTION_FAILURE,
         "No suitable servers found", false, false, RESUME_ACTION_RETRY},
        {MONGOC_ERROR_PROTOCOL, MONGOC_ERROR_PROTOCOL_INVALID_REPLY, "Invalid reply", false, false,
         RESUME_ACTION_RETRY},
        {MONGOC_ERROR_CLIENT, MONGOC_ERROR_CLIENT_AUTHENTICATE, "Authentication failed", false,
         false, RESUME_ACTION_FATAL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct resume_failure f = {rows[i].domain, rows[i].code, rows[i].msg, rows[i].resumable,
                                   rows[i].non_resumable};
        enum resume_action got = resume_classify(&f);
        if (got != rows[i].want)
            fail_msg("row %zu (code %u): got %s, want %s", i, rows[i].code, resume_action_name(got),
                     resume_action_name(rows[i].want));
    }
}

static void backoff_doubles_up_to_max(void **state)
{
    (void)state;
    static const int64_t want[] = {1000,  2000,  4000,   8000,   16000,
                                   32000, 64000, 120000, 120000, 120000};
    for (int64_t a = 1; a <= 10; a++)
        assert_int_equal(resume_backoff_ms(1000, 120000, a), want[a - 1]);
    assert_int_equal(resume_backoff_ms(100, 250, 3), 250);
    assert_int_equal(resume_backoff_ms(100, 250, 1000), 250);
}

static void token_time_reads_keystring_timestamp(void **state)
{
    (void)state;
    bson_t tok = BSON_INITIALIZER;
    uint32_t s = 0, o = 0;
    char buf[128];
    struct mcdc_position p;

    BSON_APPEND_UTF8(&tok, "_data",
                     "826553F100000000012B022C0100296E5A10043D1F3B4C5E6F4A1B9C2D0123456789AB46645F"
                     "696400646553F10000000000000000010004");
    assert_true(resume_token_time(&tok, &s, &o));
    assert_int_equal(s, 1700000000u);
    assert_int_equal(o, 1u);
    bson_destroy(&tok);

    bson_init(&tok);
    BSON_APPEND_UTF8(&tok, "_data", "8269B03187000000022B0429296E1404");
    assert_true(resume_token_time(&tok, &s, &o));
    assert_int_equal(s, 0x69B03187u);
    assert_int_equal(o, 2u);
    bson_destroy(&tok);

    bson_init(&tok);
    BSON_APPEND_INT32(&tok, "_data", 5);
    assert_false(resume_token_time(&tok, &s, &o));
    bson_destroy(&tok);

    pos_blank(&p);
    resume_describe_position(&p, buf, sizeof buf);
    assert_string_equal(buf, "none");
    p.sec = 1700000000;
    p.ord = 4;
    resume_describe_position(&p, buf, sizeof buf);
    assert_string_equal(buf, "Timestamp(1700000000, 4)");
    BSON_APPEND_UTF8(&p.resume_token, "_data", "826553F100000000012B0229296E04");
    p.has_resume_token = true;
    resume_describe_position(&p, buf, sizeof buf);
    assert_string_equal(buf, "resume token at Timestamp(1700000000, 1)");
    bson_destroy(&p.resume_token);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(start_point_prefers_token_then_optime_then_config),
        cmocka_unit_test(plan_follows_snapshot_mode),
        cmocka_unit_test(classify_table),
        cmocka_unit_test(backoff_doubles_up_to_max),
        cmocka_unit_test(token_time_reads_keystring_timestamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
