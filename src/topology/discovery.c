/*
 * topology/discovery: config.shards polled on a thread of its own
 * (discovery.h).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "topology/discovery.h"

#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/xalloc.h"

struct discovery {
    const struct mcdc_config *cfg;
    struct ev_loop *loop;
    ev_async ready_async;
    discovery_ready_fn ready;
    void *ctx;
    mongoc_uri_t *uri;
    mongoc_client_pool_t *pool;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;               /* under mu */
    bool has_list;           /* under mu: list waits for discovery_take() */
    struct shard_list list;  /* under mu */
    int64_t failing_since_ms; /* discovery thread only */
    int64_t warned_ms;
};

static void on_ready(struct ev_loop *loop, ev_async *w, int revents)
{
    struct discovery *d = w->data;
    (void)loop;
    (void)revents;
    d->ready(d->ctx);
}

/* One poll on the discovery thread: the list for the main loop, or a WARN. */
static void poll_once(struct discovery *d)
{
    struct shard_list shards;
    struct mcdc_error err = MCDC_ERROR_INIT;
    int64_t began = mcdc_clock_mono_ms(), now;

    if (!shards_read(d->pool, &shards, &err)) {
        char *why = config_redact_text(err.msg, d->cfg->connection_string);
        /* The read itself may have waited: failing since the attempt began. */
        if (d->failing_since_ms == 0)
            d->failing_since_ms = began;
        now = mcdc_clock_mono_ms();
        if (d->warned_ms == 0 || now - d->warned_ms >= DISCOVERY_WARN_MS) {
            LOG_WARN("shard discovery has failed for %lld ms: %s; the running capture tasks go on",
                     (long long)(now - d->failing_since_ms), why);
            d->warned_ms = now;
        }
        free(why);
        return;
    }
    if (d->failing_since_ms != 0) {
        LOG_INFO("shard discovery works again after %lld ms",
                 (long long)(mcdc_clock_mono_ms() - d->failing_since_ms));
        d->failing_since_ms = 0;
        d->warned_ms = 0;
    }
    pthread_mutex_lock(&d->mu);
    if (d->has_list)
        shard_list_clear(&d->list);
    d->list = shards;
    d->has_list = true;
    pthread_mutex_unlock(&d->mu);
    ev_async_send(d->loop, &d->ready_async);
}

static void *discovery_main(void *arg)
{
    struct discovery *d = arg;
    int64_t every = d->cfg->poll_interval_ms_topology > 0 ? d->cfg->poll_interval_ms_topology
                                                          : 30000;

    pthread_setname_np(pthread_self(), "discovery");
    mcdc_log_set_component("discovery");
    pthread_mutex_lock(&d->mu);
    while (!d->stop) {
        struct timespec until = mcdc_clock_deadline(CLOCK_MONOTONIC, every);
        while (!d->stop && pthread_cond_timedwait(&d->cv, &d->mu, &until) != ETIMEDOUT) {
        }
        if (d->stop)
            break;
        pthread_mutex_unlock(&d->mu);
        poll_once(d);
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* The seed's URI with every wait of one read capped at DISCOVERY_IO_TIMEOUT_MS. */
static void cap_option(mongoc_uri_t *uri, const char *name, int32_t dflt)
{
    int32_t v = mongoc_uri_get_option_as_int32(uri, name, dflt);
    if (v <= 0 || v > DISCOVERY_IO_TIMEOUT_MS)
        v = DISCOVERY_IO_TIMEOUT_MS;
    mongoc_uri_set_option_as_int32(uri, name, v);
}

struct discovery *discovery_start(const struct mcdc_config *cfg, const mongoc_uri_t *seed_uri,
                                  struct ev_loop *loop, discovery_ready_fn ready, void *ctx,
                                  struct mcdc_error *err)
{
    struct discovery *d = xcalloc(1, sizeof *d);
    bson_error_t error;
    pthread_condattr_t ca;

    d->cfg = cfg;
    d->loop = loop;
    d->ready = ready;
    d->ctx = ctx;
    d->uri = mongoc_uri_copy(seed_uri);
    cap_option(d->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, DISCOVERY_IO_TIMEOUT_MS);
    cap_option(d->uri, MONGOC_URI_CONNECTTIMEOUTMS, (int32_t)cfg->connect_timeout_ms);
    cap_option(d->uri, MONGOC_URI_SOCKETTIMEOUTMS, (int32_t)cfg->socket_timeout_ms);
    d->pool = mongoc_client_pool_new_with_error(d->uri, &error);
    if (d->pool == NULL) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, (int)error.code, "shard discovery pool: %s",
                       error.message);
        mongoc_uri_destroy(d->uri);
        free(d);
        return NULL;
    }
    mongoc_client_pool_set_error_api(d->pool, MONGOC_ERROR_API_VERSION_2);
    pthread_mutex_init(&d->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&d->cv, &ca);
    pthread_condattr_destroy(&ca);
    ev_async_init(&d->ready_async, on_ready);
    d->ready_async.data = d;
    ev_async_start(loop, &d->ready_async);
    if (pthread_create(&d->thread, NULL, discovery_main, d) != 0) {
        mcdc_error_set(err, MCDC_ERR_INTERNAL, 0, "cannot start the shard discovery thread");
        ev_async_stop(loop, &d->ready_async);
        pthread_cond_destroy(&d->cv);
        pthread_mutex_destroy(&d->mu);
        mongoc_client_pool_destroy(d->pool);
        mongoc_uri_destroy(d->uri);
        free(d);
        return NULL;
    }
    return d;
}

bool discovery_take(struct discovery *d, struct shard_list *out)
{
    bool has;

    pthread_mutex_lock(&d->mu);
    has = d->has_list;
    if (has) {
        *out = d->list;
        memset(&d->list, 0, sizeof d->list);
        d->has_list = false;
    }
    pthread_mutex_unlock(&d->mu);
    return has;
}

void discovery_request_stop(struct discovery *d)
{
    if (d == NULL)
        return;
    pthread_mutex_lock(&d->mu);
    d->stop = true;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

void discovery_destroy(struct discovery *d)
{
    if (d == NULL)
        return;
    discovery_request_stop(d);
    pthread_join(d->thread, NULL);
    if (ev_is_active(&d->ready_async))
        ev_async_stop(d->loop, &d->ready_async);
    if (d->has_list)
        shard_list_clear(&d->list);
    mongoc_client_pool_destroy(d->pool);
    mongoc_uri_destroy(d->uri);
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
