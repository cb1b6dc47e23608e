/*
 * produce_bench: the raw-produce bound of the end-to-end benchmark (issue
 * "Main job end to end", Speed). Pre-encoded ~1 KB Debezium-like records are
 * handed to the sink (sink.h, the same code path the worker uses: a malloc'd
 * key and value per record, RD_KAFKA_MSG_F_FREE, idempotent producer,
 * acks=all, bounded queue with backpressure) as fast as it accepts them, and
 * the run ends when every record is acknowledged.
 *
 *   produce_bench [--count N] [--size BYTES] [--rate PER_S] [--queue-bytes B]
 *                 [--set k=v]... [TARGET...]
 *
 * TARGET is "mock" (librdkafka's in-process mock cluster, the default) or a
 * bootstrap address such as 127.0.0.1:19092 (scripts/kafka-local.sh). One
 * result line per target: records/s, MB/s, CPU seconds per million records
 * (user+sys of the whole process, librdkafka's threads included; with the
 * mock cluster the in-process broker's CPU is included too) and peak RSS.
 * With --rate, records are paced at that rate and a second line gives the
 * produce-to-acknowledgement latency p50/p99/max (librdkafka's linger.ms,
 * default 5 ms, is part of it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "sink/sink.h"

#define POOL 4096

struct payload {
    char *key, *value;
    size_t key_len, value_len;
};

struct counts {
    uint64_t ok, failed;
    char first_err[MCDC_ERROR_MSG_SIZE];
    double *sent;    /* paced runs: send time per record (index = opaque - 1) */
    double *latency; /* paced runs: produce-to-acknowledgement seconds, by arrival */
    uint64_t n_latency;
};

static double now_s(void);

static void on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                        bool dead_lettered, void *ctx)
{
    (void)latency_us;
    (void)dead_lettered;
    struct counts *c = ctx;
    if (!err) {
        c->ok++;
        if (c->sent && opaque)
            c->latency[c->n_latency++] = now_s() - c->sent[(uintptr_t)opaque - 1];
        return;
    }
    if (c->failed++ == 0)
        snprintf(c->first_err, sizeof c->first_err, "%s", err->msg);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* A 1.9-style change event value of about `size` bytes, padded in "after". */
static void make_payloads(struct payload *p, size_t n, size_t size)
{
    uint64_t rng = 42;
    for (size_t i = 0; i < n; i++) {
        char oid[25];
        snprintf(oid, sizeof oid, "64b7%020zx", i * 2654435761u);
        p[i].key = xasprintf("{\"id\":\"{\\\"$oid\\\": \\\"%s\\\"}\"}", oid);
        p[i].key_len = strlen(p[i].key);
        char *head = xasprintf(
            "{\"after\":\"{\\\"_id\\\": {\\\"$oid\\\": \\\"%s\\\"},\\\"sku\\\": \\\"SKU-%zu\\\","
            "\\\"qty\\\": %zu,\\\"note\\\": \\\"",
            oid, i, i % 97);
        char *tail = xasprintf(
            "\\\"}\",\"patch\":null,\"filter\":null,\"source\":{\"version\":\"1.9.8.Final\","
            "\"connector\":\"mongodb\",\"name\":\"bench\",\"ts_ms\":1700000000000,\"snapshot\":"
            "\"false\",\"db\":\"shop\",\"sequence\":null,\"rs\":\"rs0\",\"collection\":\"orders\","
            "\"ord\":%zu,\"h\":null,\"tord\":null,\"stxnid\":null,\"lsid\":null,\"txnNumber\":null}"
            ","
            "\"op\":\"c\",\"ts_ms\":1700000000123,\"transaction\":null}",
            i);
        size_t fixed = strlen(head) + strlen(tail);
        size_t pad = size > fixed ? size - fixed : 0;
        p[i].value_len = fixed + pad;
        p[i].value = xmalloc(p[i].value_len + 1);
        memcpy(p[i].value, head, strlen(head));
        /* pseudo-random letters: the padding must not compress better than real data */
        for (size_t j = 0; j < pad; j++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            p[i].value[strlen(head) + j] =
                "abcdefghijklmnopqrstuvwxyz0123456789 "[(rng >> 33) % 37];
        }
        memcpy(p[i].value + strlen(head) + pad, tail, strlen(tail) + 1);
        free(head);
        free(tail);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run(const char *target, const struct payload *pool, uint64_t count, int64_t queue_bytes,
               double rate, struct mcdc_kv *extra, size_t n_extra)
{
    struct mcdc_kv kv[40];
    size_t n = 0;
    if (!strcmp(target, "mock")) {
        kv[n++] = (struct mcdc_kv){(char *)"test.mock.num.brokers", (char *)"1", 0, 0};
    } else {
        kv[n++] = (struct mcdc_kv){(char *)"bootstrap.servers", (char *)target, 0, 0};
    }
    for (size_t i = 0; i < n_extra && n < 40; i++)
        kv[n++] = extra[i];
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.path = (char *)"produce_bench";
    cfg.sink_type = MCDC_SINK_KAFKA;
    cfg.sink_queue_bytes = queue_bytes;
    cfg.kafka.items = kv;
    cfg.kafka.count = n;

    struct counts c = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "bench", on_delivery, &c, &err);
    if (!sink) {
        fprintf(stderr, "produce_bench: %s\n", err.msg);
        return 1;
    }
    char *topic = xasprintf("bench-produce-%ld-%ld", (long)getpid(), (long)time(NULL));
    /* Warm-up: connection, producer id, topic metadata. */
    struct mcdc_record rec = {.topic = topic,
                              .key = xstrdup(pool[0].key),
                              .key_len = pool[0].key_len,
                              .value = xstrdup(pool[0].value),
                              .value_len = pool[0].value_len};
    if (!sink_produce(sink, &rec, NULL, NULL, &err) || !sink_flush(sink, 30000, &err)) {
        fprintf(stderr, "produce_bench: %s: warm-up failed: %s\n", target, err.msg);
        sink_destroy(sink);
        free(topic);
        return 1;
    }
    c.ok = 0;
    if (rate > 0) {
        c.sent = xcalloc(count, sizeof *c.sent);
        c.latency = xcalloc(count, sizeof *c.latency);
    }
    uint64_t bytes = 0;
    double t0 = now_s(), c0 = cpu_s();
    for (uint64_t i = 0; i < count; i++) {
        const struct payload *p = &pool[i % POOL];
        if (rate > 0) {
            /* Paced: serve delivery reports (not sleep) until this record's slot. */
            double due = t0 + (double)i / rate, left;
            while ((left = due - now_s()) > 0)
                sink_poll(sink, left > 0.001 ? 1 : 0);
            c.sent[i] = now_s();
        }
        rec.topic = topic;
        rec.key = xmalloc(p->key_len);
        memcpy(rec.key, p->key, p->key_len);
        rec.key_len = p->key_len;
        rec.value = xmalloc(p->value_len);
        memcpy(rec.value, p->value, p->value_len);
        rec.value_len = p->value_len;
        bytes += p->key_len + p->value_len;
        if (!sink_produce(sink, &rec, (void *)(uintptr_t)(i + 1), NULL, &err)) {
            fprintf(stderr, "produce_bench: %s: %s\n", target, err.msg);
            free(rec.key);
            free(rec.value);
            break;
        }
    }
    double t_queued = now_s() - t0;
    bool flushed = sink_flush(sink, 120000, &err);
    double wall = now_s() - t0, cpu = cpu_s() - c0;
    printf("produce_bench target=%s records=%llu acked=%llu failed=%llu avg_bytes=%.0f "
           "wall_s=%.3f (queued in %.3f) records_per_s=%.0f MB_per_s=%.1f "
           "cpu_s=%.3f cpu_s_per_million=%.2f peak_rss_mb=%.1f%s\n",
           target, (unsigned long long)count, (unsigned long long)c.ok,
           (unsigned long long)c.failed, count ? (double)bytes / (double)count : 0.0, wall,
           t_queued, (double)c.ok / wall, (double)bytes / wall / 1e6, cpu,
           c.ok ? cpu / ((double)c.ok / 1e6) : 0.0, (double)peak_rss_kb() / 1024.0,
           flushed ? "" : " (flush timed out)");
    if (c.n_latency) {
        qsort(c.latency, c.n_latency, sizeof *c.latency, cmp_double);
        printf("produce_bench target=%s paced_rate=%.0f latency_ms p50=%.2f p99=%.2f max=%.2f\n",
               target, rate, c.latency[c.n_latency / 2] * 1e3,
               c.latency[(c.n_latency * 99) / 100] * 1e3, c.latency[c.n_latency - 1] * 1e3);
    }
    free(c.sent);
    free(c.latency);
    if (c.failed)
        fprintf(stderr, "produce_bench: first delivery error: %s\n", c.first_err);
    fflush(stdout);
    sink_destroy(sink);
    free(topic);
    return flushed && c.failed == 0 ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: produce_bench [--count N] [--size BYTES] [--rate PER_S] [--queue-bytes B] "
            "[--set key=value]... [mock|HOST:PORT]...\n");
}

int main(int argc, char **argv)
{
    uint64_t count = 500000;
    size_t size = 1024;
    int64_t queue_bytes = 16 * 1024 * 1024;
    double rate = 0;
    struct mcdc_kv extra[32];
    size_t n_extra = 0;
    const char *targets[16];
    size_t n_targets = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            count = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            size = strtoul(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--rate") && i + 1 < argc) {
            rate = strtod(argv[++i], NULL);
        } else if (!strcmp(argv[i], "--queue-bytes") && i + 1 < argc) {
            queue_bytes = strtoll(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc && n_extra < 32) {
            char *kvs = argv[++i], *eq = strchr(kvs, '=');
            if (!eq) {
                usage();
                return 2;
            }
            *eq = '\0';
            extra[n_extra++] = (struct mcdc_kv){kvs, eq + 1, 0, 0};
        } else if (argv[i][0] == '-') {
            usage();
            return 2;
        } else if (n_targets < 16) {
            targets[n_targets++] = argv[i];
        }
    }
    if (n_targets == 0)
        targets[n_targets++] = "mock";
    mcdc_log_set_component("bench");
    struct payload *pool = xcalloc(POOL, sizeof *pool);
    make_payloads(pool, POOL, size);
    int rc = 0;
    for (size_t t = 0; t < n_targets; t++)
        rc |= run(targets[t], pool, count, queue_bytes, rate, extra, n_extra);
    for (size_t i = 0; i < POOL; i++) {
        free(pool[i].key);
        free(pool[i].value);
    }
    free(pool);
    return rc;
}
