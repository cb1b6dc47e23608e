/*
 * sink/sink_kafka_internal: what the Kafka sink's two files share
 * (sink_kafka.c: produce, delivery reports, dead-letter copies;
 * sink_kafka_conf.c: the producer's configuration). Not a public contract.
 */
#ifndef MCDC_SINK_SINK_KAFKA_INTERNAL_H
#define MCDC_SINK_SINK_KAFKA_INTERNAL_H

#include <stdbool.h>

#include <librdkafka/rdkafka.h>

#include "common/error.h"
#include "config/config.h"

/*
 * Applies the producer settings to conf (borrowed; the caller destroys it on
 * failure): mongocdc's defaults, client.id "mongocdc-<client_tag>" ("main"
 * when NULL), then cfg's `kafka:` map as-is, refusing enable.idempotence and
 * acks values that would break ordering or at-least-once. Returns false with
 * a CONFIG error naming the key (file:line:col when it came from the YAML)
 * and librdkafka's reason.
 *
 * Thread: worker.
 */
bool sink_kafka_conf_apply(rd_kafka_conf_t *conf, const struct mcdc_config *cfg,
                           const char *client_tag, struct mcdc_error *err);

/*
 * librdkafka's log callback (rd_kafka_conf_set_log_cb): writes the line to
 * the project log with component "rdkafka", syslog levels mapped to ours.
 *
 * Thread: any (librdkafka's threads).
 */
void sink_kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

#endif
