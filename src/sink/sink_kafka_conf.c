/*
 * sink/sink_kafka_conf: the Kafka sink's librdkafka configuration (design.md
 * §6, style.md §4.8, §4.9) and its log callback.
 *
 * Producer settings, applied in this order:
 *   1. mongocdc defaults: client.id "mongocdc-<task>", enable.idempotence=true,
 *      acks=all, queue.buffering.max.kbytes from sink.queue.max.bytes
 *      (default 16 MiB), message.timeout.ms=0 (retry for ever: a broker outage
 *      stalls capture through backpressure instead of failing records);
 *   2. the `kafka:` map, as-is (style.md §4.8): any key overrides a default,
 *      including client.id, the queue size and message.timeout.ms;
 *   3. except two that cannot be overridden: enable.idempotence (must stay
 *      true: without it librdkafka's retries can reorder a document's events
 *      and duplicate them, breaking per-key order) and acks (must be all/-1:
 *      a record acknowledged by the leader alone can be lost on failover after
 *      its offset was committed, and idempotence requires acks=all anyway).
 *      Setting either to something else is a configuration error.
 *
 * Errors name the YAML key's file, line and column (style.md §4.8) with
 * librdkafka's own errstr.
 *
 * Thread: worker (sink_kafka_open); librdkafka's own threads call the log
 * callback.
 */
#include "sink/sink_kafka_internal.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"

void sink_kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    /* syslog levels: 0-3 error, 4 warning, 5-6 notice/info, 7 debug */
    enum mcdc_log_level lvl = level <= 3   ? MCDC_LOG_ERROR
                              : level == 4 ? MCDC_LOG_WARN
                              : level <= 6 ? MCDC_LOG_INFO
                                           : MCDC_LOG_DEBUG;
    if (!MCDC_LOG_ENABLED(lvl))
        return;
    char line[1024];
    snprintf(line, sizeof line, "%s: %s: %s", rd_kafka_name(rk), fac, buf);
    mcdc_log_write(lvl, "rdkafka", line);
}

static bool conf_set(rd_kafka_conf_t *conf, const struct mcdc_config *cfg, const char *k,
                     const char *v, const struct mcdc_kv *kv, struct mcdc_error *err)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof errstr) == RD_KAFKA_CONF_OK)
        return true;
    if (kv)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "%s:%d:%d: kafka.%s: %s",
                              cfg->path ? cfg->path : "config", kv->line, kv->col, k, errstr);
    return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "kafka %s=%s: %s", k, v, errstr);
}

/* The two settings the at-least-once, in-order contract depends on. */
static bool check_locked(const struct mcdc_config *cfg, const struct mcdc_kv *kv,
                         struct mcdc_error *err)
{
    const char *where = cfg->path ? cfg->path : "config";
    if (!strcmp(kv->key, "enable.idempotence") && strcasecmp(kv->value, "true") != 0 &&
        strcmp(kv->value, "1") != 0)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                              "%s:%d:%d: kafka.enable.idempotence: cannot be turned off (retries "
                              "would reorder and duplicate a document's events) (expected true)",
                              where, kv->line, kv->col);
    if (!strcmp(kv->key, "acks") && strcmp(kv->value, "all") != 0 && strcmp(kv->value, "-1") != 0)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0,
                              "%s:%d:%d: kafka.acks: must wait for all in-sync replicas (a "
                              "committed offset could cover lost records) (expected all or -1)",
                              where, kv->line, kv->col);
    return true;
}

bool sink_kafka_conf_apply(rd_kafka_conf_t *conf, const struct mcdc_config *cfg,
                           const char *client_tag, struct mcdc_error *err)
{
    char client_id[256], kbytes[32];
    snprintf(client_id, sizeof client_id, "mongocdc-%s", client_tag ? client_tag : "main");
    int64_t qbytes = cfg->sink_queue_bytes > 0 ? cfg->sink_queue_bytes : 16 * 1024 * 1024;
    snprintf(kbytes, sizeof kbytes, "%lld", (long long)(qbytes < 1024 ? 1 : qbytes / 1024));
    bool ok = conf_set(conf, cfg, "client.id", client_id, NULL, err) &&
              conf_set(conf, cfg, "enable.idempotence", "true", NULL, err) &&
              conf_set(conf, cfg, "acks", "all", NULL, err) &&
              conf_set(conf, cfg, "queue.buffering.max.kbytes", kbytes, NULL, err) &&
              conf_set(conf, cfg, "message.timeout.ms", "0", NULL, err);
    for (size_t i = 0; ok && i < cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &cfg->kafka.items[i];
        ok = check_locked(cfg, kv, err) && conf_set(conf, cfg, kv->key, kv->value, kv, err);
    }
    return ok;
}
