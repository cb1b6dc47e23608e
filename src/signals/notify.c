/*
 * signals/notify.c: Debezium notifications on the `log` and `sink` channels
 * (Debezium LogNotificationChannel, SinkNotificationChannel; the record
 * shape is SchemaFactory.notificationKeySchema / notificationValueSchema).
 * The sink channel has its own producer, so notifications from any task
 * thread never touch a task's sink or its offsets (Debezium queues them
 * with the data records; their offsets carry nothing).
 */
#include "signals/notify.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/uuid.h"
#include "common/xalloc.h"
#include "signals/signals_internal.h"

struct notifier {
    bool log;
    rd_kafka_t *rk; /* sink channel, NULL when off */
    char *topic;
    bool key_schema, value_schema; /* key/value.converter.schemas.enable */
    atomic_ullong failed;          /* records the sink could not deliver */
};

/* JsonConverter envelopes (schemas.enable) of SchemaFactory's
 * notificationKeySchema / notificationValueSchema, names not adjusted. */
#define KEY_SCHEMA                                                                                 \
    "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":false,"        \
    "\"field\":\"id\"}],\"optional\":false,\"name\":\"io.debezium.connector.common."               \
    "NotificationKey\","                                                                           \
    "\"version\":1},\"payload\":"
#define VALUE_SCHEMA                                                                               \
    "{\"schema\":{\"type\":\"struct\",\"fields\":[{\"type\":\"string\",\"optional\":false,"        \
    "\"field\":\"id\"},{\"type\":\"string\",\"optional\":false,\"field\":\"type\"},{\"type\":"     \
    "\"string\",\"optional\":false,\"field\":\"aggregate_type\"},{\"type\":\"map\",\"keys\":{"     \
    "\"type\":\"string\",\"optional\":false},\"values\":{\"type\":\"string\",\"optional\":false}," \
    "\"optional\":true,\"field\":\"additional_data\"},{\"type\":\"int64\",\"optional\":false,"     \
    "\"field\":\"timestamp\"}],\"optional\":false,\"name\":\"io.debezium.connector.common."        \
    "Notification\",\"version\":1},\"payload\":"

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct notifier *n = opaque;
    (void)rk;
    if (m->err) {
        atomic_fetch_add(&n->failed, 1);
        LOG_WARN("notification not delivered to %s: %s", n->topic, rd_kafka_err2str(m->err));
    }
}

static bool has(const struct mcdc_strlist *l, const char *name)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i], name) == 0)
            return true;
    return false;
}

struct notifier *notify_new(const struct mcdc_config *cfg, struct mcdc_error *err)
{
    bool log = has(&cfg->notification_channels, "log");
    bool sink = has(&cfg->notification_channels, "sink");
    if (!log && !sink)
        return NULL;
    struct notifier *n = xcalloc(1, sizeof *n);
    n->log = log;
    n->key_schema = cfg->key_schemas_enable;
    n->value_schema = cfg->value_schemas_enable;
    if (sink) {
        char errstr[512];
        rd_kafka_conf_t *conf = mcdc_kafka_client_conf(cfg, err);
        if (!conf) {
            free(n);
            return NULL;
        }
        if (!mcdc_kafka_set(conf, cfg, "", "client.id", "mongocdc-notifications", NULL, err) ||
            !mcdc_kafka_set(conf, cfg, "", "linger.ms", "10", NULL, err)) {
            rd_kafka_conf_destroy(conf);
            free(n);
            return NULL;
        }
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, n);
        n->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
        if (!n->rk) {
            rd_kafka_conf_destroy(conf);
            free(n);
            mcdc_error_set(err, MCDC_ERR_KAFKA, 0, "notification sink producer: %s", errstr);
            return NULL;
        }
        n->topic = xstrdup(cfg->notification_sink_topic);
    }
    return n;
}

void notify_destroy(struct notifier *n)
{
    if (!n)
        return;
    if (n->rk) {
        rd_kafka_resp_err_t e = rd_kafka_flush(n->rk, 5000);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            LOG_WARN("%d notification(s) not delivered to %s at shutdown: %s",
                     rd_kafka_outq_len(n->rk), n->topic, rd_kafka_err2str(e));
        rd_kafka_destroy(n->rk);
    }
    free(n->topic);
    free(n);
}

void notify_send(struct notifier *n, const char *aggregate_type, const char *type, const char *id,
                 const struct notify_kv *kv, size_t count)
{
    if (!n)
        return;
    if (!id)
        id = "";
    if (n->log) {
        /* Notification.toString(); additionalData prints as Java's Map */
        struct ejson_buf s = {0};
        sig_put(&s, "{aggregateType='");
        sig_put(&s, aggregate_type);
        sig_put(&s, "', type='");
        sig_put(&s, type);
        sig_put(&s, "', additionalData={");
        for (size_t i = 0; i < count; i++) {
            if (i)
                sig_put(&s, ", ");
            sig_put(&s, kv[i].key);
            sig_put(&s, "=");
            sig_put(&s, kv[i].value ? kv[i].value : "null"); /* String.valueOf(null) */
        }
        sig_put(&s, "}}");
        char *text = ejson_buf_steal(&s, NULL);
        ejson_buf_free(&s);
        LOG_INFO("[Notification Service]  %s", text);
        free(text);
    }
    if (n->rk) {
        struct ejson_buf key = {0}, v = {0};
        sig_put(&key, n->key_schema ? KEY_SCHEMA "{\"id\":" : "{\"id\":");
        sig_put_json(&key, id);
        sig_put(&key, n->key_schema ? "}}" : "}");
        sig_put(&v, n->value_schema ? VALUE_SCHEMA "{\"id\":" : "{\"id\":");
        sig_put_json(&v, id);
        sig_put(&v, ",\"type\":");
        sig_put_json(&v, type);
        sig_put(&v, ",\"aggregate_type\":");
        sig_put_json(&v, aggregate_type);
        sig_put(&v, ",\"additional_data\":{");
        for (size_t i = 0; i < count; i++) {
            if (i)
                sig_put(&v, ",");
            sig_put_json(&v, kv[i].key);
            sig_put(&v, ":");
            sig_put_json(&v, kv[i].value ? kv[i].value : "");
        }
        char tail[64];
        int tn = snprintf(tail, sizeof tail, "},\"timestamp\":%lld}%s",
                          (long long)mcdc_clock_wall_ms(), n->value_schema ? "}" : "");
        ejson_buf_append(&v, tail, (size_t)tn);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            n->rk, RD_KAFKA_V_TOPIC(n->topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key.data, key.len), RD_KAFKA_V_VALUE(v.data, v.len), RD_KAFKA_V_END);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            LOG_WARN("notification %s %s not queued for %s: %s", aggregate_type, type, n->topic,
                     rd_kafka_err2str(e));
        rd_kafka_poll(n->rk, 0); /* delivery reports */
        ejson_buf_free(&key);
        ejson_buf_free(&v);
    }
}

void notify_initial_snapshot(struct notifier *n, const char *type, const char *connector_name)
{
    if (!n)
        return;
    char id[37];
    mcdc_uuid_v4(id);
    struct notify_kv kv[] = {{"connector_name", connector_name ? connector_name : ""}};
    notify_send(n, "Initial Snapshot", type, id, kv, 1);
}
