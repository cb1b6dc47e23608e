/*
 * Unit tests for the delivery pipeline (src/pipeline/): the at-least-once
 * core with the JSON-lines sink and the file offset store, no MongoDB and
 * no Kafka (design.md §7). A delivery failure is a real one: the lines
 * file meets RLIMIT_FSIZE (EFBIG), as a full disk would stop it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "pipeline/pipeline.h"
#include "pipeline_support.h"
#include "pipeline/pipeline_internal.h"

#define RS "rs0"

struct fixture {
    char dir[64];
    char offsets[128];
    char lines[128];
    struct mcdc_config cfg;
    atomic_bool stop;
};

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof *f);

    snprintf(f->dir, sizeof f->dir, "/tmp/mcdc-pipeline-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->offsets, sizeof f->offsets, "%s/offsets.json", f->dir);
    snprintf(f->lines, sizeof f->lines, "%s/out.jsonl", f->dir);
    f->cfg.topic_prefix = (char *)"shop";
    f->cfg.dialect = MCDC_DIALECT_3_X;
    f->cfg.capture_mode = MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL;
    f->cfg.topic_delimiter = (char *)".";
    f->cfg.topic_transaction = (char *)"transaction";
    f->cfg.topic_heartbeat_prefix = (char *)"__debezium-heartbeat";
    f->cfg.debezium_version = (char *)"3.6.1.Final";
    f->cfg.sink_type = MCDC_SINK_FILE;
    f->cfg.sink_path = f->lines;
    f->cfg.offset_storage = MCDC_OFFSETS_FILE;
    f->cfg.offsets_file = f->offsets;
    f->cfg.offsets_flush_interval_ms = 0; /* every service commits */
    f->cfg.offsets_flush_timeout_ms = 5000;
    f->cfg.failure_mode = MCDC_FAILURE_FAIL;
    atomic_init(&f->stop, false);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char p[160];

    unlink(f->offsets);
    unlink(f->lines);
    snprintf(p, sizeof p, "%s.lock", f->offsets);
    unlink(p);
    snprintf(p, sizeof p, "%s.tmp", f->offsets);
    unlink(p);
    rmdir(f->dir);
    free(f);
    return 0;
}

static struct pipeline *open_pipe(struct fixture *f)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p = pipeline_new(&(struct pipeline_options){.cfg = &f->cfg, .stop = &f->stop});

    if (!pipeline_open(p, RS, RS, NULL, &err))
        fail_msg("pipeline_open: %s", err.msg);
    return p;
}

/* Produces one record (a value of value_len bytes) carrying position sec. */
static enum pipeline_status produce_at(struct pipeline *p, int64_t sec, size_t value_len)
{
    struct mcdc_records recs = {.count = 1};
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position pos;
    char key[32];
    enum pipeline_status st;

    snprintf(key, sizeof key, "{\"id\": %lld}", (long long)sec);
    recs.items[0].topic = "shop.db.orders";
    recs.items[0].key = xstrdup(key);
    recs.items[0].key_len = strlen(key);
    recs.items[0].value = xcalloc(1, value_len + 3);
    recs.items[0].value[0] = '"';
    memset(recs.items[0].value + 1, 'x', value_len);
    recs.items[0].value[value_len + 1] = '"';
    recs.items[0].value_len = value_len + 2;
    make_pos(&pos, sec);
    st = pipeline_produce(p, &recs, &pos, "shop.db.orders", &err);
    position_clear(&pos);
    return st;
}

static void pass_at(struct pipeline *p, int64_t sec)
{
    struct mcdc_position pos;

    make_pos(&pos, sec);
    pipeline_pass(p, &pos);
    position_clear(&pos);
}

/* The stored position's sec (0: none), read from the pipeline's store. */
static int64_t stored_sec(struct pipeline *p)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position pos;
    bool found = false;
    int64_t sec;

    position_init(&pos);
    if (!offset_store_load(pipeline_store(p), RS, &pos, &found, &err))
        fail_msg("offset_store_load: %s", err.msg);
    sec = found ? pos.sec : 0;
    position_clear(&pos);
    return sec;
}

static enum pipeline_status service(struct pipeline *p, bool force)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    return pipeline_service(p, force, &err);
}

static void count_lines(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "r");
    int c;

    *n = 0;
    assert_non_null(fp);
    while ((c = fgetc(fp)) != EOF)
        if (c == '\n')
            (*n)++;
    fclose(fp);
}

/* ---- tests ---- */

/* Acknowledgements arriving out of order (as Kafka's may across
 * partitions): the committed position is the newest one whose records and
 * every earlier record are acknowledged, never one past a record that is
 * still waiting. The acks come through the sink's delivery callback. */
static void offsets_never_pass_an_unacknowledged_record(void **state)
{
    struct fixture *f = *state;
    struct pipeline *p = open_pipe(f);
    struct mcdc_position pos[4];
    void *cookie[4];

    for (int i = 0; i < 4; i++) {
        make_pos(&pos[i], 10 + i);
        cookie[i] = inflight_add(p->inf, &pos[i]);
    }
    pipeline_on_delivery(cookie[2], NULL, 5, false, p);
    pipeline_on_delivery(cookie[1], NULL, 5, false, p);
    assert_int_equal(service(p, true), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 0); /* 10 still waits */
    assert_null(pipeline_stored_json(p));
    pipeline_on_delivery(cookie[0], NULL, 5, false, p);
    assert_int_equal(service(p, true), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 12); /* 10, 11, 12 acknowledged; 13 waits */
    pass_at(p, 14);                      /* a position after the waiting record */
    assert_int_equal(service(p, true), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 12);
    pipeline_on_delivery(cookie[3], NULL, 5, true, p);
    assert_int_equal(service(p, true), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 14);
    assert_int_equal(pipeline_dead_lettered(p), 1);
    assert_int_equal(pipeline_pending(p), 0);
    for (int i = 0; i < 4; i++)
        position_clear(&pos[i]);
    pipeline_close(p);
}

/* Records written by the lines sink are acknowledged and committed; the
 * offsets file holds the last one. */
static void produced_records_are_committed(void **state)
{
    struct fixture *f = *state;
    struct pipeline *p = open_pipe(f);
    size_t n;

    for (int64_t s = 1; s <= 3; s++)
        assert_int_equal(produce_at(p, s, 10), PIPELINE_OK);
    assert_int_equal(pipeline_records(p), 3);
    assert_int_equal(service(p, false), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 3);
    assert_non_null(pipeline_stored_json(p));
    assert_int_equal(pipeline_stored_sec(p), 3);
    count_lines(f->lines, &n);
    assert_int_equal(n, 3);
    pipeline_close(p);
}

/* A record that cannot be written (the file reached RLIMIT_FSIZE: EFBIG,
 * as a full disk) fails its delivery: the commit stops, the stored position
 * stays at the last acknowledged record, also for positions passed after
 * the failed one; the pipeline asks for a restart from the offsets, and a
 * second failure with the offsets unmoved extends the failure streak. */
static void a_delivery_failure_stops_the_commit(void **state)
{
    struct fixture *f = *state;
    struct pipeline *p = open_pipe(f);
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct rlimit old, lim;
    struct stat st;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);

    assert_int_equal(produce_at(p, 1, 4000), PIPELINE_OK);
    assert_int_equal(produce_at(p, 2, 4000), PIPELINE_OK);
    assert_int_equal(service(p, false), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 2);

    assert_int_equal(stat(f->lines, &st), 0);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = (rlim_t)st.st_size; /* no byte more for the lines file */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    assert_int_equal(produce_at(p, 3, 4000), PIPELINE_OK); /* buffered */
    pass_at(p, 4);
    assert_int_equal(pipeline_service(p, false, &err), PIPELINE_RETRY);
    assert_int_equal(err.domain, MCDC_ERR_IO);
    assert_int_equal(err.code, EFBIG);
    assert_non_null(strstr(err.msg, "a record could not be delivered"));
    assert_true(pipeline_must_restart(p));
    assert_int_equal(pipeline_failure_streak(p), 1);
    assert_int_equal(stored_sec(p), 2);

    /* The restart from the offsets: the same record fails again. */
    pipeline_drop(p);
    assert_false(pipeline_must_restart(p));
    assert_true(pipeline_open(p, RS, RS, NULL, &err));
    assert_int_equal(stored_sec(p), 2);
    assert_int_equal(produce_at(p, 3, 4000), PIPELINE_OK);
    assert_int_equal(pipeline_service(p, false, &err), PIPELINE_RETRY);
    assert_int_equal(pipeline_failure_streak(p), 2);
    assert_int_equal(stored_sec(p), 2);

    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);
    pipeline_close(p);
}

/* Close and open again (a restart): the new pipeline's store holds the
 * committed position, not the last one produced. */
static void a_restart_resumes_from_the_committed_position(void **state)
{
    struct fixture *f = *state;
    struct pipeline *p = open_pipe(f);

    assert_int_equal(produce_at(p, 5, 10), PIPELINE_OK);
    assert_int_equal(service(p, false), PIPELINE_OK);
    f->cfg.offsets_flush_interval_ms = 3600000; /* no timer commit from here on */
    assert_int_equal(produce_at(p, 6, 10), PIPELINE_OK);
    assert_int_equal(service(p, false), PIPELINE_OK); /* acknowledged, not committed */
    pipeline_close(p);                                /* a crash: no finish */

    p = open_pipe(f);
    assert_int_equal(stored_sec(p), 5);
    assert_int_equal(pipeline_records(p), 0);
    pipeline_close(p);
}

/* finish flushes and commits the last acknowledged position, whatever the
 * timer says. */
static void finish_commits_the_last_acknowledged_position(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p;
    size_t unacked = 99;

    f->cfg.offsets_flush_interval_ms = 3600000;
    p = open_pipe(f);
    assert_int_equal(produce_at(p, 7, 10), PIPELINE_OK);
    assert_int_equal(produce_at(p, 8, 10), PIPELINE_OK);
    assert_int_equal(service(p, false), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 0);
    assert_int_equal(pipeline_finish(p, &unacked, &err), PIPELINE_OK);
    assert_int_equal(unacked, 0);
    assert_int_equal(stored_sec(p), 8);
    pipeline_close(p);

    p = open_pipe(f);
    assert_int_equal(stored_sec(p), 8);
    pipeline_close(p);
}

/* A position passed with nothing in flight (a filtered event) is committed. */
static void a_pass_with_nothing_in_flight_commits(void **state)
{
    struct fixture *f = *state;
    struct pipeline *p = open_pipe(f);

    pass_at(p, 9);
    assert_int_equal(service(p, false), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 9);
    assert_int_equal(pipeline_records(p), 0);
    pipeline_close(p);
}

/* The acked hook hears every new committable position, before the timer
 * stores it (the order gate's watermark). */
static int64_t heard;
static void on_acked(void *ctx, const struct mcdc_position *pos)
{
    (void)ctx;
    heard = pos->sec;
}

static void the_acked_hook_hears_committable_positions(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct pipeline *p;

    f->cfg.offsets_flush_interval_ms = 3600000;
    p = pipeline_new(&(struct pipeline_options){.cfg = &f->cfg, .acked = on_acked});
    assert_true(pipeline_open(p, RS, RS, NULL, &err));
    heard = 0;
    assert_int_equal(produce_at(p, 11, 10), PIPELINE_OK);
    assert_int_equal(service(p, false), PIPELINE_OK);
    assert_int_equal(heard, 11);
    assert_int_equal(stored_sec(p), 0);
    pipeline_close(p);
}

/* An event emitted through the pipeline (with a dead-letter topic set, the
 * path that names each record's namespace and _id): encoded, one line per
 * record in the lines file, its position committed once the line is
 * written. */
static void an_emitted_event_is_written_and_committed(void **state)
{
    struct fixture *f = *state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct mcdc_position pos;
    struct mcdc_event ev;
    bool emit = false;
    char line[4096] = "";
    struct pipeline *p;
    FILE *fp;
    bson_t *doc = bson_new_from_json(
        (const uint8_t *)"{\"_id\": {\"_data\": \"8200000014\"}, \"operationType\": \"insert\","
                         " \"clusterTime\": {\"$timestamp\": {\"t\": 20, \"i\": 1}},"
                         " \"ns\": {\"db\": \"inventory\", \"coll\": \"customers\"},"
                         " \"documentKey\": {\"_id\": 42},"
                         " \"fullDocument\": {\"_id\": 42, \"name\": \"Anne\"}}",
        -1, NULL);

    f->cfg.dlq_topic = (char *)"dlq";
    p = open_pipe(f);
    assert_non_null(doc);
    assert_true(event_from_change(doc, &ev, &emit, &err));
    assert_true(emit);
    ev.rs = RS;
    make_pos(&pos, 20);
    assert_int_equal(pipeline_emit(p, &ev, &pos, &err), PIPELINE_OK);
    assert_int_equal(pipeline_records(p), 1);
    assert_int_equal(service(p, false), PIPELINE_OK);
    assert_int_equal(stored_sec(p), 20);
    fp = fopen(f->lines, "r");
    assert_non_null(fp);
    assert_non_null(fgets(line, sizeof line, fp));
    fclose(fp);
    assert_non_null(strstr(line, "{\"topic\": \"shop.inventory.customers\""));
    assert_non_null(strstr(line, "Anne"));
    position_clear(&pos);
    bson_destroy(doc);
    pipeline_close(p);
}

/* A set stop flag ends a pause at once. */
static void the_stop_flag_ends_a_pause(void **state)
{
    struct fixture *f = *state;
    struct pipeline *p = open_pipe(f);

    assert_true(pipeline_pause_ms(p, 1));
    atomic_store(&f->stop, true);
    assert_false(pipeline_pause_ms(p, 60000));
    pipeline_close(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(offsets_never_pass_an_unacknowledged_record, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(produced_records_are_committed, setup, teardown),
        cmocka_unit_test_setup_teardown(a_delivery_failure_stops_the_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(a_restart_resumes_from_the_committed_position, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(finish_commits_the_last_acknowledged_position, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_pass_with_nothing_in_flight_commits, setup, teardown),
        cmocka_unit_test_setup_teardown(the_acked_hook_hears_committable_positions, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_emitted_event_is_written_and_committed, setup, teardown),
        cmocka_unit_test_setup_teardown(the_stop_flag_ends_a_pause, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
