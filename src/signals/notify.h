/*
 * signals/notify: Debezium notifications (notification.enabled.channels:
 * `sink` to notification.sink.topic.name, `log`). A notification is
 * {id, aggregateType, type, additionalData: {string: string}, timestamp}
 * as Debezium's io.debezium.pipeline.notification.Notification.
 *
 * Incremental snapshot types (Debezium IncrementalSnapshotNotificationService):
 * STARTED, PAUSED, RESUMED, STOPPED (aborted), IN_PROGRESS, TABLE_SCAN_COMPLETED
 * (one collection done; additionalData status SUCCEEDED / EMPTY /
 * UNKNOWN_SCHEMA ...), COMPLETED. aggregateType "Incremental Snapshot";
 * the initial snapshot uses "Initial Snapshot".
 */
#ifndef MCDC_SIGNALS_NOTIFY_H
#define MCDC_SIGNALS_NOTIFY_H

#include <stddef.h>

#include "common/error.h"

struct notifier;
struct sink;
struct mcdc_config;

/* key/value pairs of additionalData, both strings. */
struct notify_kv {
    const char *key;
    const char *value;
};

/*
 * The notifier of cfg's notification.enabled.channels (borrowed; outlives
 * it): `log` writes Debezium's LogNotificationChannel line at INFO,
 * "[Notification Service]  {aggregateType='...', type='...',
 * additionalData={k=v, ...}}"; `sink` produces Debezium's
 * SinkNotificationChannel record to notification.sink.topic.name with its
 * own librdkafka producer on the kafka: cluster: key {"id":"..."}, value
 * {"id":"...","type":"...","aggregate_type":"...","additional_data":{...},
 * "timestamp":<epoch ms>}, in JsonConverter's {schema, payload} envelope
 * when key/value.converter.schemas.enable say so. Returns NULL
 * when no channel is enabled (notify_send(NULL, ...) does nothing), or
 * NULL with err when the producer cannot be made (*err domain set).
 */
struct notifier *notify_new(const struct mcdc_config *cfg, struct mcdc_error *err);

/* Flushes the sink channel (up to 5 s, a WARN naming what was not
 * delivered) and frees n. NULL is a no-op. */
void notify_destroy(struct notifier *n);

/*
 * Debezium's InitialSnapshotNotificationService: type STARTED, COMPLETED,
 * ABORTED or SKIPPED, aggregateType "Initial Snapshot", a new random id,
 * additionalData {connector_name: topic.prefix}. Sent on n (the daemon's
 * notifier); nothing when n is NULL.
 */
void notify_initial_snapshot(struct notifier *n, const char *type, const char *connector_name);

/*
 * Sends one notification on every enabled channel. id: the correlation id
 * (the signal's id for incremental snapshots). kv: n pairs, copied.
 * Never fails the caller: a channel that cannot deliver logs a WARN.
 * Thread-safe.
 */
void notify_send(struct notifier *n, const char *aggregate_type, const char *type, const char *id,
                 const struct notify_kv *kv, size_t count);

#endif
