/*
 * sink/sink_kafka: the Kafka sink, one librdkafka producer per capture task
 * (design.md §6, style.md §4.9). The producer's settings (defaults, the
 * `kafka:` map, the two locked keys) and its log callback are
 * kafka/kafka_conf.h's mcdc_kafka_producer_conf.
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
 * not split batches); each report names its own record.
 *
 * Dead-letter topic (errors.deadletterqueue.topic.name, Kafka Connect's name;
 * empty = the stop above): a too-large record is produced instead to that
 * topic with the same key, string headers saying why (dead_letter() below)
 * and the value, or, when the copy is too large as well, a small JSON value
 * with only the metadata (original topic, key, size, namespace, _id). The
 * copy carries the original record's opaque: the delivery callback
 * acknowledges the original only when Kafka acknowledges the copy, so the
 * stored offset never passes a record that is not in Kafka in one form or
 * the other, and the order tracker keeps the other records in order. Copies
 * of records refused in a delivery report are produced from inside dr_cb
 * (librdkafka's producer calls are safe there); if that produce itself
 * fails, the original's error is reported as without the option. A broker
 * refuses a whole batch, so small records batched with a too-large one are
 * dead-lettered with it (each with its own headers). Delivery reports, the
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

#include <librdkafka/rdkafka.h>

#include "common/jsonesc.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kafka/kafka_conf.h"
#include "sink/sink_kafka_internal.h"

#define KEY_EXCERPT 64

/*
 * The opaque librdkafka carries for each message while a dead-letter topic is
 * configured: the caller's opaque and what a dead-letter copy needs to say.
 * One allocation (the strings follow it); freed when the record is reported.
 */
enum dl_stage { DL_ORIGINAL = 0, DL_WITH_VALUE, DL_META_ONLY };
struct dl_ctx {
    void *opaque;
    enum dl_stage stage;
    size_t size;                   /* key + value bytes of the original record */
    const char *topic;             /* the original topic */
    const char *ns;                /* namespace, "" when unknown */
    const char *id;                /* _id, "" when unknown */
    char why[MCDC_ERROR_MSG_SIZE]; /* the too-large error: which limit refused it */
};

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

static struct dl_ctx *dl_ctx_new(void *opaque, const char *topic, const char *ns, const char *id,
                                 size_t size)
{
    size_t lt = strlen(topic) + 1, ln = ns ? strlen(ns) + 1 : 1, li = id ? strlen(id) + 1 : 1;
    struct dl_ctx *c = xcalloc(1, sizeof *c + lt + ln + li);
    char *p = (char *)(c + 1);
    c->opaque = opaque;
    c->size = size;
    c->topic = memcpy(p, topic, lt);
    c->ns = memcpy(p + lt, ns ? ns : "", ln);
    c->id = memcpy(p + lt + ln, id ? id : "", li);
    return c;
}

/* Appends s as a JSON string (quoted, escaped) to out, which holds cap bytes,
 * at least at + 6 * len + 2. Returns the new end. */
static size_t json_str(char *out, size_t at, size_t cap, const char *s, size_t len)
{
    out[at++] = '"';
    at += mcdc_json_escape(MCDC_JSON_MINIMAL, out + at, cap - at, s, len, NULL);
    out[at++] = '"';
    return at;
}

/*
 * Produces the dead-letter copy of a too-large record: stage DL_WITH_VALUE
 * sends value (copied), DL_META_ONLY a JSON object of the metadata. ctx
 * becomes the message's opaque on success (false: still the caller's, and
 * rd_kafka_last_error-style code in *code).
 */
static bool dl_produce(struct kafka_sink *ks, struct dl_ctx *ctx, const void *key, size_t key_len,
                       const void *value, size_t value_len, rd_kafka_resp_err_t *code)
{
    char size[32], *meta = NULL;
    size_t meta_len = 0;
    snprintf(size, sizeof size, "%zu", ctx->size);
    if (ctx->stage == DL_META_ONLY) {
        size_t cap = 160 + 6 * (strlen(ctx->topic) + key_len + strlen(ctx->ns) + strlen(ctx->id));
        meta = xmalloc(cap);
        size_t at = (size_t)snprintf(meta, cap, "{\"topic\":");
        at = json_str(meta, at, cap, ctx->topic, strlen(ctx->topic));
        at += (size_t)snprintf(meta + at, cap - at, ",\"key\":");
        at = key ? json_str(meta, at, cap, key, key_len)
                 : at + (size_t)snprintf(meta + at, cap - at, "null");
        at += (size_t)snprintf(meta + at, cap - at, ",\"size\":%zu,\"namespace\":", ctx->size);
        at = json_str(meta, at, cap, ctx->ns, strlen(ctx->ns));
        at += (size_t)snprintf(meta + at, cap - at, ",\"_id\":");
        at = json_str(meta, at, cap, ctx->id, strlen(ctx->id));
        at += (size_t)snprintf(meta + at, cap - at, "}");
        meta_len = at;
        value = meta;
        value_len = meta_len;
    }
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);
    rd_kafka_header_add(h, "__connect.errors.topic", -1, ctx->topic, -1);
    rd_kafka_header_add(h, "__connect.errors.exception.message", -1, ctx->why, -1);
    rd_kafka_header_add(h, "mongocdc.dlq.reason", -1, "MSG_SIZE_TOO_LARGE", -1);
    rd_kafka_header_add(h, "mongocdc.dlq.topic", -1, ctx->topic, -1);
    rd_kafka_header_add(h, "mongocdc.dlq.size", -1, size, -1);
    rd_kafka_header_add(h, "mongocdc.dlq.namespace", -1, ctx->ns, -1);
    rd_kafka_header_add(h, "mongocdc.dlq.id", -1, ctx->id, -1);
    rd_kafka_header_add(h, "mongocdc.dlq.value", -1,
                        ctx->stage == DL_META_ONLY ? "omitted" : "included", -1);
    *code = rd_kafka_producev(
        ks->rk, RD_KAFKA_V_RKT(ks->dlq), RD_KAFKA_V_PARTITION(RD_KAFKA_PARTITION_UA),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_VALUE((void *)value, value_len),
        RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_OPAQUE(ctx),
        RD_KAFKA_V_END);
    free(meta);
    if (*code != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(h);
        return false;
    }
    ks->sink->in_flight++;
    ks->sink->in_flight_bytes += value_len + key_len;
    return true;
}

/*
 * A too-large record (err says so) goes to the dead-letter topic: with its
 * value, else with only its metadata. ctx (the record's dl_ctx) is taken on
 * success. Logs the WARN. wait: the caller may poll (sink_produce), so a full
 * queue is waited out (stop ends the wait); from a delivery report it is
 * not. Returns false (ctx still the caller's), with the reason in *code,
 * when even the metadata cannot be produced.
 */
static bool dead_letter(struct kafka_sink *ks, struct dl_ctx *ctx, const struct mcdc_error *err,
                        const void *key, size_t key_len, const void *value, size_t value_len,
                        bool wait, const atomic_bool *stop, rd_kafka_resp_err_t *code)
{
    char k[KEY_EXCERPT + 4];
    bool ok;
    snprintf(ctx->why, sizeof ctx->why, "%s", err->msg);
    ctx->stage = value ? DL_WITH_VALUE : DL_META_ONLY;
    for (;;) {
        ok = dl_produce(ks, ctx, key, key_len, ctx->stage == DL_META_ONLY ? NULL : value, value_len,
                        code);
        if (!ok && *code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE && ctx->stage == DL_WITH_VALUE) {
            ctx->stage = DL_META_ONLY;
            continue;
        }
        if (ok || *code != RD_KAFKA_RESP_ERR__QUEUE_FULL || !wait || (stop && atomic_load(stop)))
            break;
        rd_kafka_poll(ks->rk, 100); /* backpressure, as in kafka_produce */
    }
    sink_key_excerpt(key, key_len, k, KEY_EXCERPT);
    if (!ok) {
        LOG_ERROR("cannot produce the dead-letter copy of a record for %s key %s: %s", ctx->topic,
                  k, rd_kafka_err2str(*code));
        return false;
    }
    LOG_WARN("record of %zu bytes for %s (%s _id %s, key %s) is too large: sent to the "
             "dead-letter topic %s %s: %s",
             ctx->size, ctx->topic, ctx->ns[0] ? ctx->ns : "?", ctx->id[0] ? ctx->id : "?", k,
             rd_kafka_topic_name(ks->dlq),
             ctx->stage == DL_META_ONLY ? "(metadata only, the value is too large too)"
                                        : "(with its value)",
             err->msg);
    return true;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    struct kafka_sink *ks = opaque;
    if (ks->destroying) {
        if (ks->dlq && msg->_private != &sink_control_marker)
            free(msg->_private); /* the purged record's dl_ctx */
        return;
    }
    if (msg->_private == &sink_control_marker) {
        /* the offsets record of a transaction (sink_kafka_txn.c) */
        if (msg->err)
            ks->control_err = msg->err;
        return;
    }
    struct sink *sink = ks->sink;
    struct dl_ctx *ctx = ks->dlq ? msg->_private : NULL;
    void *user = ctx ? ctx->opaque : msg->_private;
    sink->in_flight--;
    sink->in_flight_bytes -= msg->len + msg->key_len;
    int64_t latency_us = rd_kafka_message_latency(msg);
    bool dead_lettered = ctx && ctx->stage != DL_ORIGINAL;
    ks->served++;
    struct mcdc_error err = MCDC_ERROR_INIT;
    const char *topic = ctx ? ctx->topic : rd_kafka_topic_name(msg->rkt);
    if (msg->err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
        too_large(&err, topic, msg->key, msg->key_len,
                  ctx && ctx->stage != DL_ORIGINAL ? ctx->size - msg->key_len : msg->len,
                  ctx && ctx->stage != DL_ORIGINAL ? "dead-letter copy refused by the broker"
                                                   : "refused by the broker");
        /* Into the dead-letter topic, or, for a copy with its value, once
         * more with only the metadata; acknowledged when that copy is. */
        rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
        if (ctx && ctx->stage != DL_META_ONLY &&
            dead_letter(ks, ctx, &err, msg->key, msg->key_len,
                        ctx->stage == DL_ORIGINAL ? msg->payload : NULL, msg->len, false, NULL,
                        &code))
            return;
        if (code != RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
            /* The copy could not be queued (a full queue, say): a failure the
             * worker retries from its offsets, not the too-large stop. */
            char k[KEY_EXCERPT + 4];
            sink_key_excerpt(msg->key, msg->key_len, k, KEY_EXCERPT);
            mcdc_error_from_kafka(&err, code, rd_kafka_err2str(code), true);
            mcdc_error_prefix(&err, "dead-letter copy of a record for %s (key %s) not produced",
                              topic, k);
        }
    } else if (msg->err) {
        char k[KEY_EXCERPT + 4];
        sink_key_excerpt(msg->key, msg->key_len, k, KEY_EXCERPT);
        mcdc_error_from_kafka(&err, msg->err, rd_kafka_err2str(msg->err),
                              msg->err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT);
        mcdc_error_prefix(&err, "delivery to %s failed (key %s)", rd_kafka_topic_name(msg->rkt), k);
    }
    if (!msg->err && dead_lettered)
        ks->dead_lettered++;
    free(ctx);
    if (sink->cb)
        sink->cb(user, msg->err ? &err : NULL, latency_us, !msg->err && dead_lettered,
                 sink->cb_ctx);
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

bool sink_kafka_fatal_error(struct kafka_sink *ks, struct mcdc_error *err)
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
                          const atomic_bool *stop, struct mcdc_error *err)
{
    struct kafka_sink *ks = sink->impl;
    rd_kafka_topic_t *rkt = topic_get(ks, rec->topic);
    if (!rkt) {
        rd_kafka_resp_err_t e = rd_kafka_last_error();
        return mcdc_error_set(err, MCDC_ERR_KAFKA, e, "topic %s: %s", rec->topic,
                              rd_kafka_err2str(e));
    }
    struct dl_ctx *ctx = NULL;
    if (ks->dlq) {
        ctx = dl_ctx_new(opaque, rec->topic, rec->ns, rec->id, rec->key_len + rec->value_len);
        opaque = ctx;
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
                                  RD_KAFKA_V_KEY(rec->key, rec->key_len), RD_KAFKA_V_HEADERS(hdrs),
                                  RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
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
            if (stop && atomic_load(stop)) {
                free(ctx);
                return mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, e,
                                                "stopped while the producer queue was full");
            }
            rd_kafka_poll(ks->rk, 100);
            continue;
        case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
            too_large(err, rec->topic, rec->key, rec->key_len, rec->value_len,
                      "over producer message.max.bytes");
            rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
            if (ctx && dead_letter(ks, ctx, err, rec->key, rec->key_len, rec->value, rec->value_len,
                                   true, stop, &code)) {
                /* The copy stands for the record: acknowledged through ctx. */
                free(rec->key);
                free(rec->value);
                rec->key = rec->value = NULL;
                *err = (struct mcdc_error)MCDC_ERROR_INIT;
                ks->served = 0;
                rd_kafka_poll(ks->rk, 0);
                return true;
            }
            if (code != RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)
                mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, code,
                                         "dead-letter copy of a record for %s not produced: %s",
                                         rec->topic, rd_kafka_err2str(code));
            free(ctx);
            return false;
        case RD_KAFKA_RESP_ERR__FATAL:
            free(ctx);
            if (!sink_kafka_fatal_error(ks, err))
                mcdc_error_set(err, MCDC_ERR_KAFKA, e, "kafka producer fatal error");
            return false;
        default:
            free(ctx);
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
    return sink_kafka_fatal_error(sink->impl, err);
}

static void kafka_destroy(struct sink *sink)
{
    struct kafka_sink *ks = sink->impl;
    ks->destroying = true;
    if (ks->rk)
        rd_kafka_purge(ks->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    if (ks->dlq)
        rd_kafka_topic_destroy(ks->dlq);
    if (ks->control_rkt)
        rd_kafka_topic_destroy(ks->control_rkt);
    free(ks->control_topic);
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

char sink_control_marker;

struct kafka_sink *sink_kafka_state(struct sink *sink)
{
    return sink->ops == &kafka_ops ? sink->impl : NULL;
}

void *sink_kafka_handle(struct sink *sink)
{
    if (sink->ops != &kafka_ops)
        return NULL;
    return ((struct kafka_sink *)sink->impl)->rk;
}

bool sink_kafka_open(struct sink *sink, const char *client_tag, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = sink->cfg;
    struct kafka_sink *ks = xcalloc(1, sizeof *ks);
    ks->sink = sink;
    rd_kafka_conf_t *conf = mcdc_kafka_producer_conf(cfg, client_tag, sink->txn_id, err);
    if (!conf) {
        free(ks);
        return false;
    }
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, ks);
    char errstr[512];
    ks->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!ks->rk) {
        rd_kafka_conf_destroy(conf);
        free(ks);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "kafka producer: %s", errstr);
    }
    if (cfg->dlq_topic && *cfg->dlq_topic) {
        ks->dlq = rd_kafka_topic_new(ks->rk, cfg->dlq_topic, NULL);
        if (!ks->dlq) {
            rd_kafka_resp_err_t e = rd_kafka_last_error();
            rd_kafka_destroy(ks->rk);
            free(ks);
            return mcdc_error_set(err, MCDC_ERR_CONFIG, e,
                                  "errors.deadletterqueue.topic.name %s: %s", cfg->dlq_topic,
                                  rd_kafka_err2str(e));
        }
    }
    sink->impl = ks;
    sink->ops = &kafka_ops;
    return true;
}
