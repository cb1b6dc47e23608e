/*
 * fuzz_oplog: an oplog entry as tailing reads it from local.oplog.rs
 * (arbitrary BSON): oplog_feed on a detached reader (ops i/u/d/n/c, applyOps
 * transactions, $v: 2 diffs decoded to the $v: 1 form, lsid/txnNumber to
 * stxnid, h), then every emitted operation through the encoder with
 * Debezium 1.9's oplog layout and, with decoded patches, field rules that
 * reach them (rename a -> b, exclusion of x). The first byte sets
 * oplog.update.raw.diff (bit 0) and transaction metadata (bit 1).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <bson/bson.h>

#include "capture/oplog.h"
#include "config/config.h"
#include "encode/encode.h"
#include "offsets/offsets.h"

static struct mcdc_config *cfg[4];
static struct encoder *enc[4];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (int v = 0; v < 4; v++) {
        char path[64];
        snprintf(path, sizeof path, "/tmp/mcdc-fuzz-oplog-%d-%d.yaml", (int)getpid(), v);
        FILE *f = fopen(path, "w");
        if (f == NULL)
            abort();
        fprintf(f,
                "topic.prefix: fz\n"
                "mongodb.connection.string: mongodb://h1/?replicaSet=rs0\n"
                "sink.type: stdout\n"
                "offsets.file.path: /tmp/mcdc-fuzz-offsets.json\n"
                "debezium.compatibility: \"1.9\"\n"
                "capture.mode: oplog\n"
                "oplog.update.raw.diff: %s\n"
                "provide.transaction.metadata: %s\n"
                "%s",
                (v & 1) ? "true" : "false", (v & 2) ? "true" : "false",
                /* raw diffs refuse field rules (config check) */
                (v & 1) ? "" : "field.renames: db.c.a:b\nfield.exclude.list: db.c.x\n");
        fclose(f);
        struct mcdc_error err = MCDC_ERROR_INIT;
        FILE *sink = fopen("/dev/null", "w");
        cfg[v] = config_load(path, sink, &err);
        fclose(sink);
        unlink(path);
        if (cfg[v] == NULL) {
            fprintf(stderr, "fuzz_oplog: %s\n", err.msg);
            abort();
        }
        enc[v] = encoder_new(cfg[v], &err);
        if (enc[v] == NULL)
            abort();
    }
    return 0;
}

static void encode(struct encoder *e, struct oplog_item *it)
{
    struct mcdc_records out = {.count = 0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    if (!it->emit)
        return;
    it->ev.rs = "rs0";
    (void)encoder_encode(e, &it->ev, 1700000000000, &out, &err);
    for (size_t i = 0; i < out.count; i++) { /* the caller owns key and value */
        free(out.items[i].key);
        free(out.items[i].value);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bson_t doc;
    if (!bson_init_static(&doc, data + 1, size - 1) || !bson_validate(&doc, 0, NULL))
        return 0;
    int v = data[0] & 3;
    struct oplog_reader *r = oplog_detached(cfg[v]);
    struct oplog_item it;
    oplog_item_init(&it);
    enum capture_status s = oplog_feed(r, &doc, &it);
    for (int n = 0; s == CAPTURE_EVENT && n < 100000; n++) {
        char *json = position_to_json(&it.pos);
        free(json);
        encode(enc[v], &it);
        s = oplog_next(r, &it);
    }
    if (s == CAPTURE_ERROR) {
        struct resume_failure fail;
        struct mcdc_error err = MCDC_ERROR_INIT;
        oplog_failure(r, &fail, &err);
    }
    oplog_item_clear(&it);
    oplog_destroy(r);
    return 0;
}
