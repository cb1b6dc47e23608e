/*
 * sink/sink_kafka internals: the Kafka sink's state, shared by sink_kafka.c
 * (records, deliveries, dead-letter copies) and sink_kafka_txn.c (the
 * transactional calls of exactly-once delivery). Not a public contract.
 *
 * Thread: worker.
 */
#ifndef MCDC_SINK_SINK_KAFKA_INTERNAL_H
#define MCDC_SINK_SINK_KAFKA_INTERNAL_H

#include <librdkafka/rdkafka.h>

#include "sink/sink_internal.h"

struct topic_entry {
    const char *ptr; /* the encoder's pointer, checked first */
    char *name;
    rd_kafka_topic_t *rkt;
};

struct kafka_sink {
    struct sink *sink;
    rd_kafka_t *rk;
    rd_kafka_topic_t *dlq; /* NULL: no dead-letter topic */
    uint64_t dead_lettered;
    struct topic_entry *topics;
    size_t n_topics, cap_topics, last_topic;
    int served;      /* delivery reports served during the current call */
    bool destroying; /* no callbacks while tearing down */
    int fatal_code;
    char fatal_msg[512];
    /* exactly-once: the offsets record of the transaction (sink_produce_control) */
    rd_kafka_topic_t *control_rkt;
    char *control_topic;
    rd_kafka_resp_err_t control_err; /* its delivery failed (reported by dr_cb) */
};

/* The opaque of a control record: dr_cb neither counts nor reports it. */
extern char sink_control_marker;

/* The sink's Kafka state when it is a Kafka sink, else NULL. */
struct kafka_sink *sink_kafka_state(struct sink *sink);

/* The fatal error of the producer, if any, into err (true). */
bool sink_kafka_fatal_error(struct kafka_sink *ks, struct mcdc_error *err);

#endif


