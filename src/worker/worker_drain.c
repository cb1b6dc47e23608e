/*
 * worker_drain: a removed shard's task reads up to the shard's last write,
 * then stops (worker_request_drain(), issue #8). A shard leaves
 * config.shards once removeShard has completed (mongo-sim-spec.md §6.2): it
 * holds no chunk and is no database's primary, so nothing the cluster writes
 * lands on it afterwards, but its task may still lag behind what was written
 * before (debezium-format.md §6.1: every shard's changes are delivered).
 */
#include "worker/worker_internal.h"

#include "capture/hello.h"
#include "capture/resume.h"
#include "common/log.h"

void worker_request_drain(struct worker *w)
{
    atomic_store(&w->drain_requested, true);
}

bool worker_drained(struct worker *w)
{
    return atomic_load(&w->drained);
}

/* The cluster time of pos as a BSON timestamp value, 0 when it has none. */
uint64_t worker_position_time(const struct mcdc_position *pos)
{
    return position_time(pos);
}

/*
 * The replica set's last write: `hello` lastWrite.opTime.ts of the member
 * the task reads from (the primary), else the reply's operationTime.
 * Read on the task's own connection: the main loop never waits for a removed
 * shard that may be unreachable. False with w->err (retriable) on failure.
 */
static bool last_write(struct worker *w, uint64_t *out)
{
    struct mcdc_hello h;
    bson_error_t error;
    bson_iter_t it;
    bool ok = mcdc_hello_run(w->client, 0, &h, &error);
    const bson_t *reply = &h.reply;

    *out = 0;
    if (!ok) {
        mcdc_error_from_bson(&w->err, error.code, error.message, true);
    } else if (bson_iter_init(&it, reply) &&
               bson_iter_find_descendant(&it, "lastWrite.opTime.ts", &it) &&
               BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        uint32_t sec, inc;
        bson_iter_timestamp(&it, &sec, &inc);
        *out = ((uint64_t)sec << 32) | inc;
    } else if (bson_iter_init_find(&it, reply, "operationTime") && BSON_ITER_HOLDS_TIMESTAMP(&it)) {
        uint32_t sec, inc;
        bson_iter_timestamp(&it, &sec, &inc);
        *out = ((uint64_t)sec << 32) | inc;
    } else {
        mcdc_error_set(&w->err, MCDC_ERR_MONGO, 0,
                       "hello of the removed shard gave no lastWrite.opTime nor operationTime");
        ok = false;
    }
    mcdc_hello_destroy(&h);
    return ok;
}

enum phase worker_drain_step(struct worker *w)
{
    uint64_t at;

    if (!atomic_load(&w->drain_requested) || w->client == NULL)
        return PHASE_OK;
    if (w->drain_until == 0) {
        if (!last_write(w, &w->drain_until))
            return PHASE_RETRY;
        w->drain_events = w->events;
        w->drain_records = pipeline_records(w->pipe);
        LOG_INFO("shard %s removed from the cluster: draining its changes up to its last write "
                 "Timestamp(%u, %u), then stopping",
                 w->rs, (unsigned)(w->drain_until >> 32),
                 (unsigned)(w->drain_until & 0xffffffffu));
    }
    at = worker_position_time(&w->stream_pos);
    if (at < w->drain_until || pipeline_pending(w->pipe) > 0)
        return PHASE_OK;
    LOG_INFO("shard %s drained up to Timestamp(%u, %u): %llu events read and %llu records "
             "produced (all acknowledged) since its removal; stopping its task",
             w->rs, (unsigned)(w->drain_until >> 32), (unsigned)(w->drain_until & 0xffffffffu),
             (unsigned long long)(w->events - w->drain_events),
             (unsigned long long)(pipeline_records(w->pipe) - w->drain_records));
    atomic_store(&w->drained, true);
    worker_request_stop(w);
    return PHASE_OK;
}

void worker_drain_failed(struct worker *w)
{
    char d[128];

    if (!atomic_load(&w->drain_requested) || worker_drained(w))
        return;
    resume_describe_position(&w->stream_pos, d, sizeof d);
    if (w->drain_until != 0)
        LOG_ERROR("removed shard %s could not be drained: its changes after %s, up to its last "
                  "write Timestamp(%u, %u), were not read; its offsets stay in the store",
                  w->rs, d, (unsigned)(w->drain_until >> 32),
                  (unsigned)(w->drain_until & 0xffffffffu));
    else
        LOG_ERROR("removed shard %s could not be drained: its changes after %s, up to its "
                  "removal, were not read; its offsets stay in the store",
                  w->rs, d);
}
