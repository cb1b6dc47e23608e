/*
 * fuzz_signals: a signal as the channels receive it. The first byte picks
 * the shape: even, the rest is a BSON document inserted into the signal
 * collection (mcdc_signal_parse_doc, positional); odd, the rest is the JSON
 * text of a kafka record or a signal-file line (mcdc_signal_parse_json).
 * Every accepted signal is copied, put through the bus and, for snapshot
 * types, through mcdc_signal_snapshot_request (regexes, filters).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "signals/signals.h"

static struct signal_bus *bus;
static struct signal_queue *queue;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mcdc_signal sig, copy, popped;
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool ok = false;
    if (size == 0)
        return 0;
    if (bus == NULL) {
        bus = signal_bus_new();
        queue = signal_bus_subscribe(bus, "fuzz");
    }
    if ((data[0] & 1) == 0) {
        bson_t doc;
        if (!bson_init_static(&doc, data + 1, size - 1) || !bson_validate(&doc, 0, NULL))
            return 0;
        ok = mcdc_signal_parse_doc(&doc, MCDC_SIGNAL_CHANNEL_SOURCE, &sig, &err);
    } else {
        ok = mcdc_signal_parse_json((const char *)data + 1, size - 1, MCDC_SIGNAL_CHANNEL_KAFKA,
                                    &sig, &err);
    }
    if (!ok) {
        if (err.msg[0] == '\0')
            abort(); /* a refusal always says why */
        return 0;
    }
    if (sig.id == NULL)
        abort();
    mcdc_signal_copy(&sig, &copy);
    signal_bus_publish(bus, &copy);
    if (!signal_queue_pop(queue, &popped) || strcmp(popped.id, sig.id) != 0 ||
        popped.type != sig.type || !bson_equal(&popped.data, &sig.data))
        abort(); /* the bus hands over what it was given */
    if (sig.type == MCDC_SIGNAL_EXECUTE_SNAPSHOT || sig.type == MCDC_SIGNAL_STOP_SNAPSHOT) {
        struct mcdc_snapshot_request req;
        if (mcdc_signal_snapshot_request(&sig, &req, &err)) {
            if (sig.type == MCDC_SIGNAL_EXECUTE_SNAPSHOT && req.collection_count == 0)
                abort(); /* execute-snapshot needs a collection */
            mcdc_snapshot_request_destroy(&req);
        }
    }
    mcdc_signal_destroy(&popped);
    mcdc_signal_destroy(&copy);
    mcdc_signal_destroy(&sig);
    return 0;
}
