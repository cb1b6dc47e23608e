/*
 * worker_primary: a task whose pool follows the primary among addresses used
 * as given (mongodb.members.auto.discover false, debezium-format.md §6.1;
 * the finder itself is topology/primary.h). The driver cannot follow an
 * election on a direct connection, so the task does: it asks for the
 * primary before it connects and after every backoff, and leaves its stream
 * (resuming from the last delivered position, as after any failure) when
 * the server it reads stepped down.
 */
#include "worker/worker_internal.h"

#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"

enum phase worker_primary_connect(struct worker *w)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    mongoc_client_pool_t *pool = NULL;
    const char *addr = "";
    bool found;

    if (w->client != NULL) {
        mongoc_client_pool_push(w->pool, w->client);
        w->client = NULL;
    }
    found = w->primary.find(w->primary.ctx, &pool, &addr, &err);
    if (pool == NULL) {
        w->err = err;
        return PHASE_FATAL;
    }
    w->pool = pool;
    w->client = mongoc_client_pool_pop(pool);
    w->need_primary = false;
    w->primary_checked_ms = mcdc_clock_mono_ms();
    if (!found) {
        w->err = err;
        return PHASE_RETRY;
    }
    if (strcmp(addr, w->primary_addr) != 0) {
        LOG_INFO("%s: primary at %s (addresses used as given, directConnection)", w->rs, addr);
        snprintf(w->primary_addr, sizeof w->primary_addr, "%s", addr);
    }
    return PHASE_OK;
}

enum phase worker_primary_check(struct worker *w)
{
    int64_t now;

    if (!w->has_primary)
        return PHASE_OK;
    now = mcdc_clock_mono_ms();
    if (now - w->primary_checked_ms < WORKER_PRIMARY_CHECK_MS)
        return PHASE_OK;
    w->primary_checked_ms = now;
    if (!w->primary.lost(w->primary.ctx, w->client))
        return PHASE_OK;
    mcdc_error_set_retriable(&w->err, MCDC_ERR_MONGO, 10107,
                             "%s at %s is no longer primary (stepdown)", w->rs, w->primary_addr);
    return PHASE_RETRY;
}
