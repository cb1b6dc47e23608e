/*
 * signals internals shared by the channel, notification and command files.
 * Not a public contract.
 */
#ifndef MCDC_SIGNALS_SIGNALS_INTERNAL_H
#define MCDC_SIGNALS_SIGNALS_INTERNAL_H

#include <stdbool.h>
#include <string.h>

#include <bson/bson.h>
#include <librdkafka/rdkafka.h>

#include "common/error.h"
#include "common/xalloc.h"
#include "config/config.h"
#include "encode/ejson.h"
#include "kafka/kafka_conf.h"

/* Appends the NUL-terminated s (borrowed) to b: sig_put as it is,
 * sig_put_json as a JSON string escaped as Kafka Connect's JsonConverter
 * writes it (encode/ejson.h json_append_string), as Debezium's notification
 * records and signal values are. */
static inline void sig_put(struct ejson_buf *b, const char *s)
{
    ejson_buf_append(b, s, strlen(s));
}

static inline void sig_put_json(struct ejson_buf *b, const char *s)
{
    json_append_string(b, s, strlen(s));
}

/* The signal topic: signal.kafka.topic or <topic.prefix>-signal. Borrowed
 * or written into buf (cap bytes). */
const char *sig_kafka_topic(const struct mcdc_config *cfg, char *buf, size_t cap);

/* The signal's JSON line {"id":...,"type":...,"data":{...}} (the kafka and
 * file channels' shape). Caller frees with free(). */
char *sig_to_json(const char *id, const char *type, const bson_t *data);

#endif
