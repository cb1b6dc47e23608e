/* Unit tests for sink: the JSON-lines sink's exact bytes and the Kafka sink
 * against librdkafka's in-process mock cluster (delivery reports,
 * backpressure, oversize records, fatal errors, locked settings). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "sink/sink.h"
#include "sink/sink_internal.h"

/* Delivery reports seen by the callback, in order. */
struct reports {
    struct sink *sink; /* set: count dead-lettered acknowledgements */
    size_t dead_lettered;
    size_t ok, failed;
    uintptr_t order[4096];
    size_t n;
    char last_err[MCDC_ERROR_MSG_SIZE];
    int last_code;
};

static void on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                        bool dead_lettered, void *cb_ctx)
{
    (void)latency_us;
    struct reports *r = cb_ctx;
    if (r->n < sizeof r->order / sizeof r->order[0])
        r->order[r->n++] = (uintptr_t)opaque;
    if (err) {
        r->failed++;
        snprintf(r->last_err, sizeof r->last_err, "%s", err->msg);
        r->last_code = err->code;
    } else {
        r->ok++;
        if (dead_lettered)
            r->dead_lettered++;
    }
}

static void record(struct mcdc_record *rec, const char *topic, const char *key, const char *value)
{
    rec->topic = topic;
    rec->key = key ? xstrdup(key) : NULL;
    rec->key_len = key ? strlen(key) : 0;
    rec->value = value ? xstrdup(value) : NULL;
    rec->value_len = value ? strlen(value) : 0;
    rec->headers = NULL;
    rec->header_count = 0;
    rec->ns = rec->id = NULL;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = xcalloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- JSON lines ---- */

static void sink_lines_writes_exact_bytes_and_null_tombstone(void **state)
{
    (void)state;
    char path[] = "/tmp/mcdc-sink-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "previous\n", 9), 9); /* opened for append */
    close(fd);
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sink_type = MCDC_SINK_FILE;
    cfg.sink_path = path;
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    struct mcdc_record rec;
    record(&rec, "shop.inv.\"odd\"", "{\"id\":\"{\\\"$oid\\\": \\\"5f\\\"}\"}",
           "{\"after\":\"{}\",\"op\":\"c\"}");
    assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err));
    assert_null(rec.key);
    assert_null(rec.value);
    static const struct mcdc_header hdrs[] = {{"__debezium.context.taskId", "0"},
                                              {"a\"b", "c\\d"}};
    record(&rec, "shop.inv", "{\"id\":\"7\"}", NULL);
    rec.headers = hdrs;
    rec.header_count = 2;
    assert_true(sink_produce(sink, &rec, (void *)2, NULL, &err));
    assert_int_equal(sink_in_flight(sink), 2);
    assert_int_equal(sink_poll(sink, 0), 2);
    assert_int_equal(sink_in_flight(sink), 0);
    assert_int_equal(r.ok, 2);
    assert_int_equal(r.order[0], 1);
    assert_int_equal(r.order[1], 2);
    assert_true(sink_flush(sink, 1000, &err));
    sink_destroy(sink);
    char *text = slurp(path);
    assert_string_equal(text,
                        "previous\n"
                        "{\"topic\": \"shop.inv.\\\"odd\\\"\", \"key\": "
                        "{\"id\":\"{\\\"$oid\\\": \\\"5f\\\"}\"}, \"value\": "
                        "{\"after\":\"{}\",\"op\":\"c\"}}\n"
                        "{\"topic\": \"shop.inv\", \"key\": {\"id\":\"7\"}, \"value\": null, "
                        "\"headers\": {\"__debezium.context.taskId\": \"0\", \"a\\\"b\": "
                        "\"c\\\\d\"}}\n");
    free(text);
    unlink(path);
}

static void sink_lines_batches_are_written_before_reports(void **state)
{
    (void)state;
    char path[] = "/tmp/mcdc-sink-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sink_type = MCDC_SINK_FILE;
    cfg.sink_path = path;
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "rs0", on_delivery, &r, &err);
    char value[1001];
    memset(value, 'v', 1000);
    value[0] = '"';
    value[999] = '"';
    value[1000] = '\0';
    for (uintptr_t i = 1; i <= 200; i++) { /* ~200 KB: several 64 KiB batches */
        struct mcdc_record rec;
        record(&rec, "t", "{\"id\":\"k\"}", value);
        assert_true(sink_produce(sink, &rec, (void *)i, NULL, &err));
        if (r.ok > 0) { /* whatever was reported is in the file already */
            char *text = slurp(path);
            size_t lines = 0;
            for (char *p = text; *p; p++)
                lines += *p == '\n';
            assert_true(lines >= r.ok);
            free(text);
        }
    }
    assert_true(r.ok > 0 && r.ok < 200);
    assert_true(sink_flush(sink, 1000, &err));
    assert_int_equal(r.ok, 200);
    for (size_t i = 0; i < 200; i++)
        assert_int_equal(r.order[i], i + 1);
    sink_destroy(sink);
    unlink(path);
}

/* Lines of text: their count, and whether every one ends in '\n' and is a
 * whole record ({...}). */
static size_t whole_lines(const char *text)
{
    size_t n = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* no partial line at the end */
        assert_true(p[0] == '{' && nl[-1] == '}');
        n++;
        p = nl + 1;
    }
    return n;
}

/*
 * A write that stops part-way (here the file-size limit, RLIMIT_FSIZE, which
 * gives a short write and then EFBIG, as a full disk gives a short write and
 * then ENOSPC): the records written in full are acknowledged, the torn one
 * and every later one fail, and the file is cut back to whole lines.
 */
static void sink_lines_torn_write_is_cut_back(void **state)
{
    (void)state;
    char path[] = "/tmp/mcdc-sink-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sink_type = MCDC_SINK_FILE;
    cfg.sink_path = path;
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);

    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit lim = {10000, old.rlim_max};
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char value[301];
    memset(value, 'v', 300);
    value[0] = '"';
    value[299] = '"';
    value[300] = '\0';
    for (uintptr_t i = 1; i <= 100; i++) { /* ~33 KB, one batch */
        struct mcdc_record rec;
        record(&rec, "t", "{\"id\":\"k\"}", value);
        assert_true(sink_produce(sink, &rec, (void *)i, NULL, &err));
    }
    assert_int_equal(sink_poll(sink, 0), 100);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);

    assert_true(r.ok > 0 && r.ok < 100);
    assert_int_equal(r.ok + r.failed, 100);
    assert_int_equal(r.last_code, EFBIG);
    for (size_t i = 0; i < r.ok; i++) /* the acknowledged ones come first, in order */
        assert_int_equal(r.order[i], i + 1);
    char *text = slurp(path);
    assert_int_equal(whole_lines(text), r.ok);
    free(text);

    /* Every later record fails at once, reported through the callback. */
    struct mcdc_record rec;
    record(&rec, "t", "{\"id\":\"k\"}", "1");
    size_t failed = r.failed;
    assert_true(sink_produce(sink, &rec, (void *)101, NULL, &err));
    assert_null(rec.key);
    assert_int_equal(r.failed, failed + 1);
    assert_int_equal(sink_in_flight(sink), 0);
    assert_false(sink_flush(sink, 1000, &err));
    assert_int_equal(err.code, EFBIG);
    sink_destroy(sink);
    unlink(path);
}

/* A file that ends in a partial line (a crash or a full disk mid-write) is
 * cut back to its last whole line when the sink opens it; one with no whole
 * line is emptied. */
static void sink_lines_open_cuts_a_partial_last_line(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"{\"a\": 1}\n{\"b\": 2}\n{\"topic\": \"t\", \"ke", "{\"a\": 1}\n{\"b\": 2}\n"},
        {"{\"topic\": \"t\", \"ke", ""},
        {"{\"a\": 1}\n", "{\"a\": 1}\n"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char path[] = "/tmp/mcdc-sink-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, cases[c][0], strlen(cases[c][0])), (ssize_t)strlen(cases[c][0]));
        close(fd);
        struct mcdc_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.sink_type = MCDC_SINK_FILE;
        cfg.sink_path = path;
        struct reports r = {0};
        struct mcdc_error err = MCDC_ERROR_INIT;
        struct sink *sink = sink_new(&cfg, "rs0", on_delivery, &r, &err);
        assert_non_null(sink);
        char *text = slurp(path);
        assert_string_equal(text, cases[c][1]);
        free(text);
        struct mcdc_record rec;
        record(&rec, "t", "{\"id\":\"k\"}", NULL);
        assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err));
        assert_true(sink_flush(sink, 1000, &err));
        sink_destroy(sink);
        text = slurp(path);
        size_t want = strlen(cases[c][1]);
        assert_memory_equal(text, cases[c][1], want);
        assert_string_equal(text + want,
                            "{\"topic\": \"t\", \"key\": {\"id\":\"k\"}, \"value\": null}\n");
        free(text);
        unlink(path);
    }
}

/* Several tasks' sinks on one stdout pipe (a sharded cluster, one task per
 * shard): batches over PIPE_BUF would interleave mid-line without the sinks'
 * shared write lock. Every line read back is whole. */
struct pipe_writer {
    size_t n;
    char tag;
};

static void *pipe_writer_main(void *arg)
{
    struct pipe_writer *pw = arg;
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sink_type = MCDC_SINK_STDOUT;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "rs", NULL, NULL, &err);
    assert_non_null(sink);
    char value[4001];
    memset(value, pw->tag, 4000);
    value[0] = '"';
    value[3999] = '"';
    value[4000] = '\0';
    for (size_t i = 0; i < pw->n; i++) {
        struct mcdc_record rec;
        record(&rec, "t", "{\"id\":\"k\"}", value);
        assert_true(sink_produce(sink, &rec, NULL, NULL, &err));
    }
    assert_true(sink_flush(sink, 1000, &err));
    sink_destroy(sink);
    return NULL;
}

struct pipe_reader {
    int fd;
    char *buf;
    size_t len, cap;
};

static void *pipe_reader_main(void *arg)
{
    struct pipe_reader *pr = arg;
    for (;;) {
        if (pr->len + 65536 > pr->cap) {
            pr->cap = pr->cap ? pr->cap * 2 : 1 << 20;
            pr->buf = xrealloc(pr->buf, pr->cap);
        }
        ssize_t n = read(pr->fd, pr->buf + pr->len, 65536);
        if (n <= 0)
            break;
        pr->len += (size_t)n;
        struct timespec ts = {0, 200000}; /* a slow reader: the pipe fills, writes go in pieces */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void sink_lines_tasks_sharing_stdout_never_interleave(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(p[1], STDOUT_FILENO), STDOUT_FILENO);
    close(p[1]);
    struct pipe_reader pr = {p[0], NULL, 0, 0};
    pthread_t rt, wt[3];
    struct pipe_writer pw[3] = {{300, 'a'}, {300, 'b'}, {300, 'c'}};
    assert_int_equal(pthread_create(&rt, NULL, pipe_reader_main, &pr), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&wt[i], NULL, pipe_writer_main, &pw[i]), 0);
    for (int i = 0; i < 3; i++)
        pthread_join(wt[i], NULL);
    assert_int_equal(dup2(saved, STDOUT_FILENO), STDOUT_FILENO); /* closes the write end */
    close(saved);
    pthread_join(rt, NULL);
    close(p[0]);
    size_t lines = 0;
    for (size_t at = 0; at < pr.len;) {
        char *nl = memchr(pr.buf + at, '\n', pr.len - at);
        assert_non_null(nl);
        size_t n = (size_t)(nl - (pr.buf + at));
        assert_true(n > 4000);
        const char *v = strstr(pr.buf + at, "\"value\": \"");
        assert_non_null(v);
        char tag = v[10]; /* after `"value": "` */
        for (const char *q = v + 10; q < v + 10 + 3998; q++)
            if (*q != tag)
                fail_msg("line %zu mixes two tasks' records", lines);
        lines++;
        at += n + 1;
    }
    assert_int_equal(lines, 900);
    free(pr.buf);
}

static void sink_lines_needs_a_path(void **state)
{
    (void)state;
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sink_type = MCDC_SINK_FILE;
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_null(sink_new(&cfg, "rs0", on_delivery, NULL, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
    cfg.sink_path = (char *)"/nonexistent-mcdc-dir/out.jsonl";
    assert_null(sink_new(&cfg, "rs0", on_delivery, NULL, &err));
    assert_int_equal(err.domain, MCDC_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent-mcdc-dir/out.jsonl"));
}

/* ---- Kafka (mock cluster) ---- */

struct mock {
    rd_kafka_t *host;
    rd_kafka_mock_cluster_t *mc;
    struct mcdc_kv kv[8];
    struct mcdc_config cfg;
};

/* A mock cluster the test controls (broker up/down); the sink reaches it
 * through bootstrap.servers, like a real broker. */
static void mock_start(struct mock *m)
{
    char errstr[256];
    memset(m, 0, sizeof *m);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "2", errstr, sizeof errstr);
    m->host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    assert_non_null(m->host);
    m->mc = rd_kafka_mock_cluster_new(m->host, 1);
    assert_non_null(m->mc);
    m->cfg.path = (char *)"test.yaml";
    m->cfg.sink_type = MCDC_SINK_KAFKA;
    m->cfg.kafka.items = m->kv;
    m->kv[0] = (struct mcdc_kv){(char *)"bootstrap.servers",
                                (char *)rd_kafka_mock_cluster_bootstraps(m->mc), 3, 3};
    m->kv[1] = (struct mcdc_kv){(char *)"log_level", (char *)"2", 4, 3};
    m->cfg.kafka.count = 2;
}

static void mock_set(struct mock *m, const char *k, const char *v, int line)
{
    m->kv[m->cfg.kafka.count++] = (struct mcdc_kv){(char *)k, (char *)v, line, 3};
}

static void mock_stop(struct mock *m)
{
    rd_kafka_mock_cluster_destroy(m->mc);
    rd_kafka_destroy(m->host);
}

static void sink_kafka_produce_and_delivery_reports(void **state)
{
    (void)state;
    struct mock m;
    mock_start(&m);
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    assert_non_null(sink_kafka_handle(sink));
    for (uintptr_t i = 1; i <= 300; i++) {
        struct mcdc_record rec;
        char key[32];
        snprintf(key, sizeof key, "{\"id\":\"%u\"}", (unsigned)(i % 7));
        record(&rec, i % 2 ? "shop.a" : "shop.b", key, i % 5 ? "{\"op\":\"c\"}" : NULL);
        assert_true(sink_produce(sink, &rec, (void *)i, NULL, &err));
    }
    assert_true(sink_flush(sink, 10000, &err));
    assert_int_equal(r.ok, 300);
    assert_int_equal(r.failed, 0);
    assert_int_equal(sink_in_flight(sink), 0);
    assert_false(sink_fatal(sink, &err));
    sink_destroy(sink);

    /* The records are on the (mock) broker with their keys and tombstones. */
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(m.mc), errstr,
                      sizeof errstr);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    int64_t lo = -1, hi = -1, total = 0;
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, "shop.a", NULL);
    assert_int_equal(rd_kafka_metadata(c, 0, rkt, &md, 5000), 0);
    for (int p = 0; p < md->topics[0].partition_cnt; p++) {
        assert_int_equal(rd_kafka_query_watermark_offsets(c, "shop.a", p, &lo, &hi, 5000), 0);
        total += hi - lo;
    }
    assert_int_equal(total, 150);
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(c);
    mock_stop(&m);
}

/* Debezium 3.3+ context headers reach the broker as string headers in order,
 * on data records and tombstones alike (debezium-format.md §1.6, §1.7). */
static void sink_kafka_record_headers_reach_the_broker(void **state)
{
    (void)state;
    static const struct mcdc_header hdrs[] = {
        {"__debezium.context.connectorLogicalName", "shop"},
        {"__debezium.context.taskId", "0"},
        {"__debezium.context.connectorName", "mongodb"},
        {"__debezium.context.runId", "0b6f1e0c-3d7a-4c1e-9a52-6f1d2f9b8e11"},
    };
    struct mock m;
    mock_start(&m);
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    struct mcdc_record rec;
    record(&rec, "shop.h", "{\"id\":\"1\"}", "{\"op\":\"d\"}");
    rec.headers = hdrs;
    rec.header_count = 4;
    assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err));
    record(&rec, "shop.h", "{\"id\":\"1\"}", NULL);
    rec.headers = hdrs;
    rec.header_count = 4;
    assert_true(sink_produce(sink, &rec, (void *)2, NULL, &err));
    assert_true(sink_flush(sink, 10000, &err));
    assert_int_equal(r.ok, 2);
    sink_destroy(sink);

    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", rd_kafka_mock_cluster_bootstraps(m.mc), errstr,
                      sizeof errstr);
    rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    assert_non_null(c);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(c, "shop.h", NULL);
    const struct rd_kafka_metadata *md;
    assert_int_equal(rd_kafka_metadata(c, 0, rkt, &md, 5000), 0);
    int parts = md->topics[0].partition_cnt, got = 0;
    rd_kafka_metadata_destroy(md);
    for (int p = 0; p < parts; p++)
        assert_int_equal(rd_kafka_consume_start(rkt, p, RD_KAFKA_OFFSET_BEGINNING), 0);
    for (int tries = 0; got < 2 && tries < 100; tries++) {
        for (int p = 0; p < parts && got < 2; p++) {
            rd_kafka_message_t *msg = rd_kafka_consume(rkt, p, 50);
            if (msg == NULL)
                continue;
            if (msg->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
                rd_kafka_headers_t *h = NULL;
                assert_int_equal(rd_kafka_message_headers(msg, &h), 0);
                assert_int_equal(rd_kafka_header_cnt(h), 4);
                for (size_t i = 0; i < 4; i++) {
                    const char *name;
                    const void *val;
                    size_t len;
                    assert_int_equal(rd_kafka_header_get_all(h, i, &name, &val, &len), 0);
                    assert_string_equal(name, hdrs[i].name);
                    assert_int_equal(len, strlen(hdrs[i].value));
                    assert_memory_equal(val, hdrs[i].value, len);
                }
                assert_int_equal(msg->len, got == 0 ? strlen("{\"op\":\"d\"}") : 0);
                got++;
            }
            rd_kafka_message_destroy(msg);
        }
    }
    assert_int_equal(got, 2);
    for (int p = 0; p < parts; p++)
        rd_kafka_consume_stop(rkt, p);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(c);
    mock_stop(&m);
}

struct delayed_up {
    rd_kafka_mock_cluster_t *mc;
    int delay_ms;
};

static void *broker_up_later(void *arg)
{
    struct delayed_up *d = arg;
    struct timespec ts = {d->delay_ms / 1000, (long)(d->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    rd_kafka_mock_broker_set_up(d->mc, 1);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A 4 KiB queue and the broker down: produce blocks (backpressure) instead of
 * failing; the stop flag ends the wait with a retriable error and the record
 * untouched; once the broker is back every record is delivered, in order. */
static void sink_kafka_backpressure_with_tiny_queue(void **state)
{
    (void)state;
    struct mock m;
    mock_start(&m);
    m.cfg.sink_queue_bytes = 4096;
    mock_set(&m, "linger.ms", "0", 5);
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    struct mcdc_record rec;
    record(&rec, "bp", "{\"id\":\"0\"}", "{}");
    assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err));
    assert_true(sink_flush(sink, 10000, &err)); /* connected, producer id obtained */
    rd_kafka_mock_broker_set_down(m.mc, 1);

    char value[1025];
    memset(value, 'x', 1024);
    value[0] = value[1023] = '"';
    value[1024] = '\0';
    atomic_bool stop;
    uintptr_t next = 2;
    int queued = 0;
    /* Fill the queue until a produce would block: with stop set it returns at once. */
    atomic_init(&stop, true);
    for (;;) {
        record(&rec, "bp", "{\"id\":\"1\"}", value);
        if (!sink_produce(sink, &rec, (void *)next, &stop, &err))
            break;
        next++;
        queued++;
        assert_true(queued < 100);
    }
    assert_true(queued >= 2);
    assert_true(err.retriable);
    assert_non_null(strstr(err.msg, "stopped"));
    assert_non_null(rec.key); /* still the caller's */
    assert_non_null(rec.value);
    free(rec.key);
    free(rec.value);

    /* Now wait for real: the broker comes back after 700 ms. */
    stop = false;
    pthread_t th;
    struct delayed_up d = {m.mc, 700};
    pthread_create(&th, NULL, broker_up_later, &d);
    double t0 = now_s();
    for (int i = 0; i < 20; i++) {
        record(&rec, "bp", "{\"id\":\"1\"}", value);
        assert_true(sink_produce(sink, &rec, (void *)next, &stop, &err));
        next++;
    }
    double waited = now_s() - t0;
    pthread_join(th, NULL);
    assert_true(waited > 0.5);
    assert_true(sink_flush(sink, 15000, &err));
    assert_int_equal(r.failed, 0);
    assert_int_equal(r.ok, next - 1);
    for (size_t i = 0; i < r.n; i++)
        assert_int_equal(r.order[i], i + 1); /* one partition: in order */
    sink_destroy(sink);
    mock_stop(&m);
}

static void sink_kafka_oversize_record_names_key_and_size(void **state)
{
    (void)state;
    struct mock m;
    mock_start(&m);
    mock_set(&m, "message.max.bytes", "1000", 5);
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    char *big = xmalloc(5001);
    memset(big, 'b', 5000);
    big[5000] = '\0';
    struct mcdc_record rec;
    record(&rec, "shop.big", "{\"id\":\"{\\\"$oid\\\": \\\"64b7\\\"}\"}", big);
    assert_false(sink_produce(sink, &rec, (void *)1, NULL, &err));
    assert_int_equal(err.domain, MCDC_ERR_KAFKA);
    assert_int_equal(err.code, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    assert_non_null(strstr(err.msg, "shop.big"));
    assert_non_null(strstr(err.msg, "{\"id\":\"{\\\"$oid\\\": \\\"64b7\\\"}\"}"));
    assert_non_null(strstr(err.msg, "record of 5029 bytes too large"));
    assert_non_null(rec.value); /* not dropped: still the caller's */
    free(rec.key);
    free(rec.value);

    /* A long key and topic: cut, each named once, and the advice still whole. */
    char long_key[301], long_topic[201];
    memset(long_key, 'k', 300);
    long_key[300] = '\0';
    memset(long_topic, 't', 200);
    long_topic[200] = '\0';
    record(&rec, long_topic, long_key, big);
    err = (struct mcdc_error)MCDC_ERROR_INIT;
    assert_false(sink_produce(sink, &rec, (void *)1, NULL, &err));
    assert_int_equal(err.code, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    assert_non_null(strstr(err.msg, "record of 5300 bytes too large"));
    assert_non_null(strstr(err.msg, "raise message.max.bytes on producer and broker, or "
                                    "exclude fields"));
    const char *k1 = strstr(err.msg, "kkkk");
    assert_non_null(k1);
    assert_null(strstr(k1 + 60, "kkkk")); /* the key once, cut */
    free(rec.key);
    free(rec.value);
    free(big);
    assert_int_equal(sink_in_flight(sink), 0);

    /* The broker refuses it (its limit is lower): the delivery report carries it. */
    record(&rec, "shop.big", "{\"id\":\"42\"}", "{\"op\":\"c\"}");
    assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err)); /* warm up: topic known */
    assert_true(sink_flush(sink, 10000, &err));
    rd_kafka_mock_push_request_errors(m.mc, 0 /* Produce */, 1,
                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    record(&rec, "shop.big", "{\"id\":\"43\"}", "{\"op\":\"u\"}");
    assert_true(sink_produce(sink, &rec, (void *)2, NULL, &err));
    sink_flush(sink, 10000, &err);
    assert_int_equal(r.failed, 1);
    assert_int_equal(r.order[1], 2);
    assert_int_equal(r.last_code, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    assert_non_null(strstr(r.last_err, "refused by the broker"));
    assert_non_null(strstr(r.last_err, "key {\"id\":\"43\"}"));
    assert_non_null(strstr(r.last_err, "topic shop.big"));
    sink_destroy(sink);
    mock_stop(&m);
}

/* errors.deadletterqueue.topic.name: a too-large record, refused at produce
 * or in the delivery report, is acknowledged once its copy in the
 * dead-letter topic is; the other records are acknowledged as usual. */
static void sink_kafka_too_large_goes_to_the_dead_letter_topic(void **state)
{
    (void)state;
    struct mock m;
    mock_start(&m);
    mock_set(&m, "message.max.bytes", "1000", 5);
    m.cfg.dlq_topic = (char *)"shop.dlq";
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    r.sink = sink;
    char *big = xmalloc(5001);
    memset(big, 'b', 5000);
    big[5000] = '\0';
    struct mcdc_record rec;
    record(&rec, "shop.big", "{\"id\":\"1\"}", "{\"op\":\"c\"}");
    assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err));
    record(&rec, "shop.big", "{\"id\":\"2\"}", big);
    rec.ns = "shop.big";
    rec.id = "{ \"_id\" : \"2\" }";
    assert_true(sink_produce(sink, &rec, (void *)2, NULL, &err)); /* metadata only */
    assert_null(rec.key);
    assert_null(rec.value);
    assert_true(sink_flush(sink, 10000, &err));
    /* The broker refuses the next one: its copy (with the value) stands for it. */
    rd_kafka_mock_push_request_errors(m.mc, 0 /* Produce */, 1,
                                      RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
    record(&rec, "shop.big", "{\"id\":\"3\"}", "{\"op\":\"u\"}");
    assert_true(sink_produce(sink, &rec, (void *)3, NULL, &err));
    assert_true(sink_flush(sink, 10000, &err));
    record(&rec, "shop.big", "{\"id\":\"4\"}", "{\"op\":\"d\"}");
    assert_true(sink_produce(sink, &rec, (void *)4, NULL, &err));
    assert_true(sink_flush(sink, 10000, &err));
    assert_int_equal(r.failed, 0);
    assert_int_equal(r.ok, 4);
    assert_int_equal(r.dead_lettered, 2);
    /* Each reported once; across topics the reports may come in any order
     * (the worker's in-flight tracker restores it for the offsets). */
    uintptr_t seen = 0;
    for (size_t i = 0; i < r.n; i++)
        seen |= (uintptr_t)1 << r.order[i];
    assert_int_equal(r.n, 4);
    assert_int_equal(seen, 0x1e);
    assert_int_equal(sink_in_flight(sink), 0);
    free(big);
    sink_destroy(sink);
    mock_stop(&m);
}

static void sink_kafka_fatal_error_is_reported(void **state)
{
    (void)state;
    char logpath[] = "/tmp/mcdc-sink-log-XXXXXX";
    int lfd = mkstemp(logpath);
    assert_true(lfd >= 0);
    close(lfd);
    struct mcdc_error lerr = MCDC_ERROR_INIT;
    assert_true(mcdc_log_open(MCDC_LOG_INFO, MCDC_LOG_FORMAT_JSON, logpath, &lerr));
    struct mock m;
    mock_start(&m);
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    assert_false(sink_fatal(sink, &err));
    rd_kafka_t *rk = sink_kafka_handle(sink);
    assert_int_equal(rd_kafka_test_fatal_error(rk, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                                               "injected by test"),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    sink_poll(sink, 100);
    assert_true(sink_fatal(sink, &err));
    assert_int_equal(err.code, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_non_null(strstr(err.msg, "injected by test"));
    struct mcdc_record rec;
    record(&rec, "t", "{\"id\":\"1\"}", "{}");
    memset(&err, 0, sizeof err);
    assert_false(sink_produce(sink, &rec, (void *)1, NULL, &err));
    assert_non_null(strstr(err.msg, "fatal"));
    free(rec.key);
    free(rec.value);
    sink_destroy(sink);
    mock_stop(&m);
    mcdc_log_close();
    /* librdkafka's own FATAL line went through the project log. */
    char *log = slurp(logpath);
    assert_non_null(strstr(log, "\"component\":\"rdkafka\""));
    assert_non_null(strstr(log, "injected by test"));
    free(log);
    unlink(logpath);
}

/* Destroy does not wait for records a down broker will never take, and
 * reports nothing after it returns. */
static void sink_kafka_destroy_with_broker_down_is_prompt(void **state)
{
    (void)state;
    struct mock m;
    mock_start(&m);
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    struct mcdc_record rec;
    record(&rec, "down", "{\"id\":\"0\"}", "{}");
    assert_true(sink_produce(sink, &rec, (void *)1, NULL, &err));
    assert_true(sink_flush(sink, 10000, &err));
    rd_kafka_mock_broker_set_down(m.mc, 1);
    for (uintptr_t i = 2; i < 50; i++) {
        record(&rec, "down", "{\"id\":\"1\"}", "{}");
        assert_true(sink_produce(sink, &rec, (void *)i, NULL, &err));
    }
    assert_false(sink_flush(sink, 300, &err)); /* bounded: times out */
    assert_true(err.retriable);
    assert_non_null(strstr(err.msg, "not acknowledged"));
    assert_int_equal(sink_in_flight(sink), 48);
    size_t before = r.n;
    double t0 = now_s();
    sink_destroy(sink);
    assert_true(now_s() - t0 < 5.0);
    assert_int_equal(r.n, before);
    mock_stop(&m);
}

static void sink_kafka_locked_settings_and_bad_keys_are_config_errors(void **state)
{
    (void)state;
    struct mock m;
    mock_start(&m);
    mock_set(&m, "enable.idempotence", "false", 9);
    struct mcdc_error err = MCDC_ERROR_INIT;
    assert_null(sink_new(&m.cfg, "rs0", on_delivery, NULL, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "test.yaml:9:3: kafka.enable.idempotence"));
    m.kv[2] = (struct mcdc_kv){(char *)"acks", (char *)"1", 10, 3};
    assert_null(sink_new(&m.cfg, "rs0", on_delivery, NULL, &err));
    assert_non_null(strstr(err.msg, "test.yaml:10:3: kafka.acks"));
    m.kv[2] = (struct mcdc_kv){(char *)"no.such.property", (char *)"1", 11, 3};
    assert_null(sink_new(&m.cfg, "rs0", on_delivery, NULL, &err));
    assert_non_null(strstr(err.msg, "test.yaml:11:3: kafka.no.such.property"));
    m.kv[2] = (struct mcdc_kv){(char *)"acks", (char *)"-1", 12, 3}; /* same as all: fine */
    struct sink *sink = sink_new(&m.cfg, "rs0", on_delivery, NULL, &err);
    assert_non_null(sink);
    sink_destroy(sink);
    mock_stop(&m);
}

/* test.mock.num.brokers in the kafka: map: the producer runs its own mock cluster. */
static void sink_kafka_inline_mock_cluster(void **state)
{
    (void)state;
    struct mcdc_kv kv[2] = {{(char *)"test.mock.num.brokers", (char *)"1", 1, 1},
                            {(char *)"log_level", (char *)"2", 2, 1}};
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.kafka.items = kv;
    cfg.kafka.count = 2;
    struct reports r = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "rs0", on_delivery, &r, &err);
    assert_non_null(sink);
    for (uintptr_t i = 1; i <= 10; i++) {
        struct mcdc_record rec;
        record(&rec, "m", "{\"id\":\"1\"}", "{}");
        assert_true(sink_produce(sink, &rec, (void *)i, NULL, &err));
    }
    assert_true(sink_flush(sink, 10000, &err));
    assert_int_equal(r.ok, 10);
    sink_destroy(sink);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sink_lines_writes_exact_bytes_and_null_tombstone),
        cmocka_unit_test(sink_lines_batches_are_written_before_reports),
        cmocka_unit_test(sink_lines_needs_a_path),
        cmocka_unit_test(sink_lines_torn_write_is_cut_back),
        cmocka_unit_test(sink_lines_open_cuts_a_partial_last_line),
        cmocka_unit_test(sink_lines_tasks_sharing_stdout_never_interleave),
        cmocka_unit_test(sink_kafka_produce_and_delivery_reports),
        cmocka_unit_test(sink_kafka_record_headers_reach_the_broker),
        cmocka_unit_test(sink_kafka_backpressure_with_tiny_queue),
        cmocka_unit_test(sink_kafka_oversize_record_names_key_and_size),
        cmocka_unit_test(sink_kafka_too_large_goes_to_the_dead_letter_topic),
        cmocka_unit_test(sink_kafka_fatal_error_is_reported),
        cmocka_unit_test(sink_kafka_destroy_with_broker_down_is_prompt),
        cmocka_unit_test(sink_kafka_locked_settings_and_bad_keys_are_config_errors),
        cmocka_unit_test(sink_kafka_inline_mock_cluster),
    };
    return cmocka_run_group_tests_name("sink", tests, NULL, NULL);
}
