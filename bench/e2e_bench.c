/*
 * e2e_bench: the end-to-end replay of issue "Main job end to end" (Speed).
 * Pre-recorded change events (~1 KB, change-stream shape of
 * mongo-sim-spec.md §3.5-3.6: 60% insert, 30% update with updateLookup's
 * fullDocument, 10% delete) are fed from memory at full speed through the
 * capture task's own path: event_from_change -> position -> encoder_encode ->
 * in-flight tracker -> sink_produce -> delivery report -> inflight_ack ->
 * committable position. In the same run it measures the bounds:
 *
 *   encode-only  the same events through event_from_change + encoder_encode;
 *   raw produce  the same records, pre-encoded, through the same sink.
 *
 *   e2e_bench [--count N] [--rate EVENTS_PER_S] [--metrics] [--events FILE] [TARGET...]
 *
 * --events FILE replays the change events of FILE (a stream of BSON change
 * events, e.g. from replay_server --dump-events) instead of the built-in
 * ones, so that the bounds are those of the events a wire benchmark served.
 * --rate 0 leaves out the paced run.
 *
 * --metrics updates the capture task's metrics as the worker does (events
 * seen and emitted, records produced and acknowledged, delivery latency,
 * queue gauges, progress, per-collection events) and serves them on 127.0.0.1 (port chosen by the
 * system), scraped once a second by a thread of the bench: run it with and
 * without to see what metrics cost.
 *
 * TARGET: "mock" (librdkafka's in-process mock cluster, default), a
 * bootstrap address (scripts/kafka-local.sh), or file:PATH (the file sink,
 * JSON lines appended to PATH). Per target it prints events/s,
 * CPU seconds per million events (user+sys of the whole process, librdkafka's
 * threads included; with the mock cluster the in-process broker too), the
 * ratio e2e CPU / (raw + encode-only) CPU, and peak RSS; with --rate (default
 * 20000) a paced run gives the added latency, feed to acknowledgement,
 * p50/p99.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <bson/bson.h>

#include "capture/capture.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "encode/encode.h"
#include "event/event.h"
#include "metrics/metrics.h"
#include "metrics/metrics_http.h"
#include "offsets/offsets.h"
#include "sink/sink.h"

/* Distinct recorded events, replayed cyclically (memory stays small). */
#define NEVENTS 4096
static size_t nevents = NEVENTS;

struct slot {
    void *cookie;
    double fed;
};

/* --metrics: the task's slot (NULL: off), the listener's port, scrapes done. */
static struct metrics_task *mt;
static int metrics_port;
static atomic_bool scraping;
static atomic_uint_fast64_t scrapes;

/* GET /metrics once a second until scraping is cleared. */
static void *scraper(void *arg)
{
    (void)arg;
    while (atomic_load(&scraping)) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)metrics_port)};
        char buf[16384];
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
            static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
            if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
                while (read(fd, buf, sizeof buf) > 0)
                    ;
                atomic_fetch_add(&scrapes, 1);
            }
        }
        if (fd >= 0)
            close(fd);
        sleep(1);
    }
    return NULL;
}

struct run {
    struct sink *sink;
    struct inflight *inf;
    uint64_t acked, failed;
    double *lat;
    uint64_t nlat;
};

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                        bool dead_lettered, void *ctx)
{
    (void)dead_lettered;
    struct run *r = ctx;
    struct slot *s = opaque;
    if (err != NULL) {
        r->failed++;
        return;
    }
    r->acked++;
    if (mt != NULL) {
        metrics_add(mt, METRICS_RECORDS_ACKED, 1);
        metrics_observe_delivery_us(mt, latency_us);
    }
    if (r->inf != NULL && s->cookie != NULL)
        inflight_ack(r->inf, s->cookie);
    if (r->lat != NULL && s->fed > 0)
        r->lat[r->nlat++] = now_s() - s->fed;
}

/* ---- the recorded events ---- */

static bson_t *make_event(uint64_t i)
{
    bson_t *ev = bson_new();
    bson_t id, ns, key, full, addr, tags, ud, uf, rf;
    char hex[64], text[700];
    bson_oid_t oid;
    uint8_t raw[12] = {0x65, 0x53, 0xf1, 0x00};
    int kind = (int)(i % 10); /* 0-5 insert, 6-8 update, 9 delete */
    uint64_t doc = kind < 6 ? i : i - 6;
    const char *op = kind < 6 ? "insert" : kind < 9 ? "update" : "delete";

    for (int b = 0; b < 8; b++)
        raw[4 + b] = (uint8_t)(doc >> (8 * (7 - b)));
    bson_oid_init_from_data(&oid, raw);
    snprintf(hex, sizeof hex, "8265%08llX2B022C0100296E5A1004%016llX04",
             (unsigned long long)(0x53F10000u + i / 1000), (unsigned long long)i);
    for (size_t k = 0; k + 1 < sizeof text; k++)
        text[k] = (char)('a' + (int)((k * 7 + i) % 26));
    text[sizeof text - 1] = '\0';

    BSON_APPEND_DOCUMENT_BEGIN(ev, "_id", &id);
    BSON_APPEND_UTF8(&id, "_data", hex);
    bson_append_document_end(ev, &id);
    BSON_APPEND_UTF8(ev, "operationType", op);
    BSON_APPEND_TIMESTAMP(ev, "clusterTime", (uint32_t)(1700000000 + i / 1000),
                          (uint32_t)(i % 1000 + 1));
    BSON_APPEND_DATE_TIME(ev, "wallTime", (int64_t)1700000000000 + (int64_t)i);
    if (kind < 9) {
        BSON_APPEND_DOCUMENT_BEGIN(ev, "fullDocument", &full);
        BSON_APPEND_OID(&full, "_id", &oid);
        BSON_APPEND_UTF8(&full, "name", "Elizabeth Ray");
        BSON_APPEND_UTF8(&full, "email", "elizabeth.ray@example.com");
        BSON_APPEND_DOCUMENT_BEGIN(&full, "address", &addr);
        BSON_APPEND_UTF8(&addr, "street", "9286 Bethany Glens");
        BSON_APPEND_UTF8(&addr, "city", "Vasqueztown");
        BSON_APPEND_INT32(&addr, "zip", 43120);
        bson_append_document_end(&full, &addr);
        BSON_APPEND_ARRAY_BEGIN(&full, "tags", &tags);
        BSON_APPEND_UTF8(&tags, "0", "gold");
        BSON_APPEND_UTF8(&tags, "1", "travel");
        bson_append_array_end(&full, &tags);
        BSON_APPEND_DOUBLE(&full, "balance", 1234.5 + (double)(i % 100));
        BSON_APPEND_INT64(&full, "visits", (int64_t)i * 3);
        BSON_APPEND_DATE_TIME(&full, "birthdate", (int64_t)226117231000);
        BSON_APPEND_BOOL(&full, "active", i % 2 == 0);
        BSON_APPEND_UTF8(&full, "notes", text);
        bson_append_document_end(ev, &full);
    }
    BSON_APPEND_DOCUMENT_BEGIN(ev, "ns", &ns);
    BSON_APPEND_UTF8(&ns, "db", "sample_analytics");
    BSON_APPEND_UTF8(&ns, "coll", i % 2 ? "customers" : "accounts");
    bson_append_document_end(ev, &ns);
    BSON_APPEND_DOCUMENT_BEGIN(ev, "documentKey", &key);
    BSON_APPEND_OID(&key, "_id", &oid);
    bson_append_document_end(ev, &key);
    if (kind >= 6 && kind < 9) {
        BSON_APPEND_DOCUMENT_BEGIN(ev, "updateDescription", &ud);
        BSON_APPEND_DOCUMENT_BEGIN(&ud, "updatedFields", &uf);
        BSON_APPEND_DOUBLE(&uf, "balance", 1234.5 + (double)(i % 100));
        BSON_APPEND_INT64(&uf, "visits", (int64_t)i * 3);
        bson_append_document_end(&ud, &uf);
        BSON_APPEND_ARRAY_BEGIN(&ud, "removedFields", &rf);
        bson_append_array_end(&ud, &rf);
        BSON_APPEND_ARRAY_BEGIN(&ud, "truncatedArrays", &rf);
        bson_append_array_end(&ud, &rf);
        bson_append_document_end(ev, &ud);
    }
    return ev;
}

/* The change events of a file of concatenated BSON documents (*n set; at
 * least one, else exits). */
static bson_t **read_events(const char *path, size_t *n)
{
    bson_error_t error;
    bson_reader_t *rd = bson_reader_new_from_file(path, &error);
    const bson_t *doc;
    bool eof = false;
    size_t cap = 1024;
    bson_t **out = xcalloc(cap, sizeof *out);

    if (rd == NULL) {
        fprintf(stderr, "e2e_bench: %s: %s\n", path, error.message);
        exit(2);
    }
    *n = 0;
    while ((doc = bson_reader_read(rd, &eof)) != NULL) {
        if (*n == cap) {
            cap *= 2;
            out = xrealloc(out, cap * sizeof *out);
        }
        out[(*n)++] = bson_copy(doc);
    }
    bson_reader_destroy(rd);
    if (!eof || *n == 0) {
        fprintf(stderr, "e2e_bench: %s: not a stream of BSON documents\n", path);
        exit(2);
    }
    return out;
}

static struct mcdc_config *load_config(const char *target)
{
    char path[] = "/tmp/e2e_bench_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_config *cfg;

    fprintf(f, "topic.prefix: bench\nmongodb.connection.string: \"mongodb://127.0.0.1/"
               "?replicaSet=rs0\"\noffsets.file.path: /tmp/e2e_bench.offsets\n");
    if (strncmp(target, "file:", 5) == 0)
        fprintf(f, "sink.type: file\nsink.path: \"%s\"\n", target + 5);
    else if (strcmp(target, "mock") == 0)
        fprintf(f, "sink.type: kafka\nkafka:\n  test.mock.num.brokers: \"1\"\n");
    else
        fprintf(f, "sink.type: kafka\nkafka:\n  bootstrap.servers: \"%s\"\n", target);
    fclose(f);
    cfg = config_load(path, stderr, &err);
    unlink(path);
    if (cfg == NULL) {
        fprintf(stderr, "e2e_bench: config: %s\n", err.msg);
        exit(2);
    }
    return cfg;
}

static bool encode_one(struct encoder *enc, const bson_t *doc, struct mcdc_records *out,
                       struct mcdc_position *pos)
{
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool emit = false;

    event_init(&ev);
    if (!event_from_change(doc, &ev, &emit, &err) || !emit) {
        fprintf(stderr, "e2e_bench: event: %s\n", err.msg);
        exit(1);
    }
    ev.rs = "rs0";
    if (pos != NULL)
        capture_event_position(doc, pos);
    if (pos != NULL && mt != NULL) /* as the worker does at emit (two collections alternate) */
        metrics_collection_event(mt, ev.db, ev.db_len, ev.coll, ev.coll_len, METRICS_OP_C);
    if (!encoder_encode(enc, &ev, 1700000000000000, out, &err)) {
        fprintf(stderr, "e2e_bench: encode: %s\n", err.msg);
        exit(1);
    }
    return true;
}

/* Feeds every event (or, raw, the pre-encoded pool) through the sink. */
static void run_produce(const char *target, bson_t **events, size_t n,
                        const struct mcdc_records *pool, size_t npool, double rate,
                        const char *label, double *cpu_per_m)
{
    struct mcdc_config *cfg = load_config(target);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct run r = {0};
    struct slot *slots = xcalloc(n * MCDC_RECORDS_MAX, sizeof *slots); /* 16 B a record */
    struct encoder *enc = encoder_new(cfg, &err);
    struct sink *sink;
    struct mcdc_position pos;
    size_t nslot = 0;
    double t0, c0, wall, cpu;

    r.inf = pool == NULL ? inflight_new() : NULL;
    if (rate > 0)
        r.lat = xcalloc(n * MCDC_RECORDS_MAX, sizeof *r.lat);
    sink = sink_new(cfg, "bench", on_delivery, &r, &err);
    r.sink = sink;
    if (sink == NULL || enc == NULL) {
        fprintf(stderr, "e2e_bench: %s\n", err.msg);
        exit(1);
    }
    position_init(&pos);
    t0 = now_s();
    c0 = cpu_s();
    for (size_t i = 0; i < n; i++) {
        struct mcdc_records recs = {.count = 0};
        double fed = now_s();
        if (rate > 0) {
            double due = t0 + (double)i / rate;
            while ((fed = now_s()) < due)
                sink_poll(sink, 0);
        }
        if (pool != NULL) {
            const struct mcdc_records *p = &pool[i % npool];
            recs.count = p->count;
            for (size_t k = 0; k < p->count; k++) {
                recs.items[k] = p->items[k];
                recs.items[k].key = xmalloc(p->items[k].key_len + 1);
                memcpy(recs.items[k].key, p->items[k].key, p->items[k].key_len);
                recs.items[k].value = NULL;
                if (p->items[k].value != NULL) {
                    recs.items[k].value = xmalloc(p->items[k].value_len + 1);
                    memcpy(recs.items[k].value, p->items[k].value, p->items[k].value_len);
                }
            }
        } else {
            encode_one(enc, events[i % nevents], &recs, &pos);
            if (mt != NULL) {
                metrics_progress(mt);
                metrics_event_seen(mt, METRICS_OP_C);
                metrics_set_source_time_ms(mt, 1700000000000);
                metrics_event_emitted(mt, METRICS_OP_C);
            }
        }
        for (size_t k = 0; k < recs.count; k++) {
            struct slot *s = &slots[nslot++];
            s->fed = rate > 0 ? fed : 0;
            s->cookie = r.inf ? inflight_add(r.inf, k + 1 == recs.count ? &pos : NULL) : NULL;
            if (!sink_produce(sink, &recs.items[k], s, NULL, &err)) {
                fprintf(stderr, "e2e_bench: produce: %s\n", err.msg);
                exit(1);
            }
            metrics_add(mt, METRICS_RECORDS_PRODUCED, 1);
        }
        metrics_set_queue(mt, (int64_t)sink_in_flight(sink), (int64_t)sink_in_flight_bytes(sink));
        records_release(&recs);
        sink_poll(sink, 0);
        if (r.inf != NULL && i % 4096 == 0)
            (void)inflight_committable(r.inf);
    }
    if (!sink_flush(sink, 120000, &err))
        fprintf(stderr, "e2e_bench: flush: %s\n", err.msg);
    if (r.inf != NULL)
        (void)inflight_committable(r.inf);
    wall = now_s() - t0;
    cpu = cpu_s() - c0;
    *cpu_per_m = cpu / ((double)n / 1e6);
    for (int k = 0; k < 50 && r.acked + r.failed < nslot; k++)
        sink_poll(sink, 100);
    if (rate <= 0)
        printf("%-10s %-12s %8zu events %9.0f events/s %6.2f CPU-s/M events  %zu/%zu records "
               "acked%s, peak RSS %ld kB\n",
               target, label, n, (double)n / wall, *cpu_per_m, (size_t)r.acked, nslot,
               r.failed ? " (FAILURES)" : "", peak_rss_kb());
    if (r.lat != NULL && r.nlat > 0) {
        qsort(r.lat, r.nlat, sizeof *r.lat, cmp_double);
        printf("%-10s %-12s paced %.0f events/s: added latency p50 %.2f ms, p99 %.2f ms, max "
               "%.2f ms\n",
               target, label, rate, r.lat[r.nlat / 2] * 1e3, r.lat[r.nlat * 99 / 100] * 1e3,
               r.lat[r.nlat - 1] * 1e3);
    }
    sink_destroy(sink);
    inflight_destroy(r.inf);
    encoder_destroy(enc);
    position_clear(&pos);
    free(r.lat);
    free(slots);
    config_free(cfg);
}

int main(int argc, char **argv)
{
    size_t n = 200000, npool = 4096;
    double rate = 20000;
    const char *events_file = NULL;
    const char *targets[8];
    size_t ntargets = 0;
    bson_t **events;
    struct mcdc_records *pool;
    struct mcdc_config *cfg;
    struct encoder *enc;
    struct mcdc_error err = MCDC_ERROR_INIT;
    double t0, c0, enc_cpu, raw_cpu, e2e_cpu, avg = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc)
            n = (size_t)strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc)
            rate = strtod(argv[++i], NULL);
        else if (strcmp(argv[i], "--metrics") == 0)
            mt = metrics_task_register("rs0");
        else if (strcmp(argv[i], "--events") == 0 && i + 1 < argc)
            events_file = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr,
                    "usage: e2e_bench [--count N] [--rate EVENTS_PER_S] [--metrics] [--events FILE] "
                    "[TARGET...]\n");
            return 2;
        } else if (ntargets < 8)
            targets[ntargets++] = argv[i];
    }
    if (ntargets == 0)
        targets[ntargets++] = "mock";
    mcdc_log_open(MCDC_LOG_WARN, MCDC_LOG_FORMAT_TEXT, NULL, &err);
    struct metrics_http *mh = NULL;
    pthread_t scrape_thread;
    if (mt != NULL) {
        metrics_set_state(mt, METRICS_STATE_STREAMING);
        mh = metrics_http_start("127.0.0.1", 0, 60000, &metrics_port, &err);
        if (mh == NULL) {
            fprintf(stderr, "e2e_bench: %s\n", err.msg);
            return 1;
        }
        atomic_store(&scraping, true);
        pthread_create(&scrape_thread, NULL, scraper, NULL);
    }

    if (events_file != NULL) {
        events = read_events(events_file, &nevents);
    } else {
        events = xcalloc(NEVENTS, sizeof *events);
        for (size_t i = 0; i < NEVENTS; i++)
            events[i] = make_event(i);
    }
    for (size_t i = 0; i < nevents; i++)
        avg += (double)events[i]->len;
    cfg = load_config("mock");
    enc = encoder_new(cfg, &err);
    /* encode-only bound */
    t0 = now_s();
    c0 = cpu_s();
    for (size_t i = 0; i < n; i++) {
        struct mcdc_records recs = {.count = 0};
        encode_one(enc, events[i % nevents], &recs, NULL);
        records_release(&recs);
    }
    enc_cpu = (cpu_s() - c0) / ((double)n / 1e6);
    printf("events: %zu recorded change events%s%s replayed to %zu, %.0f bytes of BSON on "
           "average\n",
           nevents, events_file ? " of " : "", events_file ? events_file : "", n, avg / (double)nevents);
    printf("%-10s %-12s %8zu events %9.0f events/s %6.2f CPU-s/M events\n", "-", "encode-only", n,
           (double)n / (now_s() - t0), enc_cpu);
    pool = xcalloc(npool, sizeof *pool);
    for (size_t i = 0; i < npool && i < n; i++)
        encode_one(enc, events[i % nevents], &pool[i], NULL);
    for (size_t t = 0; t < ntargets; t++) {
        /* warm-up: topic creation and connections are not part of the figures */
        run_produce(targets[t], events, n / 20 ? n / 20 : 1, pool, npool, 0, "warm-up", &raw_cpu);
        run_produce(targets[t], events, n, pool, npool < n ? npool : n, 0, "raw-produce", &raw_cpu);
        run_produce(targets[t], events, n, NULL, 0, 0, "end-to-end", &e2e_cpu);
        printf("%-10s end-to-end CPU / (raw produce + encode-only) CPU = %.2f\n", targets[t],
               e2e_cpu / (raw_cpu + enc_cpu));
        if (rate > 0) {
            size_t paced = (size_t)(rate * 5) < n ? (size_t)(rate * 5) : n;
            run_produce(targets[t], events, paced, NULL, 0, rate, "end-to-end", &e2e_cpu);
        }
    }
    for (size_t i = 0; i < npool && i < n; i++)
        records_release(&pool[i]);
    free(pool);
    for (size_t i = 0; i < nevents; i++)
        bson_destroy(events[i]);
    free(events);
    encoder_destroy(enc);
    config_free(cfg);
    if (mh != NULL) {
        atomic_store(&scraping, false);
        pthread_join(scrape_thread, NULL);
        metrics_http_stop(mh);
        printf("metrics on: %llu scrapes of /metrics, one a second\n",
               (unsigned long long)atomic_load(&scrapes));
    }
    printf("peak RSS of the whole run: %ld kB\n", peak_rss_kb());
    return 0;
}
