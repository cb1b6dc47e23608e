/*
 * sink/sink_kafka: the Kafka sink, one librdkafka producer per capture task
 * (design.md §6, style.md §4.9).
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
 * Flow: sink_produce() hands the value with RD_KAFKA_MSG_F_FREE (librdkafka
 * frees it after delivery; the key is always copied by librdkafka, so the
 * sink frees it at once). When the bounded queue is full
 * (RD_KAFKA_RESP_ERR__QUEUE_FULL) the calling thread polls delivery reports
 * and retries: backpressure, nothing dropped; the stop flag ends the wait. A
 * record larger than message.max.bytes is refused at produce, or by the broker
 * in the delivery report (MSG_SIZE_TOO_LARGE): both give an error naming the
 * topic, the start of the key and the size; the delivery callback receives it
 * and the worker decides (stop), never a silent drop. A broker refuses the
 * whole batch, so records sent in the same batch fail with it (librdkafka does
 * not split batches); each report names its own record. Delivery reports, the
 * error callback and thus the fatal flag are served by rd_kafka_poll() on the
 * task's thread inside sink_poll/produce/flush. librdkafka's log lines go to
 * the project log with component "rdkafka".
 *
 * Thread: worker (librdkafka's own threads only call log_cb).
 */
#include "sink/sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <librdkafka/rdkafka.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "sink/sink_internal.h"

#define KEY_EXCERPT 64

struct topic_entry {
    const char *ptr; /* the encoder's pointer, checked first */
    char *name;
    rd_kafka_topic_t *rkt;
};

struct kafka_sink {
    struct sink *sink;
    rd_kafka_t *rk;
    struct topic_entry *topics;
    size_t n_topics, cap_topics, last_topic;
    int served;      /* delivery reports served during the current call */
    bool destroying; /* no callbacks while tearing down */
    int fatal_code;
    char fatal_msg[512];
};

static void log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
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

static void error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    struct kafka_sink *ks = opaque;
    if (code == RD_KAFKA_RESP_ERR__FATAL) {
        char why[512];
        rd_kafka_resp_err_t orig = rd_kafka_fatal_error(rk, why, sizeof why);
        ks->fatal_code = orig;
        snprintf(ks->fatal_msg, sizeof ks->fatal_msg, "%s", why);
        LOG_ERROR("kafka producer %s: fatal error %s: %s", rd_kafka_name(rk),
                  rd_kafka_err2name(orig), why);
        return;
    }
    /* Broker outages and the like: librdkafka retries by itself. */
    LOG_WARN("kafka producer %s: %s: %s", rd_kafka_name(rk), rd_kafka_err2name(code), reason);
}

/*
 * The error for a record over a size limit. It has to fit in one
 * struct mcdc_error message (MCDC_ERROR_MSG_SIZE) with its advice intact:
 * the size, the limit hit (where), the topic (up to TOO_LARGE_TOPIC bytes)
 * and the key (up to TOO_LARGE_KEY bytes), each once.
 */
#define TOO_LARGE_KEY 52
#define TOO_LARGE_TOPIC 48
static void too_large(struct mcdc_error *err, const char *topic, const void *key, size_t key_len,
                      size_t value_len, const char *where)
{
    char k[TOO_LARGE_KEY + 4];
    sink_key_excerpt(key, key_len, k, TOO_LARGE_KEY);
    mcdc_error_set(err, MCDC_ERR_KAFKA, RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE,
                   "record of %zu bytes too large (%s): topic %.*s%s, key %s; raise "
                   "message.max.bytes on producer and broker, or exclude fields",
                   value_len + key_len, where, TOO_LARGE_TOPIC, topic,
                   strlen(topic) > TOO_LARGE_TOPIC ? "..." : "", k);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    struct kafka_sink *ks = opaque;
    if (ks->destroying)
        return;
    struct sink *sink = ks->sink;
    sink->in_flight--;
    sink->in_flight_bytes -= msg->len + msg->key_len;
    sink->last_latency_us = rd_kafka_message_latency(msg);
    ks->served++;
    if (!sink->cb)
        return;
    if (!msg->err) {
        sink->cb(msg->_private, NULL, sink->cb_ctx);
        return;
    }
    struct mcdc_error err = MCDC_ERROR_INIT;
    const char *topic = rd_kafka_topic_name(msg->rkt);
    if (msg->err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
        too_large(&err, topic, msg->key, msg->key_len, msg->len, "refused by the broker");
    } else {
        char k[KEY_EXCERPT + 4];
        sink_key_excerpt(msg->key, msg->key_len, k, KEY_EXCERPT);
        mcdc_error_from_kafka(&err, msg->err, rd_kafka_err2str(msg->err),
                              msg->err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
        mcdc_error_prefix(&err, "delivery to %s failed (key %s)", topic, k);
    }
    sink->cb(msg->_private, &err, sink->cb_ctx);
}

static rd_kafka_topic_t *topic_get(struct kafka_sink *ks, const char *name)
{
    if (ks->n_topics && ks->topics[ks->last_topic].ptr == name)
        return ks->topics[ks->last_topic].rkt;
    for (size_t i = 0; i < ks->n_topics; i++) {
        if (ks->topics[i].ptr == name || !strcmp(ks->topics[i].name, name)) {
            ks->topics[i].ptr = name;
            ks->last_topic = i;
            return ks->topics[i].rkt;
        }
    }
    if (ks->n_topics == ks->cap_topics) {
        ks->cap_topics = ks->cap_topics ? ks->cap_topics * 2 : 16;
        ks->topics = xrealloc(ks->topics, ks->cap_topics * sizeof *ks->topics);
    }
    struct topic_entry *t = &ks->topics[ks->n_topics];
    t->rkt = rd_kafka_topic_new(ks->rk, name, NULL);
    if (!t->rkt)
        return NULL;
    t->ptr = name;
    t->name = xstrdup(name);
    ks->last_topic = ks->n_topics++;
    return t->rkt;
}

static bool fatal_error(struct kafka_sink *ks, struct mcdc_error *err)
{
    char why[512];
    rd_kafka_resp_err_t code = rd_kafka_fatal_error(ks->rk, why, sizeof why);
    if (code == RD_KAFKA_RESP_ERR_NO_ERROR && !ks->fatal_code)
        return false;
    if (code == RD_KAFKA_RESP_ERR_NO_ERROR) {
        code = ks->fatal_code;
        snprintf(why, sizeof why, "%s", ks->fatal_msg);
    }
    mcdc_error_set(err, MCDC_ERR_KAFKA, code, "kafka producer fatal error %s: %s",
                   rd_kafka_err2name(code), why);
    return true;
}

static bool kafka_produce(struct sink *sink, struct mcdc_record *rec, void *opaque,
                          const volatile bool *stop, struct mcdc_error *err)
{
    struct kafka_sink *ks = sink->impl;
    rd_kafka_topic_t *rkt = topic_get(ks, rec->topic);
    if (!rkt) {
        rd_kafka_resp_err_t e = rd_kafka_last_error();
        return mcdc_error_set(err, MCDC_ERR_KAFKA, e, "topic %s: %s", rec->topic,
                              rd_kafka_err2str(e));
    }
    for (;;) {
        rd_kafka_resp_err_t e;
        if (rec->header_count == 0) {
            e = rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_FREE, rec->value,
                                 rec->value_len, rec->key, rec->key_len, opaque) == 0
                    ? RD_KAFKA_RESP_ERR_NO_ERROR
                    : rd_kafka_last_error();
        } else {
            /* String headers, as Kafka Connect's SimpleHeaderConverter writes
             * them: the UTF-8 bytes, no terminator. The message takes the
             * headers on success; on failure they are still ours. */
            rd_kafka_headers_t *hdrs = rd_kafka_headers_new(rec->header_count);
            for (size_t i = 0; i < rec->header_count; i++)
                rd_kafka_header_add(hdrs, rec->headers[i].name, -1, rec->headers[i].value, -1);
            e = rd_kafka_producev(ks->rk, RD_KAFKA_V_RKT(rkt),
                                  RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                                  RD_KAFKA_V_VALUE(rec->value, rec->value_len),
                                  RD_KAFKA_V_KEY(rec->key, rec->key_len),
                                  RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_OPAQUE(opaque),
                                  RD_KAFKA_V_END);
            if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
                rd_kafka_headers_destroy(hdrs);
        }
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            sink->in_flight++;
            sink->in_flight_bytes += rec->value_len + rec->key_len;
            free(rec->key); /* librdkafka copied it */
            rec->key = rec->value = NULL;
            ks->served = 0;
            rd_kafka_poll(ks->rk, 0);
            return true;
        }
        switch (e) {
        case RD_KAFKA_RESP_ERR__QUEUE_FULL:
            /* Backpressure (librdkafka examples/producer.c): serve delivery
             * reports until there is room; the capture thread waits here. */
            if (stop && *stop)
                return mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, e,
                                                "stopped while the producer queue was full");
            rd_kafka_poll(ks->rk, 100);
            continue;
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
            too_large(err, rec->topic, rec->key, rec->key_len, rec->value_len,
                      "over producer message.max.bytes");
            return false;
        case RD_KAFKA_RESP_ERR__FATAL:
            if (!fatal_error(ks, err))
                mcdc_error_set(err, MCDC_ERR_KAFKA, e, "kafka producer fatal error");
            return false;
        default:
            return mcdc_error_set(err, MCDC_ERR_KAFKA, e, "produce to %s: %s", rec->topic,
                                  rd_kafka_err2str(e));
        }
    }
}

static int kafka_poll(struct sink *sink, int timeout_ms)
{
    struct kafka_sink *ks = sink->impl;
    ks->served = 0;
    rd_kafka_poll(ks->rk, timeout_ms);
    return ks->served;
}

static bool kafka_flush(struct sink *sink, int timeout_ms, struct mcdc_error *err)
{
    struct kafka_sink *ks = sink->impl;
    rd_kafka_resp_err_t e = rd_kafka_flush(ks->rk, timeout_ms);
    if (e == RD_KAFKA_RESP_ERR_NO_ERROR && sink->in_flight == 0)
        return true;
    return mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, RD_KAFKA_RESP_ERR__TIMED_OUT,
                                    "kafka flush: %zu records not acknowledged within %d ms",
                                    sink->in_flight, timeout_ms);
}

static bool kafka_fatal(struct sink *sink, struct mcdc_error *err)
{
    return fatal_error(sink->impl, err);
}

static void kafka_destroy(struct sink *sink)
{
    struct kafka_sink *ks = sink->impl;
    ks->destroying = true;
    if (ks->rk)
        rd_kafka_purge(ks->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    for (size_t i = 0; i < ks->n_topics; i++) {
        rd_kafka_topic_destroy(ks->topics[i].rkt);
        free(ks->topics[i].name);
    }
    free(ks->topics);
    if (ks->rk)
        rd_kafka_destroy(ks->rk);
    free(ks);
}

static const struct sink_ops kafka_ops = {kafka_produce, kafka_poll, kafka_flush, kafka_fatal,
                                          kafka_destroy};

void *sink_kafka_handle(struct sink *sink)
{
    if (sink->ops != &kafka_ops)
        return NULL;
    return ((struct kafka_sink *)sink->impl)->rk;
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

bool sink_kafka_open(struct sink *sink, const char *client_tag, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = sink->cfg;
    struct kafka_sink *ks = xcalloc(1, sizeof *ks);
    ks->sink = sink;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set_log_cb(conf, log_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, ks);

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
    if (!ok) {
        rd_kafka_conf_destroy(conf);
        free(ks);
        return false;
    }
    char errstr[512];
    ks->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!ks->rk) {
        rd_kafka_conf_destroy(conf);
        free(ks);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "kafka producer: %s", errstr);
    }
    sink->impl = ks;
    sink->ops = &kafka_ops;
    return true;
}
