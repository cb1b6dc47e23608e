/*
 * kafka/kafka_clients: the settings of the clients other than the record
 * producer: the offsets store's writer and reader, the clients of the signal
 * and notification paths (kafka_conf.h).
 */
#include <stdio.h>
#include <string.h>

#include "kafka/kafka_conf.h"

/* The user's kafka: map for the offsets store, with bootstrap (when given)
 * replacing a mock cluster setting. */
static bool store_map(rd_kafka_conf_t *conf, const struct mcdc_config *cfg, const char *bootstrap,
                      bool consumer, struct mcdc_error *err)
{
    for (size_t i = 0; i < cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &cfg->kafka.items[i];
        if (bootstrap && !strcmp(kv->key, "test.mock.num.brokers"))
            continue;
        if (consumer && mcdc_kafka_producer_only(kv->key))
            continue; /* the reader is a consumer: no CONFWARN for the producer's settings */
        if (!strcmp(kv->key, "enable.idempotence"))
            continue; /* forced below */
        if (!mcdc_kafka_set(conf, cfg, "kafka.", kv->key, kv->value, kv, err))
            return false;
    }
    if (bootstrap && !mcdc_kafka_set(conf, cfg, "", "bootstrap.servers", bootstrap, NULL, err))
        return false;
    return true;
}

rd_kafka_conf_t *mcdc_kafka_store_conf(const struct mcdc_config *cfg, bool reader,
                                       const char *bootstrap, struct mcdc_error *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    bool ok;
    rd_kafka_conf_set_log_cb(conf, mcdc_kafka_log_cb);
    if (reader) {
        ok = store_map(conf, cfg, bootstrap, true, err) &&
             mcdc_kafka_set(conf, cfg, "", "enable.partition.eof", "true", NULL, err) &&
             mcdc_kafka_set(conf, cfg, "", "client.id", "mongocdc-offsets-load", NULL, err);
    } else {
        char client_id[256];
        snprintf(client_id, sizeof client_id, "mongocdc-offsets-%s", cfg->topic_prefix);
        ok = mcdc_kafka_set(conf, cfg, "", "client.id", client_id, NULL, err) &&
             mcdc_kafka_set(conf, cfg, "", "partitioner", "murmur2_random", NULL, err) &&
             /* else a metadata lookup would let the broker auto-create the
              * topic without compaction */
             mcdc_kafka_set(conf, cfg, "", "allow.auto.create.topics", "false", NULL, err) &&
             store_map(conf, cfg, bootstrap, false, err) &&
             /* as the record producer: ordered, replicated writes only */
             mcdc_kafka_set(conf, cfg, "", "enable.idempotence", "true", NULL, err) &&
             mcdc_kafka_set(conf, cfg, "", "acks", "all", NULL, err);
    }
    if (!ok) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
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

rd_kafka_conf_t *mcdc_kafka_client_conf(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    for (size_t i = 0; i < cfg->kafka.count; i++) {
        const struct mcdc_kv *kv = &cfg->kafka.items[i];
        if (connection_key(kv->key) &&
            !mcdc_kafka_set(conf, cfg, "kafka.", kv->key, kv->value, kv, err)) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    }
    rd_kafka_conf_set_log_cb(conf, mcdc_kafka_log_cb_quiet);
    return conf;
}

rd_kafka_conf_t *mcdc_kafka_signal_consumer_conf(const struct mcdc_config *cfg,
                                                 const char *client_id, struct mcdc_error *err)
{
    rd_kafka_conf_t *conf = mcdc_kafka_client_conf(cfg, err);
    if (!conf)
        return NULL;
    bool ok =
        (!cfg->signal_kafka_bootstrap || mcdc_kafka_set(conf, cfg, "", "bootstrap.servers",
                                                        cfg->signal_kafka_bootstrap, NULL, err)) &&
        mcdc_kafka_set(conf, cfg, "", "group.id", cfg->signal_kafka_group, NULL, err) &&
        mcdc_kafka_set(conf, cfg, "", "client.id", client_id, NULL, err) &&
        mcdc_kafka_set(conf, cfg, "", "enable.auto.commit", "false", NULL, err) &&
        mcdc_kafka_set(conf, cfg, "", "auto.offset.reset", "earliest", NULL, err) &&
        mcdc_kafka_set(conf, cfg, "", "session.timeout.ms", "10000", NULL, err) &&
        mcdc_kafka_set(conf, cfg, "", "fetch.wait.max.ms", "100", NULL, err);
    for (size_t i = 0; ok && i < cfg->signal_consumer.count; i++) {
        const struct mcdc_kv *kv = &cfg->signal_consumer.items[i];
        ok = mcdc_kafka_set(conf, cfg, "signal.consumer.", kv->key, kv->value, kv, err);
    }
    if (!ok) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}
