/*
 * Unit tests for exactly-once delivery in the pipeline (pipeline_txn.c,
 * sink_kafka_txn.c, the offsets store's writer hook) against librdkafka's
 * in-process mock cluster, which implements the transaction coordinator
 * (InitProducerId, AddPartitionsToTxn, EndTxn): the offset record commits
 * with the records it covers, a failed record aborts and the next run
 * resumes from the committed offset, `requested` falls back to
 * at-least-once when the broker refuses transactions and `required` stops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "common/xalloc.h"
#include "pipeline/pipeline.h"
#include "pipeline_support.h"

#define RS "rs0"
#define TOPIC "shop.db.orders"
#define OFFSETS "mcdc-offsets"
/* Kafka protocol ApiKeys (the Kafka protocol guide) */
#define API_PRODUCE 0
#define API_INIT_PRODUCER_ID 22

struct fixture {
    rd_kafka_t *owner; /* hosts the mock cluster */
    rd_kafka_mock_cluster_t *mc;
    struct mcdc_kv kv[1];
    struct mcdc_config cfg;
    atomic_bool stop;
};

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof *f);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char errstr[256];

    assert_int_equal(rd_kafka_conf_set(conf, "test.mock.num.brokers", "1", errstr, sizeof errstr),
                     RD_KAFKA_CONF_OK);
    rd_kafka_conf_set(conf, "log_level", "0", errstr, sizeof errstr);
    f->owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
    assert_non_null(f->owner);
    f->mc = rd_kafka_handle_mock_cluster(f->owner);
    assert_non_null(f->mc);
    assert_int_equal(rd_kafka_mock_topic_create(f->mc, TOPIC, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    assert_int_equal(rd_kafka_mock_topic_create(f->mc, OFFSETS, 1, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
    f->kv[0].key = (char *)"bootstrap.servers";
    f->kv[0].value = xstrdup(rd_kafka_mock_cluster_bootstraps(f->mc));
    f->cfg.kafka.items = f->kv;
    f->cfg.kafka.count = 1;
    f->cfg.topic_prefix = (char *)"shop";
    f->cfg.dialect = MCDC_DIALECT_3_X;
    f->cfg.capture_mode = MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL;
    f->cfg.topic_delimiter = (char *)".";
    f->cfg.topic_transaction = (char *)"transaction";
    f->cfg.topic_heartbeat_prefix = (char *)"__debezium-heartbeat";
    f->cfg.debezium_version = (char *)"3.6.1.Final";
    f->cfg.sink_type = MCDC_SINK_KAFKA;
    f->cfg.offset_storage = MCDC_OFFSETS_KAFKA;
    f->cfg.offsets_topic = (char *)OFFSETS;
    f->cfg.offsets_flush_interval_ms = 0;
    f->cfg.offsets_flush_timeout_ms = 10000;
    f->cfg.failure_mode = MCDC_FAILURE_FAIL;
    f->cfg.exactly_once = MCDC_EXACTLY_ONCE_REQUIRED;
    f->cfg.txn_boundary = MCDC_TXN_BOUNDARY_POLL;
    f->cfg.max_batch_size = 1000;
    f->cfg.poll_interval_ms = 60000;
    f->cfg.transactional_id_prefix = (char *)"t-";
    atomic_init(&f->stop, false);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    rd_kafka_destroy(f->owner);
    free(f->kv[0].value);
    free(f);
    return 0;
}

static struct pipeline *open_pipe(struct fixture *f, struct mcdc_error *err)
{
    struct pipeline *p = pipeline_new(&(struct pipeline_options){.cfg = &f->cfg, .stop = &f->stop});

    if (!pipeline_open(p, RS, RS, NULL, err)) {
        pipeline_close(p);
        return NULL;
    }
    return p;
}

static enum pipeline_status produce_at(struct pipeline *p, int64_t sec)
{
    struct mcdc_records recs = {.count = 1};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position pos;
    char key[32];
    enum pipeline_status st;

    snprintf(key, sizeof key, "{\"id\": %lld}", (long long)sec);
    recs.items[0].topic = TOPIC;
    recs.items[0].key = xstrdup(key);
    recs.items[0].key_len = strlen(key);
    recs.items[0].value = xstrdup("{\"op\":\"c\"}");
    recs.items[0].value_len = strlen(recs.items[0].value);
    make_pos(&pos, sec);
    st = pipeline_produce(p, &recs, &pos, TOPIC, &err);
    position_clear(&pos);
    return st;
}

/* The committed position's sec as a new run loads it (0: none). */
static int64_t committed_sec(struct fixture *f)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p = open_pipe(f, &err);
    struct mcdc_position pos;
    bool found = false;
    int64_t sec;

    if (p == NULL)
        fail_msg("pipeline_open: %s", err.msg);
    position_init(&pos);
    if (!offset_store_load(pipeline_store(p), RS, &pos, &found, &err))
        fail_msg("offset_store_load: %s", err.msg);
    sec = found ? pos.sec : 0;
    position_clear(&pos);
    pipeline_close(p);
    return sec;
}

/* ---- tests ---- */

/* Records and the offset that covers them commit together; the next run
 * reads that offset back (read_committed, after init_transactions). */
static void records_and_offset_commit_together(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p = open_pipe(f, &err);

    if (p == NULL)
        fail_msg("pipeline_open: %s", err.msg);
    assert_true(pipeline_exactly_once(p));
    assert_string_equal(pipeline_transactional_id(p), "t-shop-rs0");
    for (int64_t s = 10; s <= 12; s++)
        assert_int_equal(produce_at(p, s), PIPELINE_OK);
    assert_int_equal(pipeline_service(p, false, &err), PIPELINE_OK); /* not at the boundary */
    assert_null(pipeline_stored_json(p));
    pipeline_batch_end(p); /* poll: the source has nothing more ready */
    assert_int_equal(pipeline_service(p, false, &err), PIPELINE_OK);
    assert_non_null(pipeline_stored_json(p));
    assert_int_equal(pipeline_stored_sec(p), 12);
    pipeline_close(p);
    assert_int_equal(committed_sec(f), 12);
}

/* A record that fails aborts the open transaction: the task is asked to
 * restart, and the next run resumes from the last committed offset. */
static void a_failed_record_aborts_and_rewinds(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p = open_pipe(f, &err);
    enum pipeline_status st = PIPELINE_OK;

    if (p == NULL)
        fail_msg("pipeline_open: %s", err.msg);
    assert_int_equal(produce_at(p, 10), PIPELINE_OK);
    assert_int_equal(pipeline_commit(p, &err), PIPELINE_OK);
    /* the next Produce request is refused, not retriably */
    rd_kafka_mock_push_request_errors(f->mc, API_PRODUCE, 1, RD_KAFKA_RESP_ERR_INVALID_RECORD);
    assert_int_equal(produce_at(p, 11), PIPELINE_OK);
    for (int i = 0; i < 100 && st == PIPELINE_OK; i++) {
        st = pipeline_service(p, false, &err);
        if (st == PIPELINE_OK)
            pipeline_pause_ms(p, 50);
    }
    assert_int_equal(st, PIPELINE_RETRY);
    assert_true(pipeline_must_restart(p));
    assert_int_equal(pipeline_stored_sec(p), 10);
    pipeline_close(p);
    assert_int_equal(committed_sec(f), 10);
}

/* requested: a broker that refuses transactions (here: no permission on the
 * transactional id) gives at-least-once delivery, not a stop. */
static void requested_falls_back_to_at_least_once(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p;

    f->cfg.exactly_once = MCDC_EXACTLY_ONCE_REQUESTED;
    rd_kafka_mock_push_request_errors(f->mc, API_INIT_PRODUCER_ID, 1,
                                      RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    p = open_pipe(f, &err);
    if (p == NULL)
        fail_msg("pipeline_open: %s", err.msg);
    assert_false(pipeline_exactly_once(p));
    assert_null(pipeline_transactional_id(p));
    assert_int_equal(produce_at(p, 20), PIPELINE_OK);
    assert_true(pipeline_flush(p, &err));
    assert_int_equal(pipeline_service(p, true, &err), PIPELINE_OK);
    assert_int_equal(pipeline_stored_sec(p), 20);
    pipeline_close(p);
}

/* required: the same refusal stops the task with an error naming the
 * setting and the transactional id. */
static void required_stops_when_refused(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;

    rd_kafka_mock_push_request_errors(f->mc, API_INIT_PRODUCER_ID, 1,
                                      RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    assert_null(open_pipe(f, &err));
    assert_non_null(strstr(err.msg, "exactly.once.support required"));
    assert_non_null(strstr(err.msg, "t-shop-rs0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(records_and_offset_commit_together, setup, teardown),
        cmocka_unit_test_setup_teardown(a_failed_record_aborts_and_rewinds, setup, teardown),
        cmocka_unit_test_setup_teardown(requested_falls_back_to_at_least_once, setup, teardown),
        cmocka_unit_test_setup_teardown(required_stops_when_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
