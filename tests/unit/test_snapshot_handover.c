/* Unit tests for the initial snapshot's hand-over queue (snapshot_reader.c,
 * snapshot.c): readers hand documents to the task thread in batches of up to
 * BATCH_MAX_DOCS documents or BATCH_MAX_BYTES bytes (one lock and one wake-up
 * per batch, not per document), and at once when the task thread waits on an
 * empty queue. The queue is driven directly, without a server: what a reader
 * does per document (snapshot_batch_offer) and at a part's end
 * (snapshot_batch_push), and what the task thread takes (snapshot_next). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <bson/bson.h>

#include "common/clock.h"
#include "common/xalloc.h"
#include "snapshot/snapshot.h"
#include "snapshot/snapshot_internal.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static char DB[] = "db", COLL[] = "c";

/* A queue with one reader alive on one collection, and no server. */
struct fixture {
    struct snapshot s;
    struct snapshot_plan plan;
    struct snapshot_coll coll;
    atomic_bool stop;
};

static int setup(void **state)
{
    struct fixture *f = xcalloc(1, sizeof *f);
    f->coll.db = DB;
    f->coll.coll = COLL;
    f->coll.estimated = -1;
    f->coll.parts = f->coll.parts_left = 1;
    f->plan.colls = &f->coll;
    f->plan.count = 1;
    atomic_init(&f->stop, false);
    f->s.plan = &f->plan;
    f->s.rs = "rs0";
    f->s.stop = &f->stop;
    f->s.readers_alive = 1;
    f->s.last_progress_ms = mcdc_clock_mono_ms();
    atomic_init(&f->s.starving, false);
    pthread_mutex_init(&f->s.lock, NULL);
    pthread_cond_init(&f->s.not_empty, NULL);
    pthread_cond_init(&f->s.not_full, NULL);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    struct snapshot_batch rest = {f->s.head, f->s.tail, 0, 0, 0};
    struct snapshot_batch taken = {f->s.taken, NULL, 0, 0, 0};
    snapshot_batch_free(&rest);
    snapshot_batch_free(&taken);
    pthread_cond_destroy(&f->s.not_empty);
    pthread_cond_destroy(&f->s.not_full);
    pthread_mutex_destroy(&f->s.lock);
    free(f);
    return 0;
}

/* A document {_id: id, pad: <pad bytes of binary>}. */
static struct snapshot_doc *doc_new(struct fixture *f, int64_t id, size_t pad)
{
    struct snapshot_doc *d = xcalloc(1, sizeof *d);
    uint8_t *bytes = xcalloc(1, pad > 0 ? pad : 1);
    d->doc = bson_new();
    BSON_APPEND_INT64(d->doc, "_id", id);
    BSON_APPEND_BINARY(d->doc, "pad", BSON_SUBTYPE_BINARY, bytes, (uint32_t)pad);
    free(bytes);
    d->db = f->coll.db;
    d->coll = f->coll.coll;
    return d;
}

static size_t queued(struct fixture *f)
{
    size_t n;
    pthread_mutex_lock(&f->s.lock);
    n = f->s.queued;
    pthread_mutex_unlock(&f->s.lock);
    return n;
}

/* Takes every queued document and checks the _ids run from 0 to n-1. */
static void take_in_order(struct fixture *f, int64_t n)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    for (int64_t i = 0; i < n; i++) {
        struct snapshot_doc *d = NULL;
        bson_iter_t it;
        assert_int_equal(snapshot_next(&f->s, 1000, &d, &fail, &err), SNAPSHOT_DOC);
        assert_non_null(d);
        assert_true(bson_iter_init_find(&it, d->doc, "_id"));
        assert_int_equal(bson_iter_int64(&it), i);
        snapshot_doc_free(d);
    }
}

/* 1000 small documents reach the queue in 4 hand-overs (3 full batches and
 * the part's tail), not 1000: the queue's count moves only at multiples of
 * BATCH_MAX_DOCS, and the reader holds the rest until its part ends. */
static void test_batches_by_count(void **state)
{
    struct fixture *f = *state;
    struct snapshot_batch b = {NULL, NULL, 0, 0, 0};
    size_t handovers = 0, last = 0;
    const int64_t n = 1000;

    for (int64_t i = 0; i < n; i++) {
        size_t q;
        assert_true(snapshot_batch_offer(&f->s, &b, &f->coll, doc_new(f, i, 16)));
        q = queued(f);
        if (q != last) {
            handovers++;
            assert_int_equal(q % BATCH_MAX_DOCS, 0);
            assert_int_equal(q - last, BATCH_MAX_DOCS);
            last = q;
        }
        assert_int_equal(q + b.n, (size_t)i + 1);
    }
    assert_int_equal(handovers, (size_t)n / BATCH_MAX_DOCS);
    assert_int_equal(b.n, (size_t)n % BATCH_MAX_DOCS);
    /* the part's end hands over its tail */
    assert_true(snapshot_batch_push(&f->s, &b, &f->coll));
    assert_int_equal(b.n, 0);
    assert_int_equal(queued(f), (size_t)n);
    assert_int_equal(f->coll.done, n);
    assert_int_equal(f->s.total_done, n);
    take_in_order(f, n);
}

/* Documents of ~100 KiB: a batch is handed over when it reaches
 * BATCH_MAX_BYTES, well before BATCH_MAX_DOCS documents. */
static void test_batches_by_bytes(void **state)
{
    struct fixture *f = *state;
    struct snapshot_batch b = {NULL, NULL, 0, 0, 0};
    struct snapshot_doc *probe = doc_new(f, 0, 100 * 1024);
    size_t len = probe->doc->len, per_batch = (BATCH_MAX_BYTES + len - 1) / len;
    size_t before = 0;

    snapshot_doc_free(probe);
    assert_true(per_batch < BATCH_MAX_DOCS);
    for (size_t i = 0; i < 3 * per_batch; i++) {
        assert_true(snapshot_batch_offer(&f->s, &b, &f->coll, doc_new(f, (int64_t)i, 100 * 1024)));
        if ((i + 1) % per_batch != 0) {
            /* below the byte bound: still with the reader */
            assert_int_equal(queued(f), before);
        } else {
            before += per_batch;
            assert_int_equal(queued(f), before);
            assert_int_equal(f->s.queued_bytes, before * len);
            assert_int_equal(b.n, 0);
        }
    }
    take_in_order(f, (int64_t)(3 * per_batch));
}

/* While the task thread waits on an empty queue, a reader hands over what it
 * holds at once: one document, not a full batch. */
static void test_starving_hands_over_at_once(void **state)
{
    struct fixture *f = *state;
    struct snapshot_batch b = {NULL, NULL, 0, 0, 0};

    assert_true(snapshot_batch_offer(&f->s, &b, &f->coll, doc_new(f, 0, 16)));
    assert_int_equal(queued(f), 0);
    atomic_store(&f->s.starving, true);
    assert_true(snapshot_batch_offer(&f->s, &b, &f->coll, doc_new(f, 1, 16)));
    assert_int_equal(queued(f), 2);
    assert_int_equal(b.n, 0);
    atomic_store(&f->s.starving, false);
    take_in_order(f, 2);
}

/* The reader of test_waiter_gets_partial_batch: waits until the task thread
 * waits on the empty queue, offers one document, then waits to be told to
 * end its part. */
struct waiter_arg {
    struct fixture *f;
    struct snapshot_batch b;
    atomic_bool finish;
    bool offered;
};

static void *reader_one(void *p)
{
    struct waiter_arg *a = p;
    while (!atomic_load(&a->f->s.starving))
        sleep_ms(1);
    a->offered = snapshot_batch_offer(&a->f->s, &a->b, &a->f->coll, doc_new(a->f, 0, 16));
    while (!atomic_load(&a->finish))
        sleep_ms(1);
    return NULL;
}

/* snapshot_next on an empty queue gets a reader's first document although the
 * reader's batch is far from full (it would otherwise wait for 255 more, or
 * for the part's end, which here never comes before the call returns). */
static void test_waiter_gets_partial_batch(void **state)
{
    struct fixture *f = *state;
    struct waiter_arg a = {.f = f, .b = {NULL, NULL, 0, 0, 0}, .offered = false};
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct snapshot_doc *d = NULL;
    enum snapshot_status st;
    pthread_t t;

    atomic_init(&a.finish, false);
    assert_int_equal(pthread_create(&t, NULL, reader_one, &a), 0);
    /* long enough that a reader holding its document back is a WAIT here */
    st = snapshot_next(&f->s, 10000, &d, &fail, &err);
    atomic_store(&a.finish, true);
    pthread_join(t, NULL);
    assert_true(a.offered);
    assert_int_equal(st, SNAPSHOT_DOC);
    assert_non_null(d);
    snapshot_doc_free(d);
    assert_int_equal(a.b.n, 0);
    snapshot_batch_free(&a.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batches_by_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batches_by_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_starving_hands_over_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiter_gets_partial_batch, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
