/* metrics: counters and gauges in the text exposition, the histogram's
 * cumulative buckets, label escaping, /health and /ready decisions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics/metrics.h"

static int reset(void **state)
{
    (void)state;
    metrics_reset();
    return 0;
}

/* The value of the sample line that starts with "name{labels} ". */
static double sample(const char *body, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    fail_msg("no sample %s in:\n%s", series, body);
    return -1;
}

/* Whether body has a line starting with prefix. */
static bool has_line(const char *body, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = body; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, prefix, n) == 0)
            return true;
    return false;
}

static void per_collection_counters(void **state)
{
    (void)state;
    struct metrics_task *a = metrics_task_register("rs0"), *b = metrics_task_register("rs1");
    const char *ns = "shop.ordersXX"; /* names are lengths, not NUL-terminated */
    size_t len;

    metrics_set_collection_cap(METRICS_COLLECTIONS_DEFAULT);
    for (int i = 0; i < 3; i++)
        metrics_collection_event(a, ns, 4, ns + 5, 6, METRICS_OP_C);
    metrics_collection_event(a, "shop", 4, "carts", 5, METRICS_OP_U);
    metrics_collection_event(a, ns, 4, ns + 5, 6, METRICS_OP_D);
    metrics_collection_event(b, "shop", 4, "orders", 6, METRICS_OP_U);
    metrics_collection_snapshot_rows(a, "shop", "orders", 7);
    metrics_collection_event(a, "sh\"op", 5, "o", 1, METRICS_OP_R);
    char *body = metrics_render(&len);
    assert_true(has_line(body, "# TYPE mongocdc_collection_events_total counter"));
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"shop."
                             "orders\",op=\"c\"}") == 3);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"shop."
                             "orders\",op=\"d\"}") == 1);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"shop."
                             "carts\",op=\"u\"}") == 1);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs1\",collection=\"shop."
                             "orders\",op=\"u\"}") == 1);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs1\",collection=\"shop."
                             "orders\",op=\"c\"}") == 0);
    assert_true(sample(body, "mongocdc_snapshot_collection_rows_total{task=\"rs0\",collection=\""
                             "shop.orders\"}") == 7);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"sh\\\"op."
                             "o\",op=\"r\"}") == 1);
    assert_false(has_line(
        body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"__overflow__\""));
    free(body);
}

static void per_collection_cap_and_overflow(void **state)
{
    (void)state;
    struct metrics_task *a = metrics_task_register("rs0");
    char coll[32];
    size_t len;

    metrics_set_collection_cap(50);
    for (int i = 0; i < 200; i++) { /* past the cap, and past the hash table's first size */
        int n = snprintf(coll, sizeof coll, "c%03d", i);
        metrics_collection_event(a, "db", 2, coll, (size_t)n, METRICS_OP_C);
        metrics_collection_event(a, "db", 2, coll, (size_t)n, METRICS_OP_C);
    }
    metrics_collection_event(a, "db", 2, "c007", 4, METRICS_OP_U); /* known: own label */
    char *body = metrics_render(&len);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"db.c000\","
                             "op=\"c\"}") == 2);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"db.c049\","
                             "op=\"c\"}") == 2);
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"db.c007\","
                             "op=\"u\"}") == 1);
    assert_false(
        has_line(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\"db.c050\""));
    assert_true(sample(body, "mongocdc_collection_events_total{task=\"rs0\",collection=\""
                             "__overflow__\",op=\"c\"}") == 300);
    free(body);
    metrics_set_collection_cap(0); /* off: no family at all */
    body = metrics_render(&len);
    assert_false(has_line(body, "# TYPE mongocdc_collection_events_total"));
    free(body);
    metrics_set_collection_cap(METRICS_COLLECTIONS_DEFAULT);
}

static void counters_by_op_and_task(void **state)
{
    (void)state;
    struct metrics_task *a = metrics_task_register("rs0"), *b = metrics_task_register("rs1");
    size_t len;

    assert_ptr_equal(a, metrics_task_register("rs0")); /* a restart keeps its slot */
    for (int i = 0; i < 3; i++)
        metrics_event_seen(a, METRICS_OP_C);
    metrics_event_seen(a, METRICS_OP_D);
    metrics_event_filtered(a, METRICS_OP_D);
    metrics_event_emitted(b, METRICS_OP_U);
    metrics_add(a, METRICS_RECORDS_PRODUCED, 5);
    metrics_add(a, METRICS_RECORDS_ACKED, 4);
    metrics_add(b, METRICS_RECONNECTS, 2);
    metrics_set_queue(a, 1, 1024);
    char *body = metrics_render(&len);
    assert_int_equal(strlen(body), len);
    assert_true(sample(body, "mongocdc_events_seen_total{task=\"rs0\",op=\"c\"}") == 3);
    assert_true(sample(body, "mongocdc_events_seen_total{task=\"rs0\",op=\"d\"}") == 1);
    assert_true(sample(body, "mongocdc_events_filtered_total{task=\"rs0\",op=\"d\"}") == 1);
    assert_true(sample(body, "mongocdc_events_emitted_total{task=\"rs1\",op=\"u\"}") == 1);
    assert_true(sample(body, "mongocdc_records_produced_total{task=\"rs0\"}") == 5);
    assert_true(sample(body, "mongocdc_records_acknowledged_total{task=\"rs0\"}") == 4);
    assert_true(sample(body, "mongocdc_reconnects_total{task=\"rs1\"}") == 2);
    assert_true(sample(body, "mongocdc_produce_queue_bytes{task=\"rs0\"}") == 1024);
    assert_non_null(strstr(body, "# TYPE mongocdc_events_seen_total counter\n"));
    assert_non_null(strstr(body, "# TYPE mongocdc_produce_queue_records gauge\n"));
    /* unknown yet: no sample rather than a wrong 0 */
    assert_null(strstr(body, "mongocdc_oplog_headroom_seconds{"));
    assert_null(strstr(body, "mongocdc_behind_source_seconds{"));
    free(body);
}

static void histogram_buckets_are_cumulative(void **state)
{
    (void)state;
    struct metrics_task *t = metrics_task_register("rs0");
    size_t len;

    metrics_observe_delivery_us(t, 500);     /* 0.0005 s: le 0.001 */
    metrics_observe_delivery_us(t, 20000);   /* 0.02 s: le 0.025 */
    metrics_observe_delivery_us(t, 60000000); /* 60 s: only +Inf */
    char *body = metrics_render(&len);
    assert_true(sample(body, "mongocdc_delivery_latency_seconds_bucket{task=\"rs0\",le=\"0.001\"}") == 1);
    assert_true(sample(body, "mongocdc_delivery_latency_seconds_bucket{task=\"rs0\",le=\"0.01\"}") == 1);
    assert_true(sample(body, "mongocdc_delivery_latency_seconds_bucket{task=\"rs0\",le=\"0.025\"}") == 2);
    assert_true(sample(body, "mongocdc_delivery_latency_seconds_bucket{task=\"rs0\",le=\"30\"}") == 2);
    assert_true(sample(body, "mongocdc_delivery_latency_seconds_bucket{task=\"rs0\",le=\"+Inf\"}") == 3);
    assert_true(sample(body, "mongocdc_delivery_latency_seconds_count{task=\"rs0\"}") == 3);
    double sum = sample(body, "mongocdc_delivery_latency_seconds_sum{task=\"rs0\"}");
    assert_true(sum > 60.0204 && sum < 60.0206);
    free(body);
}

static void headroom_behind_and_snapshot_gauges(void **state)
{
    (void)state;
    struct metrics_task *t = metrics_task_register("rs0");
    int64_t now = (int64_t)time(NULL);
    size_t len;

    metrics_set_oplog(t, now - 7200, now - 600);
    metrics_set_source_time_ms(t, (now - 5) * 1000);
    metrics_set_snapshot(t, 4, 1, 250, 1000);
    char *body = metrics_render(&len);
    assert_true(sample(body, "mongocdc_oplog_headroom_seconds{task=\"rs0\"}") == 6600);
    double w = sample(body, "mongocdc_oplog_window_seconds{task=\"rs0\"}");
    assert_true(w >= 7199 && w <= 7202);
    double b = sample(body, "mongocdc_behind_source_seconds{task=\"rs0\"}");
    assert_true(b >= 4 && b < 7);
    assert_true(sample(body, "mongocdc_snapshot_collections_planned{task=\"rs0\"}") == 4);
    assert_true(sample(body, "mongocdc_snapshot_documents_remaining{task=\"rs0\"}") == 750);
    assert_true(sample(body, "process_resident_memory_bytes") > 0);
    free(body);
}

static void label_values_are_escaped(void **state)
{
    (void)state;
    size_t len;
    metrics_task_register("a\"b\\c\nd");
    char *body = metrics_render(&len);
    assert_non_null(strstr(body, "{task=\"a\\\"b\\\\c\\nd\"}"));
    free(body);
}

static void health_and_readiness(void **state)
{
    (void)state;
    char why[256];
    struct metrics_task *t;

    assert_false(metrics_healthy(why, sizeof why));
    assert_false(metrics_ready(1000, why, sizeof why));
    assert_non_null(strstr(why, "no capture task"));
    t = metrics_task_register("rs0");
    assert_true(metrics_healthy(why, sizeof why));
    assert_false(metrics_ready(1000, why, sizeof why)); /* starting */
    assert_non_null(strstr(why, "starting"));
    metrics_set_state(t, METRICS_STATE_STREAMING);
    assert_true(metrics_ready(1000, why, sizeof why));
    nanosleep(&(struct timespec){.tv_sec = 0, .tv_nsec = 60 * 1000 * 1000}, NULL);
    assert_false(metrics_ready(50, why, sizeof why)); /* no progress within 50 ms */
    assert_non_null(strstr(why, "no progress"));
    metrics_progress(t);
    assert_true(metrics_ready(50, why, sizeof why));
    metrics_set_state(t, METRICS_STATE_RECONNECTING);
    assert_false(metrics_ready(1000, why, sizeof why));
    metrics_set_state(t, METRICS_STATE_FAILED);
    assert_false(metrics_healthy(why, sizeof why));
    assert_non_null(strstr(why, "rs0 has failed"));

    /* A shard removed from the cluster: its task stops cleanly, the others
     * stream on, and the daemon stays ready; with every task stopped it is not. */
    struct metrics_task *t2 = metrics_task_register("shard02");
    metrics_set_state(t, METRICS_STATE_STREAMING);
    metrics_progress(t);
    metrics_set_state(t2, METRICS_STATE_STOPPED);
    assert_true(metrics_ready(1000, why, sizeof why));
    metrics_set_state(t, METRICS_STATE_STOPPED);
    assert_false(metrics_ready(1000, why, sizeof why));
    assert_non_null(strstr(why, "every capture task has stopped"));
}

static void null_task_is_a_no_op(void **state)
{
    (void)state;
    metrics_event_seen(NULL, METRICS_OP_C);
    metrics_add(NULL, METRICS_RECORDS_ACKED, 1);
    metrics_set_state(NULL, METRICS_STATE_STREAMING);
    metrics_observe_delivery_us(NULL, 1);
    metrics_set_queue(NULL, 1, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(counters_by_op_and_task, reset),
        cmocka_unit_test_setup(per_collection_counters, reset),
        cmocka_unit_test_setup(per_collection_cap_and_overflow, reset),
        cmocka_unit_test_setup(histogram_buckets_are_cumulative, reset),
        cmocka_unit_test_setup(headroom_behind_and_snapshot_gauges, reset),
        cmocka_unit_test_setup(label_values_are_escaped, reset),
        cmocka_unit_test_setup(health_and_readiness, reset),
        cmocka_unit_test_setup(null_task_is_a_no_op, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
