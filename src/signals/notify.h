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

struct notifier;
struct sink;
struct mcdc_config;

/* key/value pairs of additionalData, both strings. */
struct notify_kv {
    const char *key;
    const char *value;
};

/*
 * Sends one notification on every enabled channel. id: the correlation id
 * (the signal's id for incremental snapshots). kv: n pairs, copied.
 * Never fails the caller: a channel that cannot deliver logs a WARN.
 * Thread-safe.
 */
void notify_send(struct notifier *n, const char *aggregate_type, const char *type, const char *id,
                 const struct notify_kv *kv, size_t count);

#endif
