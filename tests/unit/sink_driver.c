/*
 * mcdc_sink_driver: drives the sink and the Kafka offset store from the
 * integration tests (tests/integration/test_sink_kafka.py), so they can be
 * checked against a real broker without the rest of the daemon.
 *
 *   mcdc_sink_driver produce BOOTSTRAP TOPIC [key=value ...]
 *       stdin: one record per line, "<key hex> <value hex>" or "<key hex> -"
 *       for a tombstone. Produces them in order through sink.h, flushes, and
 *       prints "acked N failed M" then one "error: <message>" line per failed
 *       record. Extra key=value pairs go to the kafka: map. Exit 0 when every
 *       record was acknowledged.
 *   mcdc_sink_driver offsets-save BOOTSTRAP OFFSETS_TOPIC PREFIX RS SEC ORD DATA_HEX
 *       stores a position with resume token {_data: DATA_HEX}.
 *   mcdc_sink_driver offsets-load BOOTSTRAP OFFSETS_TOPIC PREFIX RS
 *       prints the stored offset value (JSON) or "none".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "offsets/offsets.h"
#include "sink/sink.h"

struct counts {
    unsigned long ok, failed;
};

static void on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                        bool dead_lettered, void *ctx)
{
    (void)latency_us;
    (void)dead_lettered;
    (void)opaque;
    struct counts *c = ctx;
    if (!err) {
        c->ok++;
        return;
    }
    c->failed++;
    printf("error: %s\n", err->msg);
}

static char *unhex(const char *s, size_t n, size_t *out_len)
{
    char *out = xmalloc(n / 2 + 1);
    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;
        char b[3] = {s[i], s[i + 1], 0};
        sscanf(b, "%2x", &v);
        out[i / 2] = (char)v;
    }
    *out_len = n / 2;
    return out;
}

static int produce(int argc, char **argv)
{
    struct mcdc_kv kv[32];
    size_t n = 0;
    kv[n++] = (struct mcdc_kv){(char *)"bootstrap.servers", argv[2], 0, 0};
    for (int i = 4; i < argc && n < 32; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq)
            return 2;
        *eq = '\0';
        kv[n++] = (struct mcdc_kv){argv[i], eq + 1, 0, 0};
    }
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sink_type = MCDC_SINK_KAFKA;
    cfg.kafka.items = kv;
    cfg.kafka.count = n;
    struct counts c = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct sink *sink = sink_new(&cfg, "driver", on_delivery, &c, &err);
    if (!sink) {
        printf("error: %s\n", err.msg);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long produced = 0, refused = 0;
    while ((len = getline(&line, &cap, stdin)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        char *sp = strchr(line, ' ');
        if (!sp)
            continue;
        struct mcdc_record rec = {.topic = argv[3]};
        rec.key = unhex(line, (size_t)(sp - line), &rec.key_len);
        if (strcmp(sp + 1, "-") != 0)
            rec.value = unhex(sp + 1, strlen(sp + 1), &rec.value_len);
        if (!sink_produce(sink, &rec, (void *)(uintptr_t)++produced, NULL, &err)) {
            printf("error: %s\n", err.msg);
            refused++;
            free(rec.key);
            free(rec.value);
        }
    }
    free(line);
    bool flushed = sink_flush(sink, 60000, &err);
    if (!flushed)
        printf("error: %s\n", err.msg);
    printf("acked %lu failed %lu\n", c.ok, c.failed + refused);
    sink_destroy(sink);
    return flushed && c.failed == 0 && refused == 0 ? 0 : 1;
}

static int offsets(int argc, char **argv, bool save)
{
    if (argc < (save ? 9 : 6))
        return 2;
    struct mcdc_kv kv[1] = {{(char *)"bootstrap.servers", argv[2], 0, 0}};
    struct mcdc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.topic_prefix = argv[4];
    cfg.dialect = MCDC_DIALECT_3_X; /* values in the 2.7+ form: Base64 of the token's BSON */
    cfg.offset_storage = MCDC_OFFSETS_KAFKA;
    cfg.offsets_topic = argv[3];
    cfg.offsets_flush_timeout_ms = 10000;
    cfg.kafka.items = kv;
    cfg.kafka.count = 1;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct offset_store *store = offset_store_open(&cfg, &err);
    if (!store) {
        printf("error: %s\n", err.msg);
        return 1;
    }
    struct mcdc_position pos;
    position_init(&pos);
    bool ok;
    if (save) {
        pos.sec = strtoll(argv[6], NULL, 10);
        pos.ord = strtoll(argv[7], NULL, 10);
        BSON_APPEND_UTF8(&pos.resume_token, "_data", argv[8]);
        pos.has_resume_token = true;
        ok = offset_store_save(store, argv[5], &pos, &err);
        if (ok)
            printf("saved\n");
    } else {
        bool found = false;
        ok = offset_store_load(store, argv[5], &pos, &found, &err);
        if (ok) {
            char *json = found ? position_to_json(&pos) : NULL;
            printf("%s\n", json ? json : "none");
            free(json);
        }
    }
    if (!ok)
        printf("error: %s\n", err.msg);
    position_clear(&pos);
    offset_store_close(store);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 4 && !strcmp(argv[1], "produce"))
        return produce(argc, argv);
    if (argc >= 2 && !strcmp(argv[1], "offsets-save"))
        return offsets(argc, argv, true);
    if (argc >= 2 && !strcmp(argv[1], "offsets-load"))
        return offsets(argc, argv, false);
    fprintf(stderr, "usage: see the comment at the top of sink_driver.c\n");
    return 2;
}
