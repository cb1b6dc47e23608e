/*
 * fuzz_event: a change event as it arrives from the server (arbitrary
 * BSON: event_from_change) and, when it is a data event, the encoder on it
 * (envelope, key, topic, JSON of every BSON type), with a fixed 3.x
 * configuration. The first byte picks a snapshot-document path instead
 * (event_from_snapshot_doc), the encoder's other entry for arbitrary
 * documents.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <bson/bson.h>

#include "config/config.h"
#include "encode/encode.h"
#include "event/event.h"

static struct mcdc_config *cfg;
static struct encoder *enc;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char path[64];
    snprintf(path, sizeof path, "/tmp/mcdc-fuzz-event-%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");
    if (f == NULL)
        abort();
    fputs("topic.prefix: fz\n"
          "mongodb.connection.string: mongodb://h1/?replicaSet=rs0\n"
          "sink.type: stdout\n"
          "offsets.file.path: /tmp/mcdc-fuzz-offsets.json\n"
          "field.renames: db.c.a:b\n"
          "field.exclude.list: db.c.x\n",
          f);
    fclose(f);
    struct mcdc_error err = MCDC_ERROR_INIT;
    FILE *sink = fopen("/dev/null", "w");
    cfg = config_load(path, sink, &err);
    fclose(sink);
    unlink(path);
    if (cfg == NULL)
        abort();
    enc = encoder_new(cfg, &err);
    if (enc == NULL)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bson_t doc;
    if (!bson_init_static(&doc, data + 1, size - 1) || !bson_validate(&doc, 0, NULL))
        return 0;
    struct mcdc_event ev;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_records out = {.count = 0};
    bool emit = false;
    if (data[0] & 1) {
        emit = event_from_snapshot_doc(&doc, "db", "c", MCDC_SNAP_TRUE, &ev, &err);
    } else if (!event_from_change(&doc, &ev, &emit, &err)) {
        emit = false;
    }
    if (emit) {
        ev.rs = "rs0";
        (void)encoder_encode(enc, &ev, 1700000000000, &out, &err);
        for (size_t i = 0; i < out.count; i++) { /* the caller owns key and value */
            free(out.items[i].key);
            free(out.items[i].value);
        }
    }
    return 0;
}
