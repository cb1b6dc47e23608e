/*
 * Unit tests for topology/gate's decisions without a server: which donor an
 * event of a migrated chunk waits for given its config.chunks history (named
 * donor, or every other task when the history is trimmed: commitChunkMigration
 * keeps at least the donor's entry, mergeChunks one entry), the history a
 * re-read keeps from an earlier one, and the registry's watermarks (two tasks
 * each holding an event are released), and the search of a key's chunk in
 * a chunk map (sorted, and out of order). End to end:
 * tests/integration/test_sharded_gate.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "common/xalloc.h"
#include "topology/gate.h"
#include "topology/gate_internal.h"

#define TS(s, i) (((uint64_t)(s) << 32) | (uint32_t)(i))

static void decide_named_donor(void **state)
{
    (void)state;
    /* moved s1 -> s2 at 20, the creation entry of s1 at 10 kept */
    const struct gate_entry h[] = {{TS(20, 0), "s2"}, {TS(10, 0), "s1"}};
    uint64_t need = 1;
    const char *donor = NULL;

    assert_int_equal(gate_decide(h, 2, "s2", TS(25, 3), &need, &donor), GATE_DONOR);
    assert_int_equal(need, TS(20, 0));
    assert_string_equal(donor, "s1");
    /* an event at the commit time itself: need capped at one increment before */
    assert_int_equal(gate_decide(h, 2, "s2", TS(20, 0), &need, &donor), GATE_DONOR);
    assert_int_equal(need, TS(20, 0) - 1);
    /* s1's event from before the move: its owner's entry is the oldest left */
    assert_int_equal(gate_decide(h, 2, "s1", TS(15, 0), &need, &donor), GATE_EVERY_OTHER);
    assert_int_equal(need, TS(10, 0));
    assert_null(donor);
    /* s1's event after the move: the map is stale */
    assert_int_equal(gate_decide(h, 2, "s1", TS(21, 0), &need, &donor), GATE_NOT_OWNER);
    assert_int_equal(need, 0);
}

static void decide_trimmed_history(void **state)
{
    (void)state;
    /* s1 -> s2 at 20, s2 -> s3 at 400: the commit dropped {10, s1} */
    const struct gate_entry h[] = {{TS(400, 0), "s3"}, {TS(20, 0), "s2"}};
    uint64_t need = 0;
    const char *donor = "x";

    /* s2's lagging task reads an event of its time on the chunk: the donor
     * s1 is gone from the history, so every other task must be past 20 */
    assert_int_equal(gate_decide(h, 2, "s2", TS(30, 1), &need, &donor), GATE_EVERY_OTHER);
    assert_int_equal(need, TS(20, 0));
    assert_null(donor);
    /* s3's events still name s2 */
    assert_int_equal(gate_decide(h, 2, "s3", TS(401, 0), &need, &donor), GATE_DONOR);
    assert_string_equal(donor, "s2");
    /* an event older than every entry: owner unknown, wait up to just before it */
    assert_int_equal(gate_decide(h, 2, "s1", TS(15, 7), &need, &donor), GATE_EVERY_OTHER);
    assert_int_equal(need, TS(15, 6));
    /* a merged chunk: one entry at the merge time */
    const struct gate_entry m[] = {{TS(500, 0), "s3"}};
    assert_int_equal(gate_decide(m, 1, "s3", TS(450, 0), &need, &donor), GATE_EVERY_OTHER);
    assert_int_equal(need, TS(450, 0) - 1);
    assert_int_equal(gate_decide(m, 1, "s3", TS(600, 0), &need, &donor), GATE_EVERY_OTHER);
    assert_int_equal(need, TS(500, 0));
    /* no history at all (a server without it): nothing to go by */
    assert_int_equal(gate_decide(NULL, 0, "s3", TS(600, 0), &need, &donor), GATE_NONE);
    assert_int_equal(need, 0);
}

static struct gate_entry *hist_of(const struct gate_entry *src, size_t n)
{
    struct gate_entry *h = xcalloc(n, sizeof *h);
    for (size_t i = 0; i < n; i++) {
        h[i].valid_after = src[i].valid_after;
        h[i].shard = xstrdup(src[i].shard);
    }
    return h;
}

static void hist_free(struct gate_entry *h, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free((char *)h[i].shard);
    free(h);
}

static void history_kept_across_a_trim(void **state)
{
    (void)state;
    const struct gate_entry seen[] = {{TS(20, 0), "s2"}, {TS(10, 0), "s1"}};
    const struct gate_entry now[] = {{TS(400, 0), "s3"}, {TS(20, 0), "s2"}};
    size_t n = 2;
    struct gate_entry *h = hist_of(now, n);
    uint64_t need = 0;
    const char *donor = NULL;

    assert_int_equal(gate_history_extend(&h, &n, seen, 2), 1);
    assert_int_equal(n, 3);
    assert_int_equal(h[2].valid_after, TS(10, 0));
    assert_string_equal(h[2].shard, "s1");
    /* the donor the task knew is back */
    assert_int_equal(gate_decide(h, n, "s2", TS(30, 1), &need, &donor), GATE_DONOR);
    assert_string_equal(donor, "s1");
    /* again: nothing older to add */
    assert_int_equal(gate_history_extend(&h, &n, seen, 2), 0);
    hist_free(h, n);

    /* the oldest entry read now was never seen (two trims between reads):
     * what lies between is unknown, nothing is added */
    const struct gate_entry later[] = {{TS(900, 0), "s1"}, {TS(400, 0), "s3"}};
    n = 2;
    h = hist_of(later, n);
    const struct gate_entry old[] = {{TS(10, 0), "s1"}};
    assert_int_equal(gate_history_extend(&h, &n, old, 1), 0);
    assert_int_equal(n, 2);
    hist_free(h, n);
}

static void holders_release_each_other(void **state)
{
    (void)state;
    struct gate_registry *r = gate_registry_new(NULL, 3);
    struct gate_task *a = gate_registry_add(r, "s1");
    struct gate_task *b = gate_registry_add(r, "s2");
    struct gate_task *c = gate_registry_add(r, "s3");

    assert_non_null(c);
    assert_null(gate_registry_add(r, "s4"));
    gate_task_loaded(a);
    gate_task_loaded(b);
    gate_task_loaded(c);
    gate_task_publish(a, TS(100, 0));
    gate_task_publish(b, TS(100, 0));
    gate_task_publish(c, TS(100, 0));
    /* steady state: every task past an old arrival */
    assert_true(gate_task_passed(a, a, TS(50, 0)));
    /* a holds an event at (200, 1) under "every other", b one at (200, 1)
     * waiting for a by name: each publishes just before its held event */
    assert_false(gate_task_passed(a, a, TS(200, 0)));
    gate_task_publish(a, TS(200, 1) - 1);
    gate_task_publish(b, TS(200, 1) - 1);
    assert_false(gate_task_passed(a, a, TS(200, 0))); /* c still behind */
    gate_task_publish(c, TS(300, 0));
    assert_true(gate_task_passed(a, a, TS(200, 0)));
    assert_true(gate_task_passed(b, a, TS(200, 0)));
    /* watermarks never move back; an ended task counts as past everything */
    gate_task_publish(c, TS(1, 0));
    assert_true(gate_task_passed(a, c, TS(300, 0)));
    assert_false(gate_task_passed(c, c, TS(250, 0)));
    gate_task_ended(a);
    gate_task_ended(b);
    assert_true(gate_task_passed(c, c, TS(250, 0)));
    assert_string_equal(gate_task_name(b), "s2");
    gate_registry_destroy(r);
}

/* A task that has published nothing (no stored position, its shard not
 * reached yet) is not waited for; once its shard answers (publish 0) it is,
 * until its watermark passes the need. */
static void unstarted_task_is_not_waited_for(void **state)
{
    (void)state;
    struct gate_registry *r = gate_registry_new(NULL, 2);
    struct gate_task *a = gate_registry_add(r, "s1");
    struct gate_task *b = gate_registry_add(r, "s2");

    gate_task_publish(a, TS(100, 0));
    /* b's stored offsets are not loaded yet: it may resume from before the
     * need, so it is waited for, as donor and as "every other" */
    assert_false(gate_task_passed(a, a, TS(90, 0)));
    assert_false(gate_task_passed(a, b, TS(90, 0)));
    gate_task_loaded(a);
    gate_task_loaded(b); /* loaded, nothing stored */
    assert_true(gate_task_passed(a, a, TS(90, 0)));  /* every other: b not started */
    assert_true(gate_task_passed(a, b, TS(90, 0)));  /* b named as donor, not started */
    gate_task_publish(b, 0);                         /* b's shard answered */
    assert_false(gate_task_passed(a, a, TS(90, 0)));
    assert_false(gate_task_passed(a, b, TS(90, 0)));
    gate_task_publish(b, TS(95, 0));
    assert_true(gate_task_passed(a, a, TS(90, 0)));
    gate_registry_destroy(r);
}

/* A map of n chunks on {_id: 1}: [MinKey, 0), [0, 10), ..., [10 (n - 2),
 * MaxKey), in order, or reversed. */
static struct chunk *int_chunks(size_t n, bool reversed)
{
    struct chunk *c = xcalloc(n, sizeof *c);
    for (size_t i = 0; i < n; i++) {
        struct chunk *ch = &c[reversed ? n - 1 - i : i];
        ch->min = bson_new();
        ch->max = bson_new();
        if (i == 0)
            bson_append_minkey(ch->min, "_id", 3);
        else
            BSON_APPEND_INT64(ch->min, "_id", (int64_t)(i - 1) * 10);
        if (i == n - 1)
            bson_append_maxkey(ch->max, "_id", 3);
        else
            BSON_APPEND_INT64(ch->max, "_id", (int64_t)i * 10);
    }
    return c;
}

static void int_chunks_free(struct chunk *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        bson_destroy(c[i].min);
        bson_destroy(c[i].max);
    }
    free(c);
}

/* The chunk index of key {_id: <json value>} in c (n chunks). */
static size_t find_of(const struct chunk *c, size_t n, const char *json_value)
{
    char buf[128];
    bson_error_t error;
    bson_t *key;
    struct keyval v;
    size_t at;
    snprintf(buf, sizeof buf, "{\"_id\": %s}", json_value);
    key = bson_new_from_json((const uint8_t *)buf, -1, &error);
    assert_non_null(key);
    assert_true(bson_iter_init_find(&v.it, key, "_id"));
    at = gate_chunk_find(c, n, &v, 1);
    bson_destroy(key);
    return at;
}

static void chunk_found_in_sorted_and_unsorted_maps(void **state)
{
    (void)state;
    const size_t n = 1001;
    struct chunk *c = int_chunks(n, false);
    struct chunk *r = int_chunks(n, true);

    /* sorted: the chunk whose [min, max) holds the key */
    assert_int_equal(find_of(c, n, "{\"$minKey\": 1}"), 0);
    assert_int_equal(find_of(c, n, "null"), 0);                 /* null < numbers */
    assert_int_equal(find_of(c, n, "-5"), 0);
    assert_int_equal(find_of(c, n, "0"), 1);                    /* a min is inside */
    assert_int_equal(find_of(c, n, "9.5"), 1);
    assert_int_equal(find_of(c, n, "10"), 2);                   /* a max is outside */
    assert_int_equal(find_of(c, n, "{\"$numberLong\": \"4999\"}"), 500);
    assert_int_equal(find_of(c, n, "9989"), 999);
    assert_int_equal(find_of(c, n, "9990"), 1000);              /* the last, to MaxKey */
    assert_int_equal(find_of(c, n, "\"a string\""), 1000);      /* strings > numbers */
    assert_int_equal(find_of(c, n, "{\"$oid\": \"65f100000000000000000001\"}"), 1000);
    /* out of order: the same chunks found (by the scan) */
    assert_int_equal(find_of(r, n, "-5"), n - 1 - 0);
    assert_int_equal(find_of(r, n, "4999"), n - 1 - 500);
    assert_int_equal(find_of(r, n, "\"a string\""), n - 1 - 1000);
    /* a gap in the map: nothing holds the key */
    assert_int_equal(find_of(c + 1, 10, "-5"), 10);
    assert_int_equal(find_of(c, 10, "500"), 10);
    /* one chunk, and none */
    assert_int_equal(find_of(c + n - 1, 1, "12345"), 0);
    assert_int_equal(find_of(c, 0, "1"), 0);
    int_chunks_free(c, n);
    int_chunks_free(r, n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decide_named_donor),
        cmocka_unit_test(decide_trimmed_history),
        cmocka_unit_test(history_kept_across_a_trim),
        cmocka_unit_test(holders_release_each_other),
        cmocka_unit_test(unstarted_task_is_not_waited_for),
        cmocka_unit_test(chunk_found_in_sorted_and_unsorted_maps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
