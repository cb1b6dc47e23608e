/*
 * Unit tests of the configuration loader (src/config): defaults per dialect,
 * each type and range check, both list forms, unknown-key suggestions,
 * duplicate keys, the kafka: pass-through, secrets, folding of Debezium's
 * connection properties into the URI, and --config-help / Markdown covering
 * every option of the table. Each case writes a YAML text to a temporary file
 * and loads it, capturing the problems printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "config/config.h"
#include "config/internal.h"

#define BASE                                                                                       \
    "topic.prefix: t\nmongodb.connection.string: mongodb://h1/?replicaSet=rs0\n"                   \
    "sink.type: stdout\noffsets.file.path: /tmp/o.json\n"

struct loaded {
    struct mcdc_config *cfg;
    char *diag; /* everything printed, "" when nothing */
    char path[64];
};

static struct loaded load(const char *yaml)
{
    struct loaded l = {0};
    snprintf(l.path, sizeof l.path, "/tmp/mcdc-test-config-XXXXXX");
    int fd = mkstemp(l.path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    size_t len = 0;
    FILE *diag = open_memstream(&l.diag, &len);
    struct mcdc_error err = MCDC_ERROR_INIT;
    l.cfg = config_load(l.path, diag, &err);
    fclose(diag);
    if (!l.cfg) {
        assert_int_equal(err.domain, MCDC_ERR_CONFIG);
        assert_true(err.code > 0);
    }
    return l;
}

static void unload(struct loaded *l)
{
    config_free(l->cfg);
    free(l->diag);
    unlink(l->path);
}

/* Asserts that loading failed and that the problems printed contain want;
 * a leading "F:" stands for "<file name>:". */
static void assert_problem(const char *yaml, const char *want)
{
    struct loaded l = load(yaml);
    assert_null(l.cfg);
    char expect[1024];
    if (strncmp(want, "F:", 2) == 0)
        snprintf(expect, sizeof expect, "%s%s", l.path, want + 1);
    else
        snprintf(expect, sizeof expect, "%s", want);
    if (!strstr(l.diag, expect))
        fail_msg("expected\n  %s\nin\n%s", expect, l.diag);
    unload(&l);
}

/* A directory is refused at once; a file nested 100,000 levels deep (200 KB) is
 * refused by the depth check in well under a second, before libyaml builds
 * its node tree. */
static void test_directory_and_deep_nesting(void **state)
{
    (void)state;
    char dir[] = "/tmp/mcdc-test-config-dir-XXXXXX";
    assert_non_null(mkdtemp(dir));
    size_t len = 0;
    char *out = NULL;
    FILE *diag = open_memstream(&out, &len);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_null(config_load(dir, diag, &err));
    fclose(diag);
    assert_non_null(strstr(out, "is a directory"));
    free(out);
    rmdir(dir);

    enum { N = 100000 };
    size_t n = strlen(BASE) + 4 + 2 * N + 2;
    char *yaml = malloc(n);
    assert_non_null(yaml);
    char *p = yaml + sprintf(yaml, "%sx: ", BASE);
    memset(p, '[', N);
    memset(p + N, ']', N);
    strcpy(p + 2 * N, "\n");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct loaded l = load(yaml);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_null(l.cfg);
    assert_non_null(strstr(l.diag, "nested more than 64 levels deep"));
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    assert_true(secs < 2.0);
    unload(&l);
    free(yaml);
}

static void test_defaults_1_9(void **state)
{
    (void)state;
    struct loaded l = load(BASE);
    assert_non_null(l.cfg);
    assert_string_equal(l.diag, "");
    const struct mcdc_config *c = l.cfg;
    assert_string_equal(c->topic_prefix, "t");
    assert_int_equal(c->dialect, MCDC_DIALECT_1_9);
    assert_int_equal(c->connection_mode, MCDC_CONNECTION_REPLICA_SET);
    assert_int_equal(c->connect_timeout_ms, 10000);
    assert_int_equal(c->server_selection_timeout_ms, 30000);
    assert_int_equal(c->socket_timeout_ms, 0);
    assert_int_equal(c->heartbeat_frequency_ms, 10000);
    assert_int_equal(c->poll_interval_ms_topology, 30000);
    assert_int_equal(c->backoff_initial_ms, 1000);
    assert_int_equal(c->backoff_max_ms, 120000);
    assert_int_equal(c->connect_max_attempts, 16);
    assert_int_equal(c->capture_mode, MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL);
    assert_int_equal(c->full_update_type, MCDC_FULL_UPDATE_LOOKUP);
    assert_int_equal(c->capture_start_op_time, -1);
    assert_int_equal(c->cursor_max_await_time_ms, 0);
    assert_null(c->cursor_pipeline);
    assert_int_equal(c->skipped_operations.count, 0);
    assert_true(c->tombstones_on_delete);
    assert_false(c->provide_transaction_metadata);
    assert_int_equal(c->filters_match_mode, MCDC_FILTER_MATCH_REGEX);
    assert_int_equal(c->snapshot_mode, MCDC_SNAPSHOT_INITIAL);
    assert_int_equal(c->snapshot_max_threads, 1);
    assert_false(c->snapshot_resumable);
    assert_int_equal(c->incremental_snapshot_chunk_size, 1024);
    assert_string_equal(c->topic_delimiter, ".");
    assert_string_equal(c->topic_transaction, "transaction");
    assert_string_equal(c->topic_heartbeat_prefix, "__debezium-heartbeat");
    assert_int_equal(c->schema_name_adjust, MCDC_SCHEMA_ADJUST_AVRO);
    assert_string_equal(c->debezium_version, "1.9.8.Final");
    assert_int_equal(c->max_batch_size, 2048);
    assert_int_equal(c->poll_interval_ms, 500);
    assert_int_equal(c->sink_type, MCDC_SINK_STDOUT);
    assert_int_equal(c->sink_queue_bytes, 16 * 1024 * 1024);
    assert_int_equal(c->offset_storage, MCDC_OFFSETS_FILE);
    assert_int_equal(c->offsets_flush_interval_ms, 60000);
    assert_int_equal(c->offsets_flush_timeout_ms, 5000);
    assert_int_equal(c->log_level, 2 /* info */);
    assert_int_equal(c->log_format, 0 /* text */);
    assert_null(c->log_file);
    assert_int_equal(c->unsupported_count, 0);
    unload(&l);
}

static void test_defaults_3_x(void **state)
{
    (void)state;
    struct loaded l = load(BASE "debezium.compatibility: 3.x\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->dialect, MCDC_DIALECT_3_X);
    assert_int_equal(l.cfg->schema_name_adjust, MCDC_SCHEMA_ADJUST_NONE);
    assert_string_equal(l.cfg->debezium_version, "3.6.1.Final");
    assert_int_equal(l.cfg->skipped_operations.count, 1);
    assert_string_equal(l.cfg->skipped_operations.items[0], "t");
    unload(&l);
    l = load(BASE "debezium.compatibility: 3.x\nskipped.operations: none\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->skipped_operations.count, 0); /* "none": nothing skipped */
    unload(&l);
}

static void test_values_set(void **state)
{
    (void)state;
    struct loaded l = load(BASE "mongodb.connect.timeout.ms: 2500\ncapture.mode: OPLOG\n"
                                "tombstones.on.delete: false\ncapture.start.op.time: 0\n"
                                "snapshot.resumable: true\n"
                                "log: {level: debug, format: json, file: /tmp/x.log}\n"
                                "cursor.pipeline: '[{\"$match\": {\"x\": 1}}]'\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->connect_timeout_ms, 2500);
    assert_int_equal(l.cfg->capture_mode, MCDC_CAPTURE_OPLOG); /* enum names ignore case */
    assert_false(l.cfg->tombstones_on_delete);
    assert_true(l.cfg->snapshot_resumable);
    assert_int_equal(l.cfg->capture_start_op_time, 0);
    assert_int_equal(l.cfg->log_level, 3);
    assert_int_equal(l.cfg->log_format, 1);
    assert_string_equal(l.cfg->log_file, "/tmp/x.log");
    assert_string_equal(l.cfg->cursor_pipeline, "[{\"$match\": {\"x\": 1}}]");
    unload(&l);
}

static void test_type_checks(void **state)
{
    (void)state;
    assert_problem(BASE "snapshot.max.threads: lots\n",
                   "F:5:23: snapshot.max.threads: not an integer: \"lots\" (expected an integer "
                   "between 1 and 1024)");
    assert_problem(BASE "snapshot.max.threads: 1025\n",
                   "F:5:23: snapshot.max.threads: out of range: 1025");
    assert_problem(BASE "capture.start.op.time: -2\n",
                   "capture.start.op.time: out of range: -2 (expected an integer >= -1)");
    assert_problem(BASE "mongodb.socket.timeout.ms: 1.5\n", "not an integer: \"1.5\"");
    assert_problem(BASE "tombstones.on.delete: yes\n",
                   "F:5:23: tombstones.on.delete: not a boolean: \"yes\" (expected true or false)");
    assert_problem(BASE "snapshot.mode: sometimes\n",
                   "F:5:16: snapshot.mode: invalid value \"sometimes\" (expected one of: initial, "
                   "when_needed, initial_only, never, no_data, always)");
    assert_problem(BASE "debezium.compatibility: 2.0\n",
                   "invalid value \"2.0\" (expected one of: 1.9, 3.x)");
    assert_problem(BASE "topic.delimiter:\n",
                   "F:5:17: topic.delimiter: no value (expected a string)");
    assert_problem(BASE "topic.delimiter: ''\n",
                   "topic.delimiter: empty value (expected a string)");
    assert_problem(BASE "topic.transaction: [a]\n",
                   "topic.transaction: unexpected list (expected a string)");
    assert_problem(BASE "tombstones.on.delete: {a: 1}\n",
                   "unexpected map (expected true or false)");
    assert_problem(BASE "collection.include.list: [a.b, {x: 1}]\n",
                   "F:5:32: collection.include.list: list entry is not a string");
    assert_problem(BASE "cursor.pipeline: '{\"a\": 1}'\n",
                   "cursor.pipeline: not a JSON array (expected a JSON array of stages)");
    assert_problem(BASE "kafka: [a]\n", "F:5:8: kafka: not a map");
}

static void test_lists_both_forms(void **state)
{
    (void)state;
    struct loaded l = load(BASE "collection.include.list: [ ' a.b ', c.d ]\n"
                                "database.exclude.list: \" x , y\\\\,z ,, w,\"\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->collection_include.count, 2);
    assert_string_equal(l.cfg->collection_include.items[0], "a.b");
    assert_string_equal(l.cfg->collection_include.items[1], "c.d");
    assert_int_equal(l.cfg->database_exclude.count, 3);
    assert_string_equal(l.cfg->database_exclude.items[0], "x");
    assert_string_equal(l.cfg->database_exclude.items[1], "y,z"); /* Debezium's \, escape */
    assert_string_equal(l.cfg->database_exclude.items[2], "w");
    unload(&l);
}

static void test_unknown_key(void **state)
{
    (void)state;
    assert_problem(BASE "colection.include.list: a\n",
                   "F:5:1: colection.include.list: unknown key (did you mean "
                   "collection.include.list?)");
    assert_problem(BASE "sink: {tpye: file}\n",
                   "F:5:8: sink.tpye: unknown key (did you mean sink.type?)");
    assert_problem(BASE "completely.different: 1\n",
                   "F:5:1: completely.different: unknown key (see mongocdc --config-help)");
}

static void test_duplicate_key(void **state)
{
    (void)state;
    assert_problem(BASE "topic.prefix: again\n",
                   "F:5:1: topic.prefix: duplicate key (first set at line 1)");
    /* A nested map and a dotted key are the same key. */
    assert_problem(BASE "log.level: info\nlog:\n  level: debug\n",
                   "F:7:3: log.level: duplicate key (first set at line 5)");
    assert_problem(BASE "mongodb.name: old\n",
                   "F:5:1: mongodb.name: same option as topic.prefix (line 1) (expected only one "
                   "of them)");
}

static void test_missing_required(void **state)
{
    (void)state;
    assert_problem("sink.type: stdout\noffsets.file.path: x\n",
                   "F:1:1: topic.prefix: missing required key");
    assert_problem("sink.type: stdout\noffsets.file.path: x\n",
                   "F:1:1: mongodb.connection.string: missing required key");
    struct loaded l = load("mongodb.name: old\nmongodb.hosts: rs0/a:1,b:2\n"
                           "sink.type: stdout\noffsets.file.path: x\n");
    assert_non_null(l.cfg); /* Debezium 1.x names */
    assert_string_equal(l.cfg->topic_prefix, "old");
    assert_string_equal(l.cfg->connection_string, "mongodb://a:1,b:2/?replicaSet=rs0");
    unload(&l);
}

static void test_cross_field(void **state)
{
    (void)state;
    assert_problem("topic.prefix: my server\nmongodb.connection.string: mongodb://h\n"
                   "sink.type: stdout\noffsets.file.path: x\n",
                   "F:1:1: topic.prefix: invalid topic name \"my server\" (expected letters, "
                   "digits, '.', '_' and '-' only)");
    assert_problem(BASE "collection.include.list: a\ncollection.exclude.list: b\n",
                   "F:6:1: collection.exclude.list: cannot be used with collection.include.list");
    assert_problem("topic.prefix: t\nmongodb.connection.string: mongodb://h\nsink.type: file\n"
                   "offsets.file.path: x\n",
                   "F:3:1: sink.type: file sink needs sink.path");
    assert_problem("topic.prefix: t\nmongodb.connection.string: mongodb://h\n"
                   "offsets.file.path: x\n",
                   "F:1:1: sink.type: kafka sink needs brokers");
    /* A rule between two keys is reported at the one set last, never at the
     * top of the file when one of them is in it. */
    assert_problem("topic.prefix: t\nmongodb.connection.string: mongodb://h\n"
                   "offsets.file.path: x\nkafka:\n  linger.ms: 5\n",
                   "F:5:3: kafka: the kafka sink (the default sink.type) needs brokers");
    assert_problem("topic.prefix: t\nmongodb.connection.string: mongodb://h\nsink.type: stdout\n"
                   "offsets.storage: file\n",
                   "F:4:1: offsets.storage: file storage needs offsets.file.path");
    assert_problem(BASE "connect.backoff.max.delay.ms: 10\n",
                   "F:5:1: connect.backoff.max.delay.ms: smaller than "
                   "connect.backoff.initial.delay.ms");
    assert_problem(BASE "connect.backoff.max.delay.ms: 10\nconnect.backoff.initial.delay.ms: 20\n",
                   "F:6:1: connect.backoff.initial.delay.ms: larger than "
                   "connect.backoff.max.delay.ms");
    assert_problem(BASE "collection.exclude.list: b\ncollection.include.list: a\n",
                   "F:6:1: collection.include.list: cannot be used with collection.exclude.list");
    assert_problem(BASE "capture.mode: oplog\ndebezium.compatibility: 3.x\n",
                   "F:6:1: debezium.compatibility: the 3.x dialect has no oplog capture");
    assert_problem("topic.prefix: t\nmongodb.hosts: rs0/h:1\nsink.type: stdout\n"
                   "offsets.file.path: x\nmongodb.connection.string: mongodb://h\n",
                   "F:5:1: mongodb.connection.string: cannot be used with mongodb.hosts (line 2)");
    assert_problem("topic.prefix: t\nmongodb.connection.string: mongodb://h\nsink.type: stdout\n"
                   "offsets.file.path: x\nmongodb.hosts: rs0/h:1\n",
                   "F:5:1: mongodb.hosts: cannot be used with mongodb.connection.string (line 2)");
    assert_problem(BASE "offsets.storage: kafka\n",
                   "F:5:1: offsets.storage: kafka offset storage needs the kafka sink");
    assert_problem(BASE "debezium.compatibility: 3.x\ncapture.mode: oplog\n",
                   "F:6:1: capture.mode: oplog capture exists only in the 1.9 dialect");
    /* field rules do not reach a raw $v: 2 diff: refused, whichever line comes last */
    assert_problem(BASE "debezium.compatibility: \"1.9\"\ncapture.mode: oplog\n"
                        "field.exclude.list: db.c.x\noplog.update.raw.diff: true\n",
                   "F:8:1: oplog.update.raw.diff: field.exclude.list and field.renames do not "
                   "reach a raw $v: 2 diff");
    assert_problem(BASE "debezium.compatibility: \"1.9\"\ncapture.mode: oplog\n"
                        "oplog.update.raw.diff: true\nfield.renames: db.c.a:b\n",
                   "F:8:1: field.renames: field rules do not reach a raw $v: 2 diff");
    assert_problem(BASE "collection.include.list: 'a\\.(b'\n",
                   "F:5:1: collection.include.list: invalid regex \"a\\.(b\": missing closing "
                   "parenthesis at offset 5");
    struct loaded lit = load(BASE "filters.match.mode: literal\ncollection.include.list: 'a.(b'\n");
    assert_non_null(lit.cfg); /* literal names are not regexes */
    unload(&lit);
    assert_problem(BASE "skipped.operations: c,x\n",
                   "skipped.operations: invalid operation \"x\" (expected c, u, d, t or none)");
    assert_problem(
        BASE "snapshot.collection.filter.overrides: a.b\n",
        "no query for \"a.b\" (expected snapshot.collection.filter.overrides.a.b to be set)");
    assert_problem(BASE "snapshot.collection.filter.overrides.a.b: '{}'\n",
                   "F:5:1: snapshot.collection.filter.overrides.a.b: collection not listed");
    struct loaded l = load(BASE "snapshot.collection.filter.overrides: a.b\n"
                                "snapshot.collection.filter.overrides.a.b: '{\"x\": 1}'\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->snapshot_filter_override_count, 1);
    assert_string_equal(l.cfg->snapshot_filter_overrides[0].ns, "a.b");
    assert_string_equal(l.cfg->snapshot_filter_overrides[0].query, "{\"x\": 1}");
    unload(&l);
    /* Field rules the encoder refuses at start (encode/fields.c), refused here too. */
    assert_problem(BASE "field.exclude.list: a.b\n",
                   "F:5:1: field.exclude.list: invalid entry \"a.b\"");
    assert_problem(BASE "field.exclude.list: a..c\n",
                   "F:5:1: field.exclude.list: invalid entry \"a..c\"");
    assert_problem(BASE "field.renames: a.b:x\n", "F:5:1: field.renames: invalid entry \"a.b:x\"");
    assert_problem(BASE "field.renames: a.b.c:x.y\n",
                   "F:5:1: field.renames: invalid entry \"a.b.c:x.y\"");
    l = load(BASE "field.exclude.list: a.b.c, d.e.f.g\nfield.renames: a.b.c:x\n");
    assert_non_null(l.cfg);
    unload(&l);
    /* What the metrics listener refuses at start, --validate refuses too. */
    assert_problem(BASE "metrics.http.bind.address: localhost\n",
                   "F:5:1: metrics.http.bind.address: \"localhost\" is not an IPv4 or IPv6");
    assert_problem(BASE "metrics.enabled: true\nmetrics.http.bind.address: 999.1.1.1\n",
                   "F:6:1: metrics.http.bind.address: \"999.1.1.1\" is not an IPv4 or IPv6");
    l = load(BASE "metrics.http.bind.address: '::1'\n");
    assert_non_null(l.cfg);
    unload(&l);
}

static void test_kafka_passthrough(void **state)
{
    (void)state;
    struct loaded l = load("topic.prefix: t\nmongodb.connection.string: mongodb://h\n"
                           "offsets.file.path: x\nkafka:\n  bootstrap.servers: k:9092\n"
                           "  linger.ms: 5\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->kafka.count, 2);
    assert_string_equal(l.cfg->kafka.items[0].key, "bootstrap.servers");
    assert_string_equal(l.cfg->kafka.items[0].value, "k:9092");
    assert_int_equal(l.cfg->kafka.items[1].line, 6);
    assert_int_equal(l.cfg->kafka.items[1].col, 3);
    assert_string_equal(l.cfg->kafka.items[1].value, "5");
    unload(&l);
    assert_problem(BASE "kafka:\n  linger.ms: soon\n",
                   "F:6:3: kafka.linger.ms: Invalid value for configuration property "
                   "\"queue.buffering.max.ms\" (expected a value librdkafka accepts for this "
                   "property)");
    assert_problem(BASE "kafka:\n  no.such.thing: 1\n",
                   "F:6:3: kafka.no.such.thing: No such configuration property: "
                   "\"no.such.thing\" (expected a librdkafka property)");
    /* The unsecured JWT without a principal: librdkafka 2.0 crashes later. */
    assert_problem(BASE "kafka:\n  sasl.mechanism: OAUTHBEARER\n"
                        "  enable.sasl.oauthbearer.unsecure.jwt: true\n"
                        "  sasl.oauthbearer.config: scope=a\n",
                   "F:8:3: kafka.sasl.oauthbearer.config: the unsecured JWT of "
                   "enable.sasl.oauthbearer.unsecure.jwt needs a principal");
    assert_problem(BASE "kafka:\n  sasl.mechanism: OAUTHBEARER\n"
                        "  enable.sasl.oauthbearer.unsecure.jwt: true\n",
                   "F:7:3: kafka.enable.sasl.oauthbearer.unsecure.jwt: the unsecured JWT");
    assert_problem(BASE "kafka:\n  acks: all\n  acks: 1\n",
                   "F:7:3: kafka.acks: duplicate key (first set at line 6)");
}

/* The producer settings the Kafka sink locks are refused by --validate too,
 * at the key, with the sink's rule. */
static void test_kafka_locked(void **state)
{
    (void)state;
#define KBASE                                                                                      \
    "topic.prefix: t\nmongodb.connection.string: mongodb://h\noffsets.file.path: x\n"              \
    "kafka:\n  bootstrap.servers: k:9092\n"
    assert_problem(KBASE "  acks: 1\n",
                   "F:6:3: kafka.acks: must wait for all in-sync replicas: at-least-once "
                   "delivery needs acks=all");
    assert_problem(KBASE "  request.required.acks: 0\n", "F:6:3: kafka.request.required.acks: "
                                                         "must wait for all in-sync replicas");
    assert_problem(KBASE "  enable.idempotence: false\n",
                   "F:6:3: kafka.enable.idempotence: cannot be turned off: at-least-once "
                   "delivery and per-key order need an idempotent producer");
    assert_problem(KBASE "  max.in.flight.requests.per.connection: 20\n",
                   "F:6:3: kafka.max.in.flight.requests.per.connection: 20 is more than the "
                   "idempotent producer allows");
    assert_problem(KBASE "  max.in.flight: 6\n", "F:6:3: kafka.max.in.flight: 6 is more than");
    /* A value librdkafka refuses is reported once, by librdkafka. */
    struct loaded bad = load(KBASE "  acks: lots\n");
    assert_null(bad.cfg);
    assert_non_null(strstr(bad.diag, "expected a value librdkafka accepts"));
    assert_null(strstr(bad.diag, "in-sync replicas"));
    unload(&bad);
    struct loaded l = load(KBASE "  acks: -1\n  enable.idempotence: 'TRUE'\n"
                                 "  max.in.flight.requests.per.connection: 5\n");
    assert_non_null(l.cfg);
    unload(&l);
    l = load(KBASE "  acks: all\n  enable.idempotence: 1\n  max.in.flight: 1\n");
    assert_non_null(l.cfg);
    unload(&l);
#undef KBASE
}

/* MongoDB's Connection String spec: user name and password MUST be
 * percent-encoded. A raw '@', '?' or '/' is refused without echoing the
 * secret; the redactor hides the whole user info whatever it contains. */
static void test_userinfo_escaping(void **state)
{
    (void)state;
#define URI_YAML(u)                                                                                \
    "topic.prefix: t\nmongodb.connection.string: \"" u "\"\nsink.type: stdout\n"                   \
    "offsets.file.path: x\n"
    struct loaded l = load(URI_YAML("mongodb://u:Pa?ss14@127.0.0.1:1/?replicaSet=rs0"));
    assert_null(l.cfg);
    assert_non_null(strstr(l.diag, ":2:28: mongodb.connection.string: the password contains an "
                                   "unescaped '?' (expected the user name and password "
                                   "percent-encoded, '?' as %3F)"));
    assert_null(strstr(l.diag, "Pa"));
    assert_null(strstr(l.diag, "ss14"));
    unload(&l);
    l = load(URI_YAML("mongodb://u:Pa@ss1@127.0.0.1:1/?replicaSet=rs0"));
    assert_null(l.cfg);
    assert_non_null(strstr(l.diag, "the password contains an unescaped '@' (expected the user "
                                   "name and password percent-encoded, '@' as %40)"));
    assert_null(strstr(l.diag, "ss1"));
    unload(&l);
    l = load(URI_YAML("mongodb://u:a/b@127.0.0.1:1/?replicaSet=rs0"));
    assert_null(l.cfg);
    assert_non_null(strstr(l.diag, "the password contains an unescaped '/'"));
    unload(&l);
    l = load(URI_YAML("mongodb://u@x:p@127.0.0.1:1/?replicaSet=rs0"));
    assert_null(l.cfg);
    assert_non_null(strstr(l.diag, "the user name contains an unescaped '@'"));
    unload(&l);
    /* Percent-encoded, it is valid; an '@' in the options is not user info. */
    l = load(URI_YAML("mongodb://u:Pa%40ss1@127.0.0.1:1/?replicaSet=rs0&appname=a@b"));
    assert_non_null(l.cfg);
    assert_string_equal(l.diag, "");
    char out[256];
    config_redact_uri(l.cfg->connection_string, out, sizeof out);
    assert_string_equal(out, "mongodb://u:****@127.0.0.1:1/?replicaSet=rs0&appname=a@b");
    /* Driver messages: the password as written and decoded, and any user info. */
    char *t = config_redact_text("auth failed for Pa@ss1 (Pa%40ss1) at "
                                 "mongodb://u:Pa%40ss1@127.0.0.1:1/ and u:other@h",
                                 l.cfg->connection_string);
    assert_string_equal(t, "auth failed for **** (****) at mongodb://u:****@127.0.0.1:1/ and "
                           "u:****@h");
    free(t);
    unload(&l);
#undef URI_YAML

    /* The redactor on strings --validate refuses (never run, but logged by
     * anything that gets them): everything up to the last '@' before the
     * host list is hidden, as is any piece a driver split off. */
    char out2[256];
    config_redact_uri("mongodb://u:Pa?ss14@127.0.0.1:1/?replicaSet=rs0", out2, sizeof out2);
    assert_string_equal(out2, "mongodb://u:****@127.0.0.1:1/?replicaSet=rs0");
    config_redact_uri("mongodb://u:Pa@ss1@127.0.0.1:1/?replicaSet=rs0", out2, sizeof out2);
    assert_string_equal(out2, "mongodb://u:****@127.0.0.1:1/?replicaSet=rs0");
    config_redact_uri("mongodb://u:a@b/c?d@h1,h2:2/db?authSource=x", out2, sizeof out2);
    assert_string_equal(out2, "mongodb://u:****@h1,h2:2/db?authSource=x");
    config_redact_uri("mongodb://u:p@h/?appname=a@b&tlsCertificateKeyFilePassword=k", out2,
                      sizeof out2);
    assert_string_equal(out2, "mongodb://u:****@h/?appname=a@b&tlsCertificateKeyFilePassword=****");
    config_redact_uri("mongodb://u:p4ss@/tmp/mongodb-27017.sock/?w=1", out2, sizeof out2);
    assert_string_equal(out2, "mongodb://u:****@/tmp/mongodb-27017.sock/?w=1");
    const char *uri = "mongodb://u:Pa@ss1@127.0.0.1:1/?replicaSet=rs0";
    t = config_redact_text("No suitable servers found: [Failed to resolve 'ss1@127.0.0.1'] "
                           "uri mongodb://u:Pa@ss1@127.0.0.1:1/ user u:Pa@ss1@127.0.0.1",
                           uri);
    assert_null(strstr(t, "Pa@ss1"));
    assert_non_null(strstr(t, "mongodb://u:****@127.0.0.1:1/"));
    assert_non_null(strstr(t, "user u:****@127.0.0.1"));
    free(t);
    t = config_redact_text("user u:Pa@ss1@127.0.0.1 before mongodb://h/", uri);
    assert_string_equal(t, "user u:****@127.0.0.1 before mongodb://h/");
    free(t);
    t = config_redact_text("mongodb://x:Pa?ss14@h:1/?replicaSet=rs0", NULL);
    assert_string_equal(t, "mongodb://x:****@h:1/?replicaSet=rs0");
    free(t);
    /* A short password is masked where it stands, never inside other words
     * (which would garble the message and give the password away). */
    t = config_redact_text("Overwriting previously provided value for 'authSource' at "
                           "mongodb://u:p@h:1/ (p, 'u:p@h2') p",
                           "mongodb://u:p@h:1/?replicaSet=rs0");
    assert_string_equal(t, "Overwriting previously provided value for 'authSource' at "
                           "mongodb://u:****@h:1/ (p, 'u:****@h2') p");
    free(t);
    t = config_redact_text("bad option TLSCertificateKeyFilePassword=k&w=1 in k.pem",
                           "mongodb://h/?tlsCertificateKeyFilePassword=k");
    assert_string_equal(t, "bad option TLSCertificateKeyFilePassword=****&w=1 in k.pem");
    free(t);
    t = config_redact_text("pass 1 of 10 at 21:00, user 1 mongodb://u:1@h/", "mongodb://u:1@h/");
    assert_string_equal(t, "pass 1 of 10 at 21:00, user 1 mongodb://u:****@h/");
    free(t);
    /* A longer one is masked where it stands alone, not inside a word. */
    t = config_redact_text("auth for s3cr (s3cret, s3crs3cr) at s3cr.",
                           "mongodb://u:s3cr@h/");
    assert_string_equal(t, "auth for **** (s3cret, s3crs3cr) at ****.");
    free(t);
}

static void test_secrets(void **state)
{
    (void)state;
    char out[256];
    config_redact_uri("mongodb://u:pa55@h1,h2/?replicaSet=rs0", out, sizeof out);
    assert_string_equal(out, "mongodb://u:****@h1,h2/?replicaSet=rs0");
    config_redact_uri("mongodb+srv://u:p@ss@h/db?tlsCertificateKeyFilePassword=k3y&w=1", out,
                      sizeof out);
    assert_string_equal(out, "mongodb+srv://u:****@h/db?tlsCertificateKeyFilePassword=****&w=1");
    config_redact_uri("mongodb://h/", out, sizeof out);
    assert_string_equal(out, "mongodb://h/");
    config_redact_uri("mongodb://u:pa55@h/", out, 12);
    assert_string_equal(out, "mongodb://u");

    /* Passwords never appear in problems. */
    struct loaded l = load("topic.prefix: t\nmongodb.connection.string: "
                           "\"mongodb://u:Sesame42@/?x=1\"\nmongodb.password: ''\n"
                           "kafka: {sasl.password: Sesame42, ssl.key.password: '',"
                           " sasl.mechanism: Sesame42}\n");
    assert_null(l.cfg);
    assert_non_null(strstr(l.diag, "invalid connection string"));
    assert_non_null(strstr(l.diag, "mongodb.password: empty value"));
    assert_null(strstr(l.diag, "Sesame42\"")); /* only the non-secret sasl.mechanism may echo */
    unload(&l);

    /* mongodb.user/password/authsource and TLS fold into the URI; the URI wins. */
    l = load(BASE "mongodb.user: 'a b'\nmongodb.password: 'p@ss'\nmongodb.ssl.enabled: true\n");
    assert_non_null(l.cfg);
    assert_string_equal(l.cfg->connection_string,
                        "mongodb://a%20b:p%40ss@h1/?replicaSet=rs0&authSource=admin&tls=true");
    config_redact_uri(l.cfg->connection_string, out, sizeof out);
    assert_null(strstr(out, "p%40ss"));
    unload(&l);
    l = load("topic.prefix: t\nmongodb.connection.string: mongodb://x:y@h/?authSource=db\n"
             "sink.type: stdout\noffsets.file.path: x\nmongodb.user: other\n");
    assert_non_null(l.cfg);
    assert_string_equal(l.cfg->connection_string, "mongodb://x:y@h/?authSource=db");
    unload(&l);
    /* The URI's authSource with mongodb.user/password (CONFIGURATION.md): the
     * credentials fold in, the URI's authSource stays the only one, whatever
     * mongodb.authsource says. */
    l = load("topic.prefix: t\nmongodb.connection.string: "
             "mongodb://h/?replicaSet=rs0&authSource=users\nsink.type: stdout\n"
             "offsets.file.path: x\nmongodb.user: u\nmongodb.password: pw\n"
             "mongodb.authsource: other\n");
    assert_non_null(l.cfg);
    assert_string_equal(l.diag, "");
    assert_string_equal(l.cfg->connection_string,
                        "mongodb://u:pw@h/?replicaSet=rs0&authSource=users");
    unload(&l);
}

/* cursor.oversize.*: Debezium's enum and threshold (skip needs a threshold
 * > 0, MongoDbConnectorConfig.validateOversizeSkipThreshold); oplog capture
 * has no oversized events, so skip and split are refused with it. */
static void test_oversize_options(void **state)
{
    (void)state;
    struct loaded l = load(BASE "cursor.oversize.handling.mode: skip\n"
                                "cursor.oversize.skip.threshold: 1048576\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->oversize_mode, MCDC_OVERSIZE_SKIP);
    assert_int_equal(l.cfg->oversize_skip_threshold, 1048576);
    unload(&l);
    l = load(BASE "cursor.oversize.handling.mode: split\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->oversize_mode, MCDC_OVERSIZE_SPLIT);
    unload(&l);
    l = load(BASE);
    assert_int_equal(l.cfg->oversize_mode, MCDC_OVERSIZE_FAIL);
    unload(&l);
    assert_problem(BASE "cursor.oversize.handling.mode: skip\n",
                   "cursor.oversize.skip.threshold: invalid threshold value for skipped "
                   "document size");
    assert_problem(BASE "debezium.compatibility: \"1.9\"\ncapture.mode: oplog\n"
                        "cursor.oversize.handling.mode: split\n",
                   "F:7:1: cursor.oversize.handling.mode: has no effect in oplog capture");
}

static void test_unsupported_set(void **state)
{
    (void)state;
    struct loaded l = load(BASE "max.queue.size: 8192\nerrors.max.retries: 3\n"
                                "capture.scope: database\n");
    assert_non_null(l.cfg);
    const char *names[8];
    /* max.queue.size is set to its default: nothing to warn about. */
    assert_int_equal(config_unsupported_set(l.cfg, names, 8), 2);
    assert_string_equal(names[0], "errors.max.retries");
    assert_string_equal(names[1], "capture.scope");
    assert_int_equal(config_unsupported_set(l.cfg, names, 1), 2);
    unload(&l);
    /* oplog capture is delivered: only the unsupported property is named. */
    l = load(BASE "capture.mode: oplog\ntopic.cache.size: 10\n");
    assert_non_null(l.cfg);
    assert_int_equal(config_unsupported_set(l.cfg, names, 8), 1);
    assert_string_equal(names[0], "topic.cache.size");
    unload(&l);
}

static void test_ignored_set(void **state)
{
    (void)state;
    const char *texts[8];
    char want[160];
    /* Exactly-once-only keys with exactly-once off: loaded, and named. */
    struct loaded l = load(BASE "transaction.boundary: interval\n"
                                "transaction.boundary.interval.ms: 500\n");
    assert_non_null(l.cfg);
    assert_int_equal(config_ignored_set(l.cfg, texts, 8), 2);
    snprintf(want, sizeof want, "%s:5:1: transaction.boundary: has no effect while", l.path);
    assert_memory_equal(texts[0], want, strlen(want));
    snprintf(want, sizeof want, "%s:6:1: transaction.boundary.interval.ms: has no effect", l.path);
    assert_memory_equal(texts[1], want, strlen(want));
    assert_int_equal(config_ignored_set(l.cfg, texts, 1), 2);
    unload(&l);
    /* Nothing set: nothing named. */
    l = load(BASE);
    assert_non_null(l.cfg);
    assert_int_equal(config_ignored_set(l.cfg, texts, 8), 0);
    unload(&l);
}

static void test_syntax_error(void **state)
{
    (void)state;
    assert_problem("topic.prefix: [unclosed\n", "F:2:1: yaml: did not find expected ',' or ']'");
    assert_problem("- a\n- b\n", "F:1:1: (top level): not a map (expected a map of options)");
    assert_problem(BASE "---\ntopic.prefix: u\n",
                   "F:6:1: yaml: a second YAML document (expected one document)");
    assert_problem(BASE "log: debug\n",
                   "F:5:6: log: not a map (expected a map of log options, or dotted keys log.*)");
    struct loaded l = load(BASE "kafka:\n");
    assert_non_null(l.cfg);
    assert_int_equal(l.cfg->kafka.count, 0);
    unload(&l);
}

static char *capture(void (*print)(FILE *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    print(f);
    fclose(f);
    return buf;
}

static void test_help_lists_every_option(void **state)
{
    (void)state;
    char *help = capture(config_print_help), *md = capture(config_print_markdown);
    assert_true(mcdc_option_count > 80);
    for (size_t i = 0; i < mcdc_option_count; i++) {
        char line[256];
        snprintf(line, sizeof line, "\n  %s\n      type: ", mcdc_options[i].key);
        if (!strstr(help, line))
            fail_msg("--config-help lacks %s", mcdc_options[i].key);
        snprintf(line, sizeof line, "\n| `%s` | ", mcdc_options[i].key);
        if (!strstr(md, line))
            fail_msg("markdown lacks %s", mcdc_options[i].key);
    }
    assert_non_null(strstr(help, "  schema.name.adjustment.mode\n      type: enum: none | avro | "
                                 "avro_unicode; default: avro (1.9) / none (3.x)\n"));
    assert_non_null(strstr(help, "  mongodb.connect.timeout.ms\n      type: integer "
                                 "0..2147483647; default: 10000\n"));
    free(help);
    free(md);
}

/* Every property of debezium-format.md §7.1 (the shared format document) is
 * an option. A row's first cell may hold several names: `a.b.c` / `.d` means
 * a.b.c.d or a.b.d (both spellings occur); `x.*` stands for rows under x. */
static bool property_known(const char *first, const char *name)
{
    char full[512];
    size_t n = strlen(name);
    if (name[0] != '.') {
        if (n > 2 && strcmp(name + n - 2, ".*") == 0) {
            for (size_t i = 0; i < mcdc_option_count; i++)
                if (strncmp(mcdc_options[i].key, name, n - 1) == 0)
                    return true;
            return false;
        }
        return cfg_find_option(name) != NULL;
    }
    snprintf(full, sizeof full, "%s%s", first, name);
    if (cfg_find_option(full))
        return true;
    const char *dot = strrchr(first, '.');
    snprintf(full, sizeof full, "%.*s%s", dot ? (int)(dot - first) : 0, first, name);
    return cfg_find_option(full) != NULL;
}

static void test_every_debezium_property_accepted(void **state)
{
    (void)state;
    const char *shared = getenv("MCDC_SHARED_DIR");
    char path[1024], line[2048];
    snprintf(path, sizeof path, "%s/debezium-format.md", shared ? shared : "../shared");
    FILE *f = fopen(path, "r");
    if (!f) {
        print_message("skipped: %s not found\n", path);
        skip();
    }
    bool in71 = false;
    size_t checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "### ", 4) == 0)
            in71 = strncmp(line, "### 7.1", 7) == 0;
        if (!in71 || strncmp(line, "| `", 3) != 0)
            continue;
        char *cell_end = strchr(line + 1, '|'), first[256] = "";
        for (char *p = strchr(line, '`'); p && p < cell_end; p = strchr(p, '`')) {
            char *e = strchr(p + 1, '`');
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(e - p - 1), p + 1);
            p = e + 1;
            if (!first[0])
                snprintf(first, sizeof first, "%s", name);
            if (!property_known(first, name))
                fail_msg("Debezium property %s (row %s) is not an option", name, first);
            checked++;
        }
    }
    fclose(f);
    assert_true(checked > 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_1_9),
        cmocka_unit_test(test_defaults_3_x),
        cmocka_unit_test(test_values_set),
        cmocka_unit_test(test_type_checks),
        cmocka_unit_test(test_lists_both_forms),
        cmocka_unit_test(test_unknown_key),
        cmocka_unit_test(test_directory_and_deep_nesting),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_missing_required),
        cmocka_unit_test(test_cross_field),
        cmocka_unit_test(test_kafka_passthrough),
        cmocka_unit_test(test_secrets),
        cmocka_unit_test(test_kafka_locked),
        cmocka_unit_test(test_userinfo_escaping),
        cmocka_unit_test(test_oversize_options),
        cmocka_unit_test(test_unsupported_set),
        cmocka_unit_test(test_ignored_set),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_help_lists_every_option),
        cmocka_unit_test(test_every_debezium_property_accepted),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
