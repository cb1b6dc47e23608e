/*
 * snapshot/incremental_bg: the reader thread (incremental_bg.h).
 */
#include "snapshot/incremental_bg.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/xalloc.h"

struct incr_reader {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* a job submitted, a job done, or quit */
    incr_reader_run_fn run;
    char task[128];

    /* under mu */
    struct incr_job *job;        /* in the reader: submitted, not taken back */
    mongoc_client_pool_t *pool;  /* the pool of job */
    bool running;                /* the reader has started job */
    bool quit;
    atomic_bool done;            /* job is finished (read without the lock) */
    atomic_bool cancel;          /* the job in flight is abandoned */
};

static void *reader_main(void *arg)
{
    struct incr_reader *r = arg;

    mcdc_log_set_component(r->task);
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->quit && (r->job == NULL || r->running || atomic_load(&r->done)))
            pthread_cond_wait(&r->cv, &r->mu);
        if (r->quit)
            break;
        struct incr_job *j = r->job;
        mongoc_client_pool_t *pool = r->pool;
        r->running = true;
        pthread_mutex_unlock(&r->mu);

        mongoc_client_t *client = pool != NULL ? mongoc_client_pool_pop(pool) : NULL;
        r->run(j, client, &r->cancel);
        if (client != NULL)
            mongoc_client_pool_push(pool, client);

        pthread_mutex_lock(&r->mu);
        r->running = false;
        atomic_store(&r->done, true);
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

struct incr_reader *incr_reader_new(const char *task, incr_reader_run_fn run,
                                    struct mcdc_error *err)
{
    struct incr_reader *r = xcalloc(1, sizeof *r);
    int rc;

    r->run = run != NULL ? run : incr_job_run;
    snprintf(r->task, sizeof r->task, "%s", task != NULL ? task : "");
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    atomic_init(&r->done, false);
    atomic_init(&r->cancel, false);
    rc = pthread_create(&r->thread, NULL, reader_main, r);
    if (rc != 0) {
        mcdc_error_set(err, MCDC_ERR_IO, rc, "cannot start the incremental snapshot reader: %s",
                       strerror(rc));
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        free(r);
        return NULL;
    }
    return r;
}

bool incr_reader_submit(struct incr_reader *r, struct incr_job *j, mongoc_client_pool_t *pool)
{
    bool ok;

    pthread_mutex_lock(&r->mu);
    ok = r->job == NULL;
    if (ok) {
        r->job = j;
        r->pool = pool;
        atomic_store(&r->done, false);
        atomic_store(&r->cancel, false);
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

bool incr_reader_busy(const struct incr_reader *r)
{
    struct incr_reader *m = (struct incr_reader *)r;
    bool busy;

    pthread_mutex_lock(&m->mu);
    busy = m->job != NULL;
    pthread_mutex_unlock(&m->mu);
    return busy;
}

struct incr_job *incr_reader_take(struct incr_reader *r, bool wait)
{
    struct incr_job *j = NULL;

    if (!wait && !atomic_load(&r->done))
        return NULL;
    pthread_mutex_lock(&r->mu);
    while (wait && r->job != NULL && !atomic_load(&r->done))
        pthread_cond_wait(&r->cv, &r->mu);
    if (r->job != NULL && atomic_load(&r->done)) {
        j = r->job;
        r->job = NULL;
        r->pool = NULL;
        atomic_store(&r->done, false);
    }
    pthread_mutex_unlock(&r->mu);
    return j;
}

void incr_reader_destroy(struct incr_reader *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->quit = true;
    atomic_store(&r->cancel, true);
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    incr_job_free(r->job); /* abandoned, finished or never started */
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
