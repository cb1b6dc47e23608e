/*
 * sink: the front of the record sink (design.md §6). Picks the back-end from
 * sink.type (kafka, file, stdout) and counts records in flight; the
 * back-ends are sink_kafka.c and sink_lines.c.
 *
 * Thread: worker (the owning capture task).
 */
#include "sink/sink.h"

#include <stdlib.h>

#include "common/xalloc.h"
#include "sink/sink_internal.h"

struct sink *sink_new(const struct mcdc_config *cfg, const char *client_tag, sink_delivery_cb cb,
                      void *cb_ctx, struct mcdc_error *err)
{
    return sink_new_transactional(cfg, client_tag, NULL, cb, cb_ctx, err);
}

struct sink *sink_new_transactional(const struct mcdc_config *cfg, const char *client_tag,
                                    const char *transactional_id, sink_delivery_cb cb,
                                    void *cb_ctx, struct mcdc_error *err)
{
    struct sink *sink = xcalloc(1, sizeof *sink);
    sink->cfg = cfg;
    sink->txn_id = transactional_id;
    sink->cb = cb;
    sink->cb_ctx = cb_ctx;
    bool ok = cfg->sink_type == MCDC_SINK_KAFKA ? sink_kafka_open(sink, client_tag, err)
                                                : sink_lines_open(sink, err);
    if (!ok) {
        free(sink);
        return NULL;
    }
    return sink;
}

void sink_destroy(struct sink *sink)
{
    if (!sink)
        return;
    sink->ops->destroy(sink);
    free(sink);
}

bool sink_produce(struct sink *sink, struct mcdc_record *rec, void *opaque,
                  const atomic_bool *stop, struct mcdc_error *err)
{
    return sink->ops->produce(sink, rec, opaque, stop, err);
}

int sink_poll(struct sink *sink, int timeout_ms)
{
    return sink->ops->poll(sink, timeout_ms);
}

bool sink_flush(struct sink *sink, int timeout_ms, struct mcdc_error *err)
{
    return sink->ops->flush(sink, timeout_ms, err);
}

size_t sink_in_flight(const struct sink *sink)
{
    return sink->in_flight;
}

size_t sink_in_flight_bytes(const struct sink *sink)
{
    return sink->in_flight_bytes;
}

bool sink_fatal(struct sink *sink, struct mcdc_error *err)
{
    return sink->ops->fatal(sink, err);
}

void sink_key_excerpt(const char *key, size_t len, char *out, size_t max)
{
    size_t n = len < max ? len : max;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)key[i];
        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (len > max) {
        out[n++] = '.';
        out[n++] = '.';
        out[n++] = '.';
    }
    out[n] = '\0';
}
