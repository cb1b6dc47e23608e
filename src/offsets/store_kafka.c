/*
 * offsets/store_kafka: offsets in a compacted Kafka topic (offsets.topic,
 * default "mongocdc-offsets"), in the Kafka Connect offsets format
 * (debezium-format.md §4.1): record key
 *
 *   ["<topic.prefix>",{"rs":"<rs>","server_id":"<topic.prefix>"}]
 *
 * and record value the offset JSON (§4.2). Why the exact key bytes matter:
 * Kafka Connect (and this store) look offsets up by the serialized key, log
 * compaction keeps the last record per identical key bytes, and the default
 * partitioner hashes those bytes. Reproducing JsonConverter's compact output
 * with its HashMap member order ("rs" before "server_id") lets a Debezium
 * 1.x-2.5 deployment's offsets topic be adopted (and back), and keeps
 * compaction from holding two keys for one replica set. The producer uses
 * partitioner=murmur2_random, the Java client's partitioner, so a key lands
 * in the partition Kafka Connect would read it from.
 *
 * save = produce + flush, synchronous within offsets.flush.timeout.ms (an
 * idempotent producer, so a save that timed out and is retried cannot reorder
 * behind a newer one). load = read every partition from the beginning to its
 * high watermark with a plain assign-style consumer and keep the last value of
 * every key (a null value is a deletion); the front (store.c) picks the keys
 * it wants, so a load of several partition forms reads the topic once. On open, a missing topic is created
 * with cleanup.policy=compact (1 partition) when the broker allows it;
 * otherwise a warning says how to create it. With librdkafka's in-process
 * mock cluster (test.mock.num.brokers), which has no CreateTopics, the topic
 * is created in the mock directly.
 *
 * Thread: worker (each task has its own producer; load builds a short-lived
 * consumer).
 */
#include "offsets/offsets.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"
#include "kafka/kafka_conf.h"
#include "offsets/offsets_internal.h"

struct kafka_store {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    const char *topic;
    char *bootstrap; /* mock cluster bootstraps when test.mock.num.brokers is used */
    int timeout_ms;
    /* delivery of the save in progress, written by the delivery callback */
    bool dr_done;
    rd_kafka_resp_err_t dr_err;
};

static void error_cb(rd_kafka_t *rk, int code, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    LOG_WARN("offsets store: kafka: %s: %s", rd_kafka_err2name(code), reason);
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
    (void)rk;
    struct kafka_store *ks = opaque;
    ks->dr_done = true;
    ks->dr_err = msg->err;
}

static bool ensure_topic(struct kafka_store *ks)
{
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(ks->rk, 0, ks->rkt, &md, ks->timeout_ms);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        LOG_WARN("offsets store: metadata for topic %s: %s (continuing)", ks->topic,
                 rd_kafka_err2str(e));
        return false;
    }
    bool exists = md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
                  md->topics[0].partition_cnt > 0;
    int brokers = md->broker_cnt;
    rd_kafka_metadata_destroy(md);
    if (exists)
        return true;

    char errstr[256];
    int rf = brokers >= 3 ? 3 : (brokers > 0 ? brokers : 1);
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(ks->topic, 1, rf, errstr, sizeof errstr);
    if (!nt)
        return false;
    rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
    rd_kafka_queue_t *q = rd_kafka_queue_new(ks->rk);
    rd_kafka_CreateTopics(ks->rk, &nt, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, ks->timeout_ms + 1000);
    bool ok = false;
    const char *why = "timed out";
    if (ev) {
        const rd_kafka_CreateTopics_result_t *res = rd_kafka_event_CreateTopics_result(ev);
        size_t n = 0;
        const rd_kafka_topic_result_t **tr =
            res ? rd_kafka_CreateTopics_result_topics(res, &n) : NULL;
        if (rd_kafka_event_error(ev)) {
            why = rd_kafka_event_error_string(ev);
        } else if (n == 1) {
            rd_kafka_resp_err_t te = rd_kafka_topic_result_error(tr[0]);
            ok = te == RD_KAFKA_RESP_ERR_NO_ERROR || te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS;
            why = rd_kafka_err2str(te);
        }
        if (ok)
            LOG_INFO("offsets store: created compacted topic %s", ks->topic);
        else
            LOG_WARN("offsets store: could not create topic %s (%s); create it with "
                     "cleanup.policy=compact, or offsets may be deleted by retention",
                     ks->topic, why);
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_NewTopic_destroy(nt);
    return ok;
}

/* Sets the value of key (klen bytes) in the scan's entries, adding it when new. */
static void entry_set(struct offset_entry **entries, size_t *n, size_t *cap, const char *key,
                      size_t klen, const char *value, size_t vlen)
{
    for (size_t i = 0; i < *n; i++) {
        if (strlen((*entries)[i].key) == klen && !memcmp((*entries)[i].key, key, klen)) {
            free((*entries)[i].value_json);
            (*entries)[i].value_json = value ? xstrndup(value, vlen) : NULL;
            return;
        }
    }
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 16;
        *entries = xrealloc(*entries, *cap * sizeof **entries);
    }
    (*entries)[*n].key = xstrndup(key, klen);
    (*entries)[*n].value_json = value ? xstrndup(value, vlen) : NULL;
    (*n)++;
}

/* Reads one partition from the beginning to hi; keeps the last value of every key. */
static bool read_partition(rd_kafka_topic_t *rkt, int32_t p, int64_t hi, bool stable,
                           struct offset_entry **entries, size_t *n, size_t *cap,
                           int64_t deadline, struct mcdc_error *err)
{
    if (rd_kafka_consume_start(rkt, p, RD_KAFKA_OFFSET_BEGINNING) == -1)
        return mcdc_error_set_retriable(
            err, MCDC_ERR_KAFKA, rd_kafka_last_error(), "offsets topic %s [%d]: consume: %s",
            rd_kafka_topic_name(rkt), (int)p, rd_kafka_err2str(rd_kafka_last_error()));
    bool ok = false, failed = false;
    while (mcdc_clock_mono_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consume(rkt, p, 200);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            /* A read_committed consumer (librdkafka's default isolation.level)
             * sees the end at the last stable offset: another task's open
             * transaction may hold it before records committed after it.
             * stable: read on until the end passes hi (taken after
             * init_transactions ended this task's own transaction). */
            int64_t end = m->offset;
            rd_kafka_message_destroy(m);
            if (stable && end < hi)
                continue;
            ok = true;
            break;
        }
        if (m->err) {
            mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, m->err, "offsets topic %s [%d]: %s",
                                     rd_kafka_topic_name(rkt), (int)p, rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            failed = true;
            break;
        }
        /* A key with a NUL byte is no Connect key of ours; a null value is a deletion. */
        if (m->key && m->key_len > 0 && !memchr(m->key, '\0', m->key_len))
            entry_set(entries, n, cap, m->key, m->key_len, m->payload, m->len);
        int64_t off = m->offset;
        rd_kafka_message_destroy(m);
        if (off >= hi - 1) {
            ok = true;
            break;
        }
    }
    if (!ok && !failed)
        mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, RD_KAFKA_RESP_ERR__TIMED_OUT,
                                 "offsets topic %s [%d]: timed out reading to offset %lld",
                                 rd_kafka_topic_name(rkt), (int)p, (long long)hi);
    rd_kafka_consume_stop(rkt, p);
    return ok;
}

static bool kafka_scan(struct offset_store *store, struct offset_entry **entries, size_t *n,
                       struct mcdc_error *err)
{
    struct kafka_store *ks = store->impl;
    const struct mcdc_config *cfg = store->cfg;
    size_t cap = 0;
    *entries = NULL;
    *n = 0;
    rd_kafka_conf_t *conf = mcdc_kafka_store_conf(cfg, true, ks->bootstrap, err);
    char errstr[512];
    if (!conf)
        return false;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "offsets store consumer: %s", errstr);
    }
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, ks->topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int64_t deadline =
        mcdc_clock_mono_ms() + (ks->timeout_ms < 30000 ? 30000 : 4LL * ks->timeout_ms);
    /* Exactly-once: another task's transaction may keep the end unstable
     * for up to its transaction.timeout.ms. */
    bool stable = store->writer != NULL;
    if (stable)
        deadline += mcdc_kafka_txn_timeout_ms(cfg);
    bool ok = true;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, ks->timeout_ms);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ok = mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, e, "offsets topic %s: metadata: %s",
                                      ks->topic, rd_kafka_err2str(e));
    } else if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; ok && i < md->topics[0].partition_cnt; i++) {
            int32_t p = md->topics[0].partitions[i].id;
            int64_t lo = 0, hi = 0;
            e = rd_kafka_query_watermark_offsets(rk, ks->topic, p, &lo, &hi, ks->timeout_ms);
            if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
                ok = mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, e,
                                              "offsets topic %s [%d]: watermarks: %s", ks->topic,
                                              (int)p, rd_kafka_err2str(e));
            else if (hi > lo)
                ok = read_partition(rkt, p, hi, stable, entries, n, &cap, deadline, err);
        }
    } /* else: the topic does not exist yet: no offsets */
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    if (!ok) {
        offset_entries_free(*entries, *n);
        *entries = NULL;
        *n = 0;
    }
    return ok;
}

static bool kafka_save(struct offset_store *store, const char *key, const char *value_json,
                       struct mcdc_error *err)
{
    struct kafka_store *ks = store->impl;
    if (store->writer != NULL)
        return store->writer(store->writer_ctx, ks->topic, key, value_json, err);
    ks->dr_done = false;
    ks->dr_err = RD_KAFKA_RESP_ERR_NO_ERROR;
    /* value_json NULL: a tombstone (the key's deletion, kept by compaction
     * until delete.retention.ms). */
    if (rd_kafka_produce(ks->rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, (void *)value_json,
                         value_json ? strlen(value_json) : 0, key, strlen(key), NULL) == -1) {
        rd_kafka_resp_err_t e = rd_kafka_last_error();
        return mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, e, "offsets topic %s: produce: %s",
                                        ks->topic, rd_kafka_err2str(e));
    }
    rd_kafka_resp_err_t e = rd_kafka_flush(ks->rk, ks->timeout_ms);
    if (e == RD_KAFKA_RESP_ERR__TIMED_OUT || !ks->dr_done)
        return mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, RD_KAFKA_RESP_ERR__TIMED_OUT,
                                        "offsets topic %s: not acknowledged within %d ms",
                                        ks->topic, ks->timeout_ms);
    if (ks->dr_err != RD_KAFKA_RESP_ERR_NO_ERROR)
        return mcdc_error_set_retriable(err, MCDC_ERR_KAFKA, ks->dr_err, "offsets topic %s: %s",
                                        ks->topic, rd_kafka_err2str(ks->dr_err));
    return true;
}

static void kafka_close(struct offset_store *store)
{
    struct kafka_store *ks = store->impl;
    if (ks->rkt)
        rd_kafka_topic_destroy(ks->rkt);
    if (ks->rk)
        rd_kafka_destroy(ks->rk);
    free(ks->bootstrap);
    free(ks);
}

static const struct offset_store_ops kafka_ops = {kafka_scan, kafka_save, kafka_close};

bool store_kafka_open(struct offset_store *store, struct mcdc_error *err)
{
    const struct mcdc_config *cfg = store->cfg;
    struct kafka_store *ks = xcalloc(1, sizeof *ks);
    store->impl = ks;
    store->ops = &kafka_ops;
    ks->topic =
        cfg->offsets_topic && cfg->offsets_topic[0] ? cfg->offsets_topic : "mongocdc-offsets";
    ks->timeout_ms = cfg->offsets_flush_timeout_ms > 0 ? (int)cfg->offsets_flush_timeout_ms : 5000;

    /* allow.auto.create.topics is false there: else the metadata lookup
     * below would let the broker auto-create the topic without compaction */
    rd_kafka_conf_t *conf = mcdc_kafka_store_conf(cfg, false, NULL, err);
    char errstr[512];
    if (!conf) {
        kafka_close(store);
        return false;
    }
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, ks);
    ks->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    if (!ks->rk) {
        rd_kafka_conf_destroy(conf);
        kafka_close(store);
        return mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "offsets store producer: %s", errstr);
    }
    /* With test.mock.num.brokers the producer owns an in-process cluster; the
     * load consumer must talk to that same cluster. */
    rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(ks->rk);
    if (mc) {
        ks->bootstrap = xstrdup(rd_kafka_mock_cluster_bootstraps(mc));
        /* The mock cluster has no CreateTopics API, and since librdkafka 2.x
         * it no longer creates a topic for a metadata request that does not
         * allow it (allow.auto.create.topics=false above): the topic is
         * created in the mock itself, as CreateTopics would on a broker. */
        rd_kafka_resp_err_t me = rd_kafka_mock_topic_create(mc, ks->topic, 1, 1);
        if (me != RD_KAFKA_RESP_ERR_NO_ERROR && me != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
            LOG_WARN("offsets store: mock cluster: creating topic %s: %s", ks->topic,
                     rd_kafka_err2str(me));
    }
    ks->rkt = rd_kafka_topic_new(ks->rk, ks->topic, NULL);
    ensure_topic(ks);
    return true;
}
