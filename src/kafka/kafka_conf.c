/*
 * kafka/kafka_conf: the log callback, the one setter and its error format,
 * and the record producer's settings (kafka_conf.h).
 */
#include "kafka/kafka_conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"

static void log_line(const rd_kafka_t *rk, int level, const char *fac, const char *buf,
                     bool quiet_fail)
{
    /* syslog levels: 0-3 error, 4 warning, 5-6 notice/info, 7 debug */
    enum mcdc_log_level lvl = level <= 3   ? MCDC_LOG_ERROR
                              : level == 4 ? MCDC_LOG_WARN
                              : level <= 6 ? MCDC_LOG_INFO
                                           : MCDC_LOG_DEBUG;
    if (quiet_fail && strcmp(fac, "FAIL") == 0)
        lvl = MCDC_LOG_DEBUG;
    if (!MCDC_LOG_ENABLED(lvl))
        return;
    char line[1024];
    snprintf(line, sizeof line, "%s: %s: %s", rd_kafka_name(rk), fac, buf);
    mcdc_log_write(lvl, "rdkafka", line);
}

void mcdc_kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    log_line(rk, level, fac, buf, false);
}

void mcdc_kafka_log_cb_quiet(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    log_line(rk, level, fac, buf, true);
}

bool mcdc_kafka_set(rd_kafka_conf_t *conf, const struct mcdc_config *cfg, const char *prefix,
                    const char *k, const char *v, const struct mcdc_kv *kv, struct mcdc_error *err)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof errstr) == RD_KAFKA_CONF_OK)
        return true;
    if (kv && kv->line > 0)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "%s:%d:%d: %s%s: %s",
                              cfg->path ? cfg->path : "config", kv->line, kv->col, prefix, k,
                              errstr);
    if (kv)
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "%s%s: %s", prefix, k, errstr);
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

int64_t mcdc_kafka_txn_timeout_ms(const struct mcdc_config *cfg)
{
    int64_t v = mcdc_config_kafka_txn_timeout_ms(cfg);
    return v > 0 ? v : 60000;
}

rd_kafka_conf_t *mcdc_kafka_producer_conf(const struct mcdc_config *cfg, const char *client_tag,
                                          const char *transactional_id, struct mcdc_error *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char client_id[256], kbytes[32], msg_timeout[32] = "0";
    snprintf(client_id, sizeof client_id, "mongocdc-%s", client_tag ? client_tag : "main");
    int64_t qbytes = cfg->sink_queue_bytes > 0 ? cfg->sink_queue_bytes : 16 * 1024 * 1024;
    snprintf(kbytes, sizeof kbytes, "%lld", (long long)(qbytes < 1024 ? 1 : qbytes / 1024));
    rd_kafka_conf_set_log_cb(conf, mcdc_kafka_log_cb);
    if (transactional_id != NULL)
        snprintf(msg_timeout, sizeof msg_timeout, "%lld",
                 (long long)mcdc_kafka_txn_timeout_ms(cfg));
    bool ok = mcdc_kafka_set(conf, cfg, "", "client.id", client_id, NULL, err) &&
              (transactional_id == NULL ||
               mcdc_kafka_set(conf, cfg, "", "transactional.id", transactional_id, NULL, err)) &&
              mcdc_kafka_set(conf, cfg, "", "enable.idempotence", "true", NULL, err) &&
              mcdc_kafka_set(conf, cfg, "", "acks", "all", NULL, err) &&
              mcdc_kafka_set(conf, cfg, "", "queue.buffering.max.kbytes", kbytes, NULL, err) &&
              mcdc_kafka_set(conf, cfg, "", "message.timeout.ms", msg_timeout, NULL, err);
    for (size_t i = 0; ok && i < cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &cfg->kafka.items[i];
        ok = check_locked(cfg, kv, err) &&
             mcdc_kafka_set(conf, cfg, "kafka.", kv->key, kv->value, kv, err);
    }
    if (!ok) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}
