/*
 * preflight/kafka: the Kafka checks of `mongocdc check` (preflight.h): the
 * cluster of the sink and the offset store, the offsets topic's cleanup
 * policy, and the Kafka signal channel's cluster and topic.
 */
#include "preflight/preflight_internal.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <string.h>

#include "kafka/kafka_conf.h"

/* Milliseconds a Kafka metadata or DescribeConfigs request may take. */
#define KAFKA_TIMEOUT_MS 10000

/*
 * The client the daemon itself would run, from the same builder
 * (kafka/kafka_conf.h), so the check tests the daemon's settings: with signal
 * false the record producer (the Kafka sink's: defaults, the `kafka:` map,
 * the locked keys) or, when only the offsets store uses Kafka, the store's
 * writer; with signal true the Kafka signal channel's consumer. librdkafka's
 * own log is silenced: the verdicts say what failed.
 */
static rd_kafka_t *kafka_client(struct pf *p, const struct mcdc_config *cfg, bool signal)
{
    const char *check = signal ? "kafka-signal" : "kafka";
    struct mcdc_error err = {0};
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;

    if (signal)
        conf = mcdc_kafka_signal_consumer_conf(cfg, "mongocdc-check", &err);
    else if (cfg->sink_type == MCDC_SINK_KAFKA)
        conf = mcdc_kafka_producer_conf(cfg, "check", NULL, &err);
    else
        conf = mcdc_kafka_store_conf(cfg, false, NULL, &err);
    if (conf == NULL) {
        pf_say(p, "FAIL", check, "%s", err.msg);
        return NULL;
    }
    rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof errstr);
    rk = rd_kafka_new(signal ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL) {
        pf_say(p, "FAIL", check, "cannot create a %s: %s", signal ? "consumer" : "producer",
               errstr);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

/* cleanup.policy of offsets.topic (Kafka Connect needs compact for its
 * offset topic: KIP-... "offset.storage.topic" must be compacted). */
static void check_offsets_topic(struct pf *p, rd_kafka_t *rk, const char *topic)
{
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev;
    const rd_kafka_DescribeConfigs_result_t *r;
    const rd_kafka_ConfigResource_t **rs;
    size_t n = 0, nc = 0;
    const char *policy = NULL;

    rd_kafka_DescribeConfigs(rk, &res, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, KAFKA_TIMEOUT_MS);
    if (ev == NULL || rd_kafka_event_error(ev)) {
        pf_say(p, "FAIL", "offsets-topic", "cannot describe %s: %s", topic,
               ev != NULL ? rd_kafka_event_error_string(ev) : "timed out");
        goto out;
    }
    r = rd_kafka_event_DescribeConfigs_result(ev);
    rs = rd_kafka_DescribeConfigs_result_resources(r, &n);
    if (n == 1 && rd_kafka_ConfigResource_error(rs[0]) == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        pf_say(p, "PASS", "offsets-topic", "%s does not exist yet; mongocdc creates it compacted",
               topic);
        goto out;
    }
    if (n == 1 && rd_kafka_ConfigResource_error(rs[0])) {
        pf_say(p, "FAIL", "offsets-topic", "cannot describe %s: %s", topic,
               rd_kafka_ConfigResource_error_string(rs[0]));
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const rd_kafka_ConfigEntry_t **e = rd_kafka_ConfigResource_configs(rs[i], &nc);
        for (size_t k = 0; k < nc; k++)
            if (strcmp(rd_kafka_ConfigEntry_name(e[k]), "cleanup.policy") == 0)
                policy = rd_kafka_ConfigEntry_value(e[k]);
    }
    if (policy != NULL && strstr(policy, "compact") != NULL)
        pf_say(p, "PASS", "offsets-topic", "%s has cleanup.policy=%s", topic, policy);
    else
        pf_say(p, "FAIL", "offsets-topic",
               "%s has cleanup.policy=%s: positions would be deleted with old segments; set "
               "cleanup.policy=compact",
               topic, policy ? policy : "(unknown)");
out:
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_ConfigResource_destroy(res);
}

static bool has_channel(const struct mcdc_strlist *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i], name) == 0)
            return true;
    return false;
}

/* The Kafka signal channel's cluster answers and has its topic (Debezium's
 * KafkaSignalChannel reads partition 0 of signal.kafka.topic). */
static void check_signal_kafka(struct pf *p, const struct mcdc_config *cfg)
{
    const struct rd_kafka_metadata *md = NULL;
    char tbuf[300];
    const char *topic = cfg->signal_kafka_topic && *cfg->signal_kafka_topic
                            ? cfg->signal_kafka_topic
                            : (snprintf(tbuf, sizeof tbuf, "%s-signal", cfg->topic_prefix), tbuf);
    rd_kafka_t *rk = kafka_client(p, cfg, true);
    if (rk == NULL)
        return;
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t, &md, KAFKA_TIMEOUT_MS);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        pf_say(p, "FAIL", "kafka-signal",
               "no broker of the signal channel's cluster answered within %d ms: %s (check "
               "signal.kafka.bootstrap.servers, kafka.bootstrap.servers and the security "
               "settings)",
               KAFKA_TIMEOUT_MS, rd_kafka_err2str(e));
    } else if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        pf_say(p, "WARN", "kafka-signal",
               "%d broker(s) answer, but topic %s does not exist yet (%s): signals sent to "
               "it are read once it exists; create it with one partition",
               md->broker_cnt, topic,
               rd_kafka_err2str(md->topic_cnt == 1 ? md->topics[0].err
                                                   : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART));
    } else {
        pf_say(p, "PASS", "kafka-signal", "%d broker(s) answer, topic %s has %d partition(s)",
               md->broker_cnt, topic, md->topics[0].partition_cnt);
    }
    if (md != NULL)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    rd_kafka_destroy(rk);
}

/* exactly.once.support: the broker grants a transactional producer, tried
 * with init_transactions under the id <prefix><name>-check (the tasks' ids
 * are <prefix><name>-<task>, so the same ACL prefix covers it, and the
 * daemon's own producers are not fenced by the check). */
static void check_transactions(struct pf *p, const struct mcdc_config *cfg)
{
    bool required = cfg->exactly_once == MCDC_EXACTLY_ONCE_REQUIRED;
    const char *pre = cfg->transactional_id_prefix ? cfg->transactional_id_prefix : "";
    struct mcdc_error err = MCDC_ERROR_INIT;
    char id[512], errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_error_t *e;
    rd_kafka_t *rk;

    snprintf(id, sizeof id, "%s%s-check", pre, mcdc_config_connector_name(cfg));
    conf = mcdc_kafka_producer_conf(cfg, "check", id, &err);
    if (conf == NULL) {
        pf_say(p, "FAIL", "kafka-transactions", "%s", err.msg);
        return;
    }
    rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof errstr);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (rk == NULL) {
        rd_kafka_conf_destroy(conf);
        pf_say(p, "FAIL", "kafka-transactions", "cannot create a transactional producer: %s",
               errstr);
        return;
    }
    e = rd_kafka_init_transactions(rk, KAFKA_TIMEOUT_MS);
    if (e == NULL)
        pf_say(p, "PASS", "kafka-transactions",
               "the broker grants transactions (init_transactions as %s)", id);
    else if (rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_TRANSACTION_TIMEOUT)
        pf_say(p, "FAIL", "kafka-transactions",
               "kafka.transaction.timeout.ms (%lld ms) is above the broker's "
               "transaction.max.timeout.ms: the daemon would stop at start; lower it",
               (long long)mcdc_kafka_txn_timeout_ms(cfg));
    else if (rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT)
        pf_say(p, required ? "FAIL" : "WARN", "kafka-transactions",
               "no transaction coordinator answered within %d ms (a single broker needs "
               "transaction.state.log.replication.factor=1 and transaction.state.log.min.isr=1)%s",
               KAFKA_TIMEOUT_MS, "; the daemon waits for one at start, with a WARN");
    else
        pf_say(p, required ? "FAIL" : "WARN", "kafka-transactions",
               "init_transactions as %s: %s: %s%s", id, rd_kafka_err2name(rd_kafka_error_code(e)),
               rd_kafka_error_string(e),
               required ? " (exactly.once.support required stops the start)"
                        : " (requested: the daemon delivers at-least-once)");
    if (e != NULL)
        rd_kafka_error_destroy(e);
    rd_kafka_destroy(rk);
}

void pf_check_kafka(struct pf *p, const struct mcdc_config *cfg)
{
    bool sink = cfg->sink_type == MCDC_SINK_KAFKA, store = cfg->offset_storage == MCDC_OFFSETS_KAFKA;
    bool signal = has_channel(&cfg->signal_channels, "kafka");
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e;
    rd_kafka_t *rk;

    if (signal)
        check_signal_kafka(p, cfg);
    if (!sink && !store) {
        pf_say(p, "SKIP", "kafka", "neither sink.type nor offsets.storage is kafka");
        return;
    }
    rk = kafka_client(p, cfg, false);
    if (rk == NULL)
        return;
    e = rd_kafka_metadata(rk, 0, NULL, &md, KAFKA_TIMEOUT_MS);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        pf_say(p, "FAIL", "kafka",
               "no broker answered within %d ms: %s (check kafka.bootstrap.servers "
               "and the security settings)",
               KAFKA_TIMEOUT_MS, rd_kafka_err2str(e));
    } else {
        pf_say(p, "PASS", "kafka", "%d broker(s) answer, controller %d", md->broker_cnt,
               (int)rd_kafka_controllerid(rk, 0));
        rd_kafka_metadata_destroy(md);
        if (store)
            check_offsets_topic(p, rk, cfg->offsets_topic);
        if (sink && cfg->exactly_once != MCDC_EXACTLY_ONCE_DISABLED)
            check_transactions(p, cfg);
    }
    rd_kafka_destroy(rk);
}
