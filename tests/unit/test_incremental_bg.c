/* Unit tests for the background chunk read of the incremental snapshot
 * (snapshot/incremental_job.c, snapshot/incremental_bg.c): the keys the
 * stream changes while a chunk is read drop their rows at the attach, for
 * both window kinds; a close seen before the result waits for it; a failed
 * or stopped read; and the reader thread's handoff (poll, wait, cancel at
 * destroy). No server: a job's result is filled as incr_job_run would. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bson/bson.h>

#include "common/xalloc.h"
#include "snapshot/incremental_bg.h"
#include "snapshot/incremental_internal.h"

static struct mcdc_config cfg;

static bson_t *key_doc(int v)
{
    bson_t *d = bson_new();
    BSON_APPEND_INT32(d, "_id", v);
    return d;
}

/* The result of a read of keys first..last (a full window). */
static void read_result(struct incr_job *j, int first, int last, uint32_t t_sec, uint32_t t_inc)
{
    for (int k = first; k <= last; k++) {
        bson_t *d = key_doc(k);
        BSON_APPEND_INT32(d, "v", k * 10);
        if (j->ndocs == j->docs_cap) {
            j->docs_cap = j->docs_cap ? j->docs_cap * 2 : 8;
            j->docs = xrealloc(j->docs, j->docs_cap * sizeof *j->docs);
        }
        j->docs[j->ndocs++] = d;
    }
    bson_reinit(&j->chunk_end);
    BSON_APPEND_INT32(&j->chunk_end, "_id", last);
    BSON_APPEND_INT32(&j->max_key, "_id", 100);
    j->at_sec = t_sec;
    j->at_inc = t_inc;
    j->result = INCR_READ_WINDOW;
}

static bson_t *marker(const struct incr *s, const char *suffix)
{
    char id[64];
    bson_t *d = bson_new();
    snprintf(id, sizeof id, "%s%s", s->chunk_id, suffix);
    BSON_APPEND_UTF8(d, "_id", id);
    return d;
}

static void event(struct incr *s, const char *coll, int key, uint32_t sec, uint32_t inc)
{
    bson_t *k = key_doc(key);
    (void)incr_on_event(s, "db", 2, coll, strlen(coll), k, true, sec, inc);
    bson_destroy(k);
}

static void markers_keys_changed_during_the_read_drop_their_rows(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct incr *s = incr_new(&cfg, "rs0", false);
    struct incr_job *j;
    bson_t *open, *close;

    incr_enqueue(s, "db", "c", NULL, "s");
    j = incr_job_begin(s, NULL);
    assert_non_null(j);
    assert_int_equal(incr_state(s), INCR_READING);
    assert_string_equal(j->chunk_id, s->chunk_id);
    assert_null(incr_job_begin(s, NULL)); /* one read at a time */
    event(s, "c", 1, 5, 1); /* before the open marker: the read holds it */
    open = marker(s, "-open");
    close = marker(s, "-close");
    assert_true(incr_on_marker(s, true, open));
    assert_int_equal(incr_state(s), INCR_READING);
    event(s, "c", 2, 6, 1);     /* inside the window: supersedes row 2 */
    event(s, "other", 3, 6, 2); /* another collection */
    assert_false(incr_close_waits(s));
    assert_true(incr_on_marker(s, true, close));
    assert_true(incr_close_waits(s)); /* the close came first: the result is waited for */
    read_result(j, 1, 4, 5, 9);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    assert_int_equal(incr_state(s), INCR_CLOSED);
    assert_int_equal(incr_window_size(s), 4);
    assert_non_null(incr_window_row(s, 0));
    assert_null(incr_window_row(s, 1));
    assert_non_null(incr_window_row(s, 2));
    assert_non_null(incr_window_row(s, 3));
    incr_window_done(s);
    assert_int_equal(incr_state(s), INCR_READY);
    char *last = incr_key_text(s, false);
    assert_non_null(last);
    assert_non_null(strstr(last, "4")); /* the chunk's end */
    free(last);

    /* a result before the open marker: the window waits for it, as a read on
     * the task's thread left it; later changes drop rows as they stream */
    j = incr_job_begin(s, NULL);
    read_result(j, 5, 6, 7, 1);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    assert_int_equal(incr_state(s), INCR_WAIT_OPEN);
    bson_destroy(open);
    open = marker(s, "-open");
    assert_true(incr_on_marker(s, true, open));
    assert_int_equal(incr_state(s), INCR_OPEN);
    event(s, "c", 6, 8, 1);
    assert_null(incr_window_row(s, 1));
    bson_destroy(open);
    bson_destroy(close);
    incr_destroy(s);
}

static void cluster_time_keys_after_t_drop_their_rows(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct incr *s = incr_new(&cfg, "rs0", true);
    struct incr_job *j;

    incr_enqueue(s, "db", "c", NULL, "s");
    j = incr_job_begin(s, NULL);
    event(s, "c", 1, 100, 5);     /* at T: in the rows */
    event(s, "c", 2, 100, 6);     /* after T: its row is older */
    event(s, "other", 3, 101, 1); /* another collection: the stream passed T */
    read_result(j, 1, 3, 100, 5);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    assert_int_equal(incr_state(s), INCR_CLOSED); /* passed T during the read */
    assert_non_null(incr_window_row(s, 0));
    assert_null(incr_window_row(s, 1));
    assert_non_null(incr_window_row(s, 2));
    incr_window_done(s);

    /* the stream has not passed T yet: the window waits, as before */
    j = incr_job_begin(s, NULL);
    event(s, "c", 4, 200, 1);
    read_result(j, 4, 5, 200, 1);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    assert_int_equal(incr_state(s), INCR_WAIT_TIME);
    assert_non_null(incr_window_row(s, 0));
    event(s, "c", 5, 200, 2);
    assert_int_equal(incr_state(s), INCR_CLOSED);
    assert_null(incr_window_row(s, 1));
    incr_window_done(s);

    /* an empty batch during the read counts only once T is known (taken by
     * the task before that getMore): then the rows go out at the attach */
    j = incr_job_begin(s, NULL);
    incr_on_idle(s); /* T unknown: the getMore may have been answered before it */
    read_result(j, 6, 7, 300, 1);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    assert_int_equal(incr_state(s), INCR_WAIT_TIME);
    incr_on_idle(s);
    assert_int_equal(incr_state(s), INCR_CLOSED);
    incr_window_done(s);
    j = incr_job_begin(s, NULL);
    incr_job_at(s, j, 400, 1);
    assert_true(j->has_at);
    incr_on_idle(s);
    read_result(j, 8, 9, 400, 1);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    assert_int_equal(incr_state(s), INCR_CLOSED);
    incr_destroy(s);
}

static void failed_stopped_and_abandoned_reads(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct incr *s = incr_new(&cfg, "rs0", false);
    struct incr_job *j;
    bool current;

    incr_enqueue(s, "db", "c", NULL, "s");
    incr_enqueue(s, "db", "d", NULL, "s");
    /* a failure is the read's error; the chunk is read again */
    j = incr_job_begin(s, NULL);
    mcdc_error_set(&j->err, MCDC_ERR_MONGO, 13, "not authorized");
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_FAILED);
    assert_int_equal(err.code, 13);
    assert_string_equal(err.msg, "not authorized");
    assert_int_equal(incr_state(s), INCR_READY);
    /* a read the stream stopped for is abandoned; its late result is dropped */
    j = incr_job_begin(s, NULL);
    incr_job_abandon(s);
    assert_int_equal(incr_state(s), INCR_READY);
    read_result(j, 1, 2, 1, 1);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_DISCARDED);
    assert_int_equal(incr_window_size(s), 0);
    /* stop-snapshot during the read: the window is emitted, then the collection stops */
    j = incr_job_begin(s, NULL);
    assert_int_equal(incr_stop(s, NULL, 0, &current), 2);
    assert_true(current);
    assert_string_equal(incr_current(s), "db.c");
    read_result(j, 1, 2, 1, 1);
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_WINDOW);
    s->state = INCR_CLOSED;
    incr_window_done(s);
    assert_int_equal(incr_state(s), INCR_IDLE);
    /* a collection done during the read leaves the queue */
    incr_enqueue(s, "db", "e", NULL, "s2");
    j = incr_job_begin(s, NULL);
    j->result = INCR_READ_COLL_DONE;
    assert_int_equal(incr_job_attach(s, j, &err), INCR_READ_COLL_DONE);
    assert_int_equal(incr_state(s), INCR_IDLE);
    incr_destroy(s);
}

/* ---- the reader thread --------------------------------------------------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int runs;

/* A read that lasts until the test opens the gate, or until cancelled. */
static void gated_run(struct incr_job *j, mongoc_client_t *client, const atomic_bool *cancel)
{
    assert_null(client);
    pthread_mutex_lock(&gate_mu);
    runs++;
    while (!gate_open && !atomic_load(cancel)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&gate_cv, &gate_mu, &ts);
    }
    pthread_mutex_unlock(&gate_mu);
    j->result = atomic_load(cancel) ? INCR_READ_FAILED : INCR_READ_COLL_DONE;
}

static void open_gate(bool open)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = open;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static void reader_hands_jobs_back_and_cancels_at_destroy(void **state)
{
    (void)state;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct incr *s = incr_new(&cfg, "rs0", false);
    struct incr_reader *r = incr_reader_new("rs0", gated_run, &err);
    struct incr_job *j, *got;

    assert_non_null(r);
    incr_enqueue(s, "db", "c", NULL, "s");
    open_gate(false);
    assert_null(incr_reader_take(r, true)); /* nothing in the reader: no wait */
    j = incr_job_begin(s, NULL);
    assert_true(incr_reader_submit(r, j, NULL));
    assert_true(incr_reader_busy(r));
    assert_false(incr_reader_submit(r, j, NULL)); /* one job at a time */
    assert_null(incr_reader_take(r, false));      /* still reading: no wait */
    open_gate(true);
    got = incr_reader_take(r, true);
    assert_ptr_equal(got, j);
    assert_false(incr_reader_busy(r));
    assert_int_equal(got->result, INCR_READ_COLL_DONE);
    assert_int_equal(incr_job_attach(s, got, &err), INCR_READ_COLL_DONE);
    assert_int_equal(incr_state(s), INCR_IDLE);

    /* a read in flight at destroy is cancelled, joined and freed */
    open_gate(false);
    incr_enqueue(s, "db", "c", NULL, "s");
    j = incr_job_begin(s, NULL);
    assert_true(incr_reader_submit(r, j, NULL));
    for (int i = 0; i < 500; i++) { /* until the reader runs it */
        pthread_mutex_lock(&gate_mu);
        bool started = runs == 2;
        pthread_mutex_unlock(&gate_mu);
        if (started)
            break;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    incr_reader_destroy(r);
    incr_job_abandon(s);
    assert_int_equal(incr_state(s), INCR_READY);
    incr_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(markers_keys_changed_during_the_read_drop_their_rows),
        cmocka_unit_test(cluster_time_keys_after_t_drop_their_rows),
        cmocka_unit_test(failed_stopped_and_abandoned_reads),
        cmocka_unit_test(reader_hands_jobs_back_and_cancels_at_destroy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
