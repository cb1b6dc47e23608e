/*
 * sink internals: the back-end table behind struct sink (Kafka or JSON lines).
 * Not a public contract.
 *
 * Thread: worker.
 */
#ifndef MCDC_SINK_SINK_INTERNAL_H
#define MCDC_SINK_SINK_INTERNAL_H

#include "sink/sink.h"

struct sink_ops {
    bool (*produce)(struct sink *sink, struct mcdc_record *rec, void *opaque,
                    const atomic_bool *stop, struct mcdc_error *err);
    int (*poll)(struct sink *sink, int timeout_ms);
    bool (*flush)(struct sink *sink, int timeout_ms, struct mcdc_error *err);
    bool (*fatal)(struct sink *sink, struct mcdc_error *err);
    void (*destroy)(struct sink *sink);
};

struct sink {
    const struct sink_ops *ops;
    const struct mcdc_config *cfg;
    sink_delivery_cb cb;
    void *cb_ctx;
    size_t in_flight; /* produced, not yet reported */
    size_t in_flight_bytes;  /* their key + value bytes */
    const char *txn_id;      /* transactional.id (exactly-once), NULL: none; borrowed
                                for sink_kafka_open only */
    void *impl;
};

bool sink_kafka_open(struct sink *sink, const char *client_tag, struct mcdc_error *err);
bool sink_lines_open(struct sink *sink, struct mcdc_error *err);

/* Formats the start of a key for error messages: at most max bytes, non-printable
 * bytes as '?', "..." appended when cut. out must hold max + 4 bytes. */
void sink_key_excerpt(const char *key, size_t len, char *out, size_t max);

/* The Kafka sink's rd_kafka_t (as void *), for tests that inject faults
 * (rd_kafka_test_fatal_error); NULL for other sink types. */
void *sink_kafka_handle(struct sink *sink);

#endif
