/*
 * Unit tests for signals: positional parsing of signal-collection documents
 * and the named JSON shape of the kafka and file channels
 * (debezium-format.md §5.3), execute-snapshot / stop-snapshot data checks,
 * and the bus (copies per task, bounded queues, pop order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bson/bson.h>

#include "common/log.h"
#include "signals/signals.h"

static bson_t *from_json(const char *json)
{
    bson_error_t e;
    bson_t *b = bson_new_from_json((const uint8_t *)json, -1, &e);
    if (b == NULL)
        fail_msg("bad test JSON: %s", e.message);
    return b;
}

/* Parses doc (extended JSON) from the source channel; returns ok, err kept. */
static bool parse(const char *json, struct mcdc_signal *sig, struct mcdc_error *err)
{
    bson_t *doc = from_json(json);
    bool ok = mcdc_signal_parse_doc(doc, MCDC_SIGNAL_CHANNEL_SOURCE, sig, err);
    bson_destroy(doc);
    return ok;
}

static void expect_doc_error(const char *json, const char *needle)
{
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (parse(json, &sig, &err)) {
        mcdc_signal_destroy(&sig);
        fail_msg("parsed, expected an error with '%s': %s", needle, json);
    }
    if (!strstr(err.msg, needle))
        fail_msg("error '%s' lacks '%s'", err.msg, needle);
    mcdc_signal_destroy(&sig); /* harmless after a failure */
}

static void standard_shape_with_subdocument(void **state)
{
    (void)state;
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(parse("{\"_id\": {\"$oid\": \"6553f1000000000000000001\"},"
                      " \"type\": \"execute-snapshot\","
                      " \"data\": {\"data-collections\": [\"shop.orders\"]}}",
                      &sig, &err));
    assert_string_equal(sig.id, "6553f1000000000000000001");
    assert_int_equal(sig.type, MCDC_SIGNAL_EXECUTE_SNAPSHOT);
    assert_int_equal(sig.channel, MCDC_SIGNAL_CHANNEL_SOURCE);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &sig.data, "data-collections"));
    assert_true(BSON_ITER_HOLDS_ARRAY(&it));
    struct mcdc_signal copy;
    mcdc_signal_copy(&sig, &copy);
    mcdc_signal_destroy(&sig);
    assert_string_equal(copy.id, "6553f1000000000000000001");
    assert_true(bson_iter_init_find(&it, &copy.data, "data-collections"));
    mcdc_signal_destroy(&copy);
}

static void fields_are_positional_and_data_may_be_json_text(void **state)
{
    (void)state;
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    /* names are irrelevant; the string data is parsed as JSON */
    assert_true(
        parse("{\"a\": \"sig-1\", \"b\": \"log\", \"c\": \"{\\\"message\\\": \\\"hi {}\\\"}\"}",
              &sig, &err));
    assert_string_equal(sig.id, "sig-1");
    assert_int_equal(sig.type, MCDC_SIGNAL_LOG);
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &sig.data, "message"));
    assert_string_equal(bson_iter_utf8(&it, NULL), "hi {}");
    mcdc_signal_destroy(&sig);
    /* window markers: payload "" is an empty data; numeric ids print as numbers */
    assert_true(
        parse("{\"_id\": 42, \"type\": \"snapshot-window-open\", \"payload\": \"\"}", &sig, &err));
    assert_string_equal(sig.id, "42");
    assert_int_equal(sig.type, MCDC_SIGNAL_WINDOW_OPEN);
    assert_true(bson_empty(&sig.data));
    mcdc_signal_destroy(&sig);
    assert_true(
        parse("{\"_id\": \"x\", \"type\": \"pause-snapshot\", \"data\": null}", &sig, &err));
    assert_int_equal(sig.type, MCDC_SIGNAL_PAUSE_SNAPSHOT);
    mcdc_signal_destroy(&sig);
}

static void malformed_documents_are_refused(void **state)
{
    (void)state;
    expect_doc_error("{}", "has 0 fields");
    expect_doc_error("{\"_id\": \"s1\", \"type\": \"log\"}", "signal 's1': has 2 fields");
    expect_doc_error("{\"_id\": \"s2\", \"type\": \"log\", \"data\": {}, \"x\": 1}",
                     "has 4 fields");
    expect_doc_error("{\"_id\": \"s3\", \"type\": 7, \"data\": {}}", "type) is not a string");
    expect_doc_error("{\"_id\": \"s4\", \"type\": \"explode\", \"data\": {}}",
                     "signal 's4': unknown type 'explode'");
    expect_doc_error("{\"_id\": \"s5\", \"type\": \"Log\", \"data\": {}}", "unknown type 'Log'");
    expect_doc_error("{\"_id\": \"s6\", \"type\": \"log\", \"data\": \"{not json\"}",
                     "signal 's6' (log): data is not valid JSON");
    expect_doc_error("{\"_id\": \"s7\", \"type\": \"log\", \"data\": \"[1, 2]\"}",
                     "data is not a JSON object");
    expect_doc_error("{\"_id\": \"s8\", \"type\": \"log\", \"data\": 5}",
                     "neither a document nor a JSON string");
    expect_doc_error(
        "{\"_id\": {\"$oid\": \"6553f1000000000000000002\"}, \"type\": \"schema-changes\","
        " \"data\": {}}",
        "signal '6553f1000000000000000002': unknown type");
}

static void json_channel_shape(void **state)
{
    (void)state;
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    const char *ok = "{\"id\":\"k-1\",\"type\":\"execute-snapshot\","
                     "\"data\":{\"data-collections\":[\"a.b\"],\"type\":\"BLOCKING\"}}";
    assert_true(mcdc_signal_parse_json(ok, strlen(ok), MCDC_SIGNAL_CHANNEL_KAFKA, &sig, &err));
    assert_string_equal(sig.id, "k-1");
    assert_int_equal(sig.channel, MCDC_SIGNAL_CHANNEL_KAFKA);
    struct mcdc_snapshot_request req;
    assert_true(mcdc_signal_snapshot_request(&sig, &req, &err));
    assert_true(req.blocking);
    assert_int_equal(req.collection_count, 1);
    assert_string_equal(req.collections[0], "a.b");
    mcdc_snapshot_request_destroy(&req);
    mcdc_signal_destroy(&sig);

    const char *no_data = "{\"id\":\"k-2\",\"type\":\"resume-snapshot\"}";
    assert_true(
        mcdc_signal_parse_json(no_data, strlen(no_data), MCDC_SIGNAL_CHANNEL_FILE, &sig, &err));
    assert_int_equal(sig.type, MCDC_SIGNAL_RESUME_SNAPSHOT);
    mcdc_signal_destroy(&sig);

    const struct {
        const char *json, *needle;
    } bad[] = {
        {"", "empty text"},
        {"  ", "empty text"},
        {"nonsense", "not a JSON object"},
        {"{\"id\": \"k\"", "not valid JSON"},
        {"{\"type\":\"log\",\"data\":{}}", "no \"id\""},
        {"{\"id\":\"k-3\",\"data\":{}}", "signal 'k-3': no \"type\""},
        {"{\"id\":\"k-4\",\"type\":\"nope\"}", "unknown type 'nope'"},
        {"{\"id\":\"k-5\",\"type\":\"log\",\"data\":[1]}", "neither an object"},
        {"{\"id\":\"k-6\",\"type\":\"log\",\"data\":\"{x\"}", "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (struct mcdc_error)MCDC_ERROR_INIT;
        if (mcdc_signal_parse_json(bad[i].json, strlen(bad[i].json), MCDC_SIGNAL_CHANNEL_FILE, &sig,
                                   &err))
            fail_msg("parsed: %s", bad[i].json);
        if (!strstr(err.msg, bad[i].needle))
            fail_msg("'%s': error '%s' lacks '%s'", bad[i].json, err.msg, bad[i].needle);
    }
}

/* The request check of data (extended JSON) for type; NULL needle = ok. */
static void expect_request(enum mcdc_signal_type type, const char *data, const char *needle)
{
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    memset(&sig, 0, sizeof sig);
    sig.id = "r-1";
    sig.type = type;
    bson_t *d = from_json(data);
    bson_copy_to(d, &sig.data);
    bson_destroy(d);
    struct mcdc_snapshot_request req;
    bool ok = mcdc_signal_snapshot_request(&sig, &req, &err);
    bson_destroy(&sig.data);
    if (needle == NULL) {
        if (!ok)
            fail_msg("refused %s: %s", data, err.msg);
        mcdc_snapshot_request_destroy(&req);
        return;
    }
    if (ok)
        fail_msg("accepted %s (expected '%s')", data, needle);
    if (!strstr(err.msg, needle))
        fail_msg("%s: error '%s' lacks '%s'", data, err.msg, needle);
    assert_non_null(strstr(err.msg, "signal 'r-1'"));
    assert_null(req.collections); /* destroyed on failure */
}

static void snapshot_request_checks(void **state)
{
    (void)state;
    const enum mcdc_signal_type EX = MCDC_SIGNAL_EXECUTE_SNAPSHOT, ST = MCDC_SIGNAL_STOP_SNAPSHOT;
    expect_request(EX, "{\"data-collections\": [\"shop.orders\", \"shop\\\\.o.*\"]}", NULL);
    expect_request(EX, "{\"data-collections\": [\"a.b\"], \"type\": \"Incremental\"}", NULL);
    expect_request(EX, "{}", "no data-collections");
    expect_request(EX, "{\"data-collections\": []}", "data-collections is empty");
    expect_request(EX, "{\"data-collections\": \"a.b\"}", "not an array of strings");
    expect_request(EX, "{\"data-collections\": [\"a.b\", 3]}", "entry 1 is not a string");
    expect_request(EX, "{\"data-collections\": [\"\"]}", "entry 0 is empty");
    expect_request(EX, "{\"data-collections\": [\"a.(b\"]}", "'a.(b' is not a valid regex");
    expect_request(EX, "{\"data-collections\": [\"a.b\"], \"type\": \"sideways\"}",
                   "unknown snapshot type 'sideways'");
    expect_request(EX, "{\"data-collections\": [\"a.b\"], \"type\": 1}", "type is not a string");
    expect_request(EX, "{\"data-collections\": [\"a.b\"], \"surrogate-key\": \"k\"}",
                   "Surrogate key not supported for MongoDB");
    /* additional-conditions */
    expect_request(EX,
                   "{\"data-collections\": [\"a.b\"], \"additional-conditions\":"
                   " [{\"data-collection\": \"A.B\", \"filter\": \"{\\\"s\\\": \\\"A\\\"}\"}]}",
                   NULL);
    expect_request(EX, "{\"data-collections\": [\"a.b\"], \"additional-conditions\": {}}",
                   "additional-conditions is not an array");
    expect_request(EX, "{\"data-collections\": [\"a.b\"], \"additional-conditions\": [1]}",
                   "entry 0 is not an object");
    expect_request(EX,
                   "{\"data-collections\": [\"a.b\"], \"additional-conditions\":"
                   " [{\"filter\": \"{}\"}]}",
                   "has no data-collection string");
    expect_request(EX,
                   "{\"data-collections\": [\"a.b\"], \"additional-conditions\":"
                   " [{\"data-collection\": \"a.b\"}]}",
                   "has no filter");
    expect_request(EX,
                   "{\"data-collections\": [\"a.b\"], \"additional-conditions\":"
                   " [{\"data-collection\": \"a.b\", \"filter\": \"{bad\"}]}",
                   "filter of a.b: is not valid JSON");
    expect_request(EX,
                   "{\"data-collections\": [\"a.b\"], \"additional-conditions\":"
                   " [{\"data-collection\": \"a.b\", \"filter\": 5}]}",
                   "not a JSON string");
    expect_request(EX,
                   "{\"data-collections\": [\"a.b\"], \"additional-conditions\":"
                   " [{\"data-collection\": \"[\", \"filter\": \"{}\"}]}",
                   "data-collection '[' is not a valid regex");
    /* stop-snapshot: no list or an empty list means everything */
    expect_request(ST, "{}", NULL);
    expect_request(ST, "{\"type\": \"incremental\", \"data-collections\": []}", NULL);
    expect_request(ST, "{\"data-collections\": [\"a.(\"]}", "not a valid regex");
    expect_request(MCDC_SIGNAL_LOG, "{}", "not a snapshot request");
}

static void request_fields_are_filled(void **state)
{
    (void)state;
    struct mcdc_signal sig;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(
        parse("{\"_id\": \"c\", \"type\": \"execute-snapshot\", \"data\": "
              "{\"data-collections\": [\"a.b\", \"a.c\"], \"additional-conditions\":"
              " [{\"data-collection\": \"a.b\", \"filter\": \"{\\\"n\\\": {\\\"$gt\\\": 5}}\"}]}}",
              &sig, &err));
    struct mcdc_snapshot_request req;
    assert_true(mcdc_signal_snapshot_request(&sig, &req, &err));
    assert_false(req.blocking);
    assert_int_equal(req.collection_count, 2);
    assert_string_equal(req.collections[1], "a.c");
    assert_int_equal(req.condition_count, 1);
    assert_string_equal(req.conditions[0].collection, "a.b");
    bson_iter_t it, sub;
    assert_true(bson_iter_init_find(&it, &req.conditions[0].filter, "n"));
    assert_true(bson_iter_recurse(&it, &sub));
    assert_true(bson_iter_find(&sub, "$gt"));
    assert_int_equal(bson_iter_as_int64(&sub), 5);
    mcdc_snapshot_request_destroy(&req);
    mcdc_signal_destroy(&sig);
}

static void make_signal(struct mcdc_signal *sig, const char *id)
{
    memset(sig, 0, sizeof *sig);
    sig->id = (char *)id;
    sig->type = MCDC_SIGNAL_LOG;
    bson_init(&sig->data);
    /* big enough that bson_t leaves its inline buffer */
    char msg[400];
    memset(msg, 'm', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    BSON_APPEND_UTF8(&sig->data, "message", msg);
}

static int wakes;
static void count_wake(void *ctx)
{
    (void)ctx;
    wakes++;
}

static void bus_copies_to_every_task_in_order(void **state)
{
    (void)state;
    struct signal_bus *bus = signal_bus_new();
    struct signal_queue *a = signal_bus_subscribe(bus, "rs0");
    struct signal_queue *b = signal_bus_subscribe(bus, "shard1");
    signal_queue_set_wake(b, count_wake, NULL);
    wakes = 0;
    struct mcdc_signal s1, s2, out;
    make_signal(&s1, "one");
    make_signal(&s2, "two");
    signal_bus_publish(bus, &s1);
    signal_bus_publish(bus, &s2);
    bson_destroy(&s1.data);
    bson_destroy(&s2.data);
    assert_int_equal(wakes, 2);
    assert_string_equal(signal_queue_task(b), "shard1");
    assert_int_equal(signal_queue_pending(a), 2);
    assert_true(signal_queue_pop(a, &out));
    assert_string_equal(out.id, "one");
    bson_iter_t it;
    assert_true(bson_iter_init_find(&it, &out.data, "message"));
    mcdc_signal_destroy(&out);
    assert_true(signal_queue_pop(a, &out));
    assert_string_equal(out.id, "two");
    mcdc_signal_destroy(&out);
    assert_false(signal_queue_pop(a, &out));
    assert_int_equal(signal_queue_pending(b), 2);
    /* b keeps its copies; destroying the bus frees them */
    signal_bus_destroy(bus);
}

static void full_queue_refuses_and_counts(void **state)
{
    (void)state;
    struct signal_bus *bus = signal_bus_new();
    struct signal_queue *slow = signal_bus_subscribe(bus, "slow");
    struct signal_queue *fast = signal_bus_subscribe(bus, "fast");
    struct mcdc_signal s, out;
    make_signal(&s, "flood");
    for (int i = 0; i < SIGNAL_QUEUE_MAX + 3; i++) {
        signal_bus_publish(bus, &s);
        assert_true(signal_queue_pop(fast, &out)); /* the draining task gets them all */
        mcdc_signal_destroy(&out);
    }
    bson_destroy(&s.data);
    assert_int_equal(signal_queue_pending(slow), SIGNAL_QUEUE_MAX);
    assert_int_equal(signal_queue_dropped(slow), 3);
    assert_int_equal(signal_queue_dropped(fast), 0);
    assert_true(signal_queue_pop(slow, &out));
    mcdc_signal_destroy(&out);
    assert_int_equal(signal_queue_pending(slow), SIGNAL_QUEUE_MAX - 1);
    signal_bus_destroy(bus);
    signal_bus_destroy(NULL);
}

static void closed_bus_delivers_nothing(void **state)
{
    (void)state;
    struct signal_bus *bus = signal_bus_new();
    struct signal_queue *q = signal_bus_subscribe(bus, "rs0");
    struct mcdc_signal s, out;
    make_signal(&s, "before");
    assert_false(signal_bus_closed(bus));
    assert_true(signal_bus_publish(bus, &s));
    signal_bus_close(bus);
    signal_bus_close(bus); /* idempotent */
    assert_true(signal_bus_closed(bus));
    /* refused: the channel keeps it for the next run */
    assert_false(signal_bus_publish(bus, &s));
    bson_destroy(&s.data);
    /* what the queue held before stays for the task's last drain */
    assert_int_equal(signal_queue_pending(q), 1);
    assert_true(signal_queue_pop(q, &out));
    assert_string_equal(out.id, "before");
    mcdc_signal_destroy(&out);
    assert_false(signal_bus_publish(NULL, &s));
    assert_true(signal_bus_closed(NULL));
    signal_bus_destroy(bus);
}

static void log_signal_fills_the_first_placeholder(void **state)
{
    (void)state;
    char path[] = "/tmp/test_signals_logXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_true(mcdc_log_open(MCDC_LOG_INFO, MCDC_LOG_FORMAT_TEXT, path, &err));
    struct mcdc_signal sig;
    memset(&sig, 0, sizeof sig);
    sig.id = "L1";
    sig.type = MCDC_SIGNAL_LOG;
    bson_init(&sig.data);
    BSON_APPEND_UTF8(&sig.data, "message", "at {} then {}");
    mcdc_signal_log(&sig, "{\"sec\":5}");
    mcdc_signal_log(&sig, NULL);
    bson_reinit(&sig.data);
    mcdc_signal_log(&sig, "{}"); /* no message: Debezium's WARN */
    bson_destroy(&sig.data);
    mcdc_log_close();
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(path);
    assert_non_null(strstr(buf, "INFO  [main] at {\"sec\":5} then {}\n"));
    assert_non_null(strstr(buf, "at <none> then {}\n"));
    assert_non_null(strstr(buf, "WARN  [main] Logging signal 'L1' has arrived but the requested "
                                "field 'message' is missing from data"));
}

static void subscribers_are_counted(void **state)
{
    (void)state;
    struct signal_bus *bus = signal_bus_new();
    assert_int_equal(signal_bus_subscribers(bus), 0);
    signal_bus_subscribe(bus, "a");
    signal_bus_subscribe(bus, "b");
    assert_int_equal(signal_bus_subscribers(bus), 2);
    signal_bus_destroy(bus);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(standard_shape_with_subdocument),
        cmocka_unit_test(fields_are_positional_and_data_may_be_json_text),
        cmocka_unit_test(malformed_documents_are_refused),
        cmocka_unit_test(json_channel_shape),
        cmocka_unit_test(snapshot_request_checks),
        cmocka_unit_test(request_fields_are_filled),
        cmocka_unit_test(bus_copies_to_every_task_in_order),
        cmocka_unit_test(full_queue_refuses_and_counts),
        cmocka_unit_test(closed_bus_delivers_nothing),
        cmocka_unit_test(log_signal_fills_the_first_placeholder),
        cmocka_unit_test(subscribers_are_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
