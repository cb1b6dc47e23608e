/*
 * signals/util.c: helpers of the channels, notifications and the signal
 * command (signals_internal.h).
 */
#include "signals/signals_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

void *sig_zalloc_aligned(size_t align, size_t n)
{
    void *p = NULL;
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (posix_memalign(&p, align, n ? n : 1) != 0)
        abort();
    memset(p, 0, n ? n : 1);
    return p;
}

void sig_rdkafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    /* syslog levels: 0-3 error, 4 warning, 5-6 notice/info, 7 debug */
    enum mcdc_log_level lvl = level <= 3   ? MCDC_LOG_ERROR
                              : level == 4 ? MCDC_LOG_WARN
                              : level <= 6 ? MCDC_LOG_INFO
                                           : MCDC_LOG_DEBUG;
    /* A broker that cannot be reached: the channel's error callback WARNs
     * once per outage; librdkafka would log an ERROR at every retry. */
    if (strcmp(fac, "FAIL") == 0)
        lvl = MCDC_LOG_DEBUG;
    if (!MCDC_LOG_ENABLED(lvl))
        return;
    char line[1024];
    snprintf(line, sizeof line, "%s: %s: %s", rd_kafka_name(rk), fac, buf);
    mcdc_log_write(lvl, "rdkafka", line);
}

bool sig_kafka_set(rd_kafka_conf_t *conf, const char *k, const char *v, struct mcdc_error *err)
{
    char errstr[512];
    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof errstr) == RD_KAFKA_CONF_OK)
        return true;
    return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "%s: %s", k, errstr);
}

/* kafka: keys that say how to reach and authenticate to the cluster. */
static bool connection_key(const char *k)
{
    static const char *const prefixes[] = {"bootstrap.servers",
                                           "metadata.broker.list",
                                           "security.",
                                           "sasl.",
                                           "ssl.",
                                           "ssl_",
                                           "client.",
                                           "socket.",
                                           "broker.",
                                           "api.version",
                                           NULL};
    for (size_t i = 0; prefixes[i]; i++)
        if (strncmp(k, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    return false;
}

rd_kafka_conf_t *sig_kafka_conf(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &cfg->kafka.items[i];
        if (connection_key(kv->key) && !sig_kafka_set(conf, kv->key, kv->value, err)) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    rd_kafka_conf_set_log_cb(conf, sig_rdkafka_log);
    return conf;
}

const char *sig_kafka_topic(const struct mcdc_config *cfg, char *buf, size_t cap)
{
    if (cfg->signal_kafka_topic && *cfg->signal_kafka_topic)
        return cfg->signal_kafka_topic;
    snprintf(buf, cap, "%s-signal", cfg->topic_prefix ? cfg->topic_prefix : "");
    return buf;
}

char *sig_to_json(const char *id, const char *type, const bson_t *data)
{
    struct ejson_buf b = {0};
    sig_put(&b, "{\"id\":");
    sig_put_json(&b, id);
    sig_put(&b, ",\"type\":");
    sig_put_json(&b, type);
    sig_put(&b, ",\"data\":");
    if (data && !bson_empty(data)) {
        /* relaxed extended JSON from the project's writer: the same bytes
         * with every libbson version */
        ejson_write_document(&b, data, EJSON_RELAXED, EJSON_SEP_COMPACT);
    } else {
        sig_put(&b, "{}");
    }
    sig_put(&b, "}");
    char *out = ejson_buf_steal(&b, NULL);
    ejson_buf_free(&b);
    return out;
}
