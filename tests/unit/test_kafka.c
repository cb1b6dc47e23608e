/* Unit tests for kafka: the librdkafka configurations every client gets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "kafka/kafka_conf.h"

/* The value of k in conf, "" when unset. */
static const char *get(rd_kafka_conf_t *conf, const char *k, char *buf, size_t cap)
{
    size_t n = cap;
    if (rd_kafka_conf_get(conf, k, buf, &n) != RD_KAFKA_CONF_OK)
        buf[0] = '\0';
    return buf;
}

static void config_with(struct mcdc_config *cfg, struct mcdc_kv *kv, size_t n)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->path = "mongocdc.yaml";
    cfg->topic_prefix = "shop";
    cfg->signal_kafka_group = "kafka-signal";
    cfg->kafka.items = kv;
    cfg->kafka.count = n;
}

static void producer_has_defaults_and_map(void **state)
{
    (void)state;
    struct mcdc_kv kv[] = {{"bootstrap.servers", "b:9092", 3, 5}, {"linger.ms", "7", 4, 5}};
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;
    char v[256];
    config_with(&cfg, kv, 2);
    rd_kafka_conf_t *conf = mcdc_kafka_producer_conf(&cfg, "rs0", NULL, &err);
    assert_non_null(conf);
    assert_string_equal(get(conf, "client.id", v, sizeof v), "mongocdc-rs0");
    assert_string_equal(get(conf, "enable.idempotence", v, sizeof v), "true");
    assert_string_equal(get(conf, "acks", v, sizeof v), "-1");
    assert_string_equal(get(conf, "queue.buffering.max.kbytes", v, sizeof v), "16384");
    assert_string_equal(get(conf, "message.timeout.ms", v, sizeof v), "0");
    assert_string_equal(get(conf, "linger.ms", v, sizeof v), "7");
    assert_string_equal(get(conf, "bootstrap.servers", v, sizeof v), "b:9092");
    rd_kafka_conf_destroy(conf);
}

static void producer_refuses_locked_keys(void **state)
{
    (void)state;
    struct mcdc_kv kv[] = {{"acks", "1", 9, 3}};
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;
    config_with(&cfg, kv, 1);
    assert_null(mcdc_kafka_producer_conf(&cfg, NULL, NULL, &err));
    assert_int_equal(err.domain, MCDC_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "mongocdc.yaml:9:3: kafka.acks: must wait"));
    kv[0] = (struct mcdc_kv){"enable.idempotence", "false", 2, 3};
    assert_null(mcdc_kafka_producer_conf(&cfg, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "mongocdc.yaml:2:3: kafka.enable.idempotence"));
}

static void bad_property_names_its_line(void **state)
{
    (void)state;
    struct mcdc_kv kv[] = {{"no.such.property", "1", 6, 3}};
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;
    config_with(&cfg, kv, 1);
    assert_null(mcdc_kafka_producer_conf(&cfg, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "mongocdc.yaml:6:3: kafka.no.such.property: "));
    assert_null(mcdc_kafka_store_conf(&cfg, false, NULL, &err));
    assert_non_null(strstr(err.msg, "mongocdc.yaml:6:3: kafka.no.such.property: "));
}

static void store_clients(void **state)
{
    (void)state;
    struct mcdc_kv kv[] = {{"test.mock.num.brokers", "1", 2, 3},
                           {"linger.ms", "5", 3, 3},
                           {"enable.idempotence", "true", 4, 3},
                           {"socket.timeout.ms", "7000", 5, 3}};
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;
    char v[256];
    config_with(&cfg, kv, 4);
    rd_kafka_conf_t *conf = mcdc_kafka_store_conf(&cfg, false, NULL, &err);
    assert_non_null(conf);
    assert_string_equal(get(conf, "client.id", v, sizeof v), "mongocdc-offsets-shop");
    assert_string_equal(get(conf, "partitioner", v, sizeof v), "murmur2_random");
    assert_string_equal(get(conf, "allow.auto.create.topics", v, sizeof v), "false");
    assert_string_equal(get(conf, "enable.idempotence", v, sizeof v), "true");
    assert_string_equal(get(conf, "linger.ms", v, sizeof v), "5");
    rd_kafka_conf_destroy(conf);
    conf = mcdc_kafka_store_conf(&cfg, true, "127.0.0.1:1234", &err);
    assert_non_null(conf);
    assert_string_equal(get(conf, "client.id", v, sizeof v), "mongocdc-offsets-load");
    assert_string_equal(get(conf, "bootstrap.servers", v, sizeof v), "127.0.0.1:1234");
    assert_string_equal(get(conf, "test.mock.num.brokers", v, sizeof v), "0");
    assert_string_equal(get(conf, "socket.timeout.ms", v, sizeof v), "7000");
    rd_kafka_conf_destroy(conf);
}

static void signal_consumer_takes_connection_keys_only(void **state)
{
    (void)state;
    struct mcdc_kv kv[] = {{"bootstrap.servers", "b:9092", 2, 3}, {"fetch.min.bytes", "9", 3, 3}};
    struct mcdc_kv sc[] = {{"fetch.max.bytes", "1048577", 8, 3}};
    struct mcdc_config cfg;
    struct mcdc_error err = MCDC_ERROR_INIT;
    char v[256];
    config_with(&cfg, kv, 2);
    cfg.signal_kafka_bootstrap = "s:9092";
    cfg.signal_consumer.items = sc;
    cfg.signal_consumer.count = 1;
    rd_kafka_conf_t *conf = mcdc_kafka_signal_consumer_conf(&cfg, "mongocdc-signal-1", &err);
    assert_non_null(conf);
    assert_string_equal(get(conf, "bootstrap.servers", v, sizeof v), "s:9092");
    assert_string_equal(get(conf, "group.id", v, sizeof v), "kafka-signal");
    assert_string_equal(get(conf, "client.id", v, sizeof v), "mongocdc-signal-1");
    assert_string_equal(get(conf, "enable.auto.commit", v, sizeof v), "false");
    assert_string_equal(get(conf, "fetch.min.bytes", v, sizeof v), "1"); /* the default */
    assert_string_equal(get(conf, "fetch.max.bytes", v, sizeof v), "1048577");
    rd_kafka_conf_destroy(conf);
    sc[0] = (struct mcdc_kv){"bad.key", "1", 8, 3};
    assert_null(mcdc_kafka_signal_consumer_conf(&cfg, "x", &err));
    assert_non_null(strstr(err.msg, "mongocdc.yaml:8:3: signal.consumer.bad.key: "));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(producer_has_defaults_and_map),
        cmocka_unit_test(producer_refuses_locked_keys),
        cmocka_unit_test(bad_property_names_its_line),
        cmocka_unit_test(store_clients),
        cmocka_unit_test(signal_consumer_takes_connection_keys_only),
    };
    return cmocka_run_group_tests_name("kafka", tests, NULL, NULL);
}
