/*
 * worker/commit: the capture task's side of its delivery pipeline
 * (pipeline/pipeline.h): loading the stored position, the order gate's
 * watermark, and serving the pipeline (design.md §7; debezium-format.md
 * §4.2, §4.4).
 */
#include "worker/worker_internal.h"

#include <stdlib.h>
#include <string.h>

#include "capture/resume.h"
#include "common/log.h"

void worker_gate_publish(struct worker *w, const struct mcdc_position *pos)
{
    uint32_t sec = 0, ord = 0;

    if (!w->has_gate)
        return;
    if (pos->sec > 0)
        w->gate.publish(w->gate.ctx, ((uint64_t)pos->sec << 32) | (uint32_t)pos->ord);
    else if (pos->has_resume_token && resume_token_time(&pos->resume_token, &sec, &ord))
        w->gate.publish(w->gate.ctx, ((uint64_t)sec << 32) | ord);
}

/* Debezium's transaction state in an adopted value (TransactionContext.store):
 * mongocdc keeps no transaction counters in its offsets, so an open
 * transaction's BEGIN and counters start again; said, never silent. */
static void warn_debezium_transaction(const struct mcdc_position *pos)
{
    bson_t *extra;
    bson_iter_t it;

    if (pos->extra_json == NULL ||
        (extra = bson_new_from_json((const uint8_t *)pos->extra_json, -1, NULL)) == NULL)
        return;
    if (bson_iter_init_find(&it, extra, "transaction_id") && BSON_ITER_HOLDS_UTF8(&it))
        LOG_WARN("the adopted offsets hold Debezium's open transaction %s "
                 "(provide.transaction.metadata): mongocdc does not continue its counters; the "
                 "rest of that transaction gets a new BEGIN and orders counted from 1",
                 bson_iter_utf8(&it, NULL));
    bson_destroy(extra);
}

bool worker_load_stored(struct worker *w, bool *found, struct mcdc_error *err)
{
    const char *forms[3];
    size_t nforms = offsets_partition_forms(w->cfg, w->rs, w->merged, w->per_shard, forms);
    struct offset_origin origin = {0};
    char d[128];

    if (!offset_store_load_forms(pipeline_store(w->pipe), forms, nforms, &w->stream_pos, found,
                                 &origin, err))
        return false;
    if (*found) {
        char *own = offsets_partition_key(mcdc_config_connector_name(w->cfg),
                                          w->cfg->topic_prefix, worker_partition(w));
        resume_describe_position(&w->stream_pos, d, sizeof d);
        LOG_INFO("stored position: %s%s; adopted from key %s, written by %s", d,
                 w->stream_pos.initsync ? " (an initial snapshot was interrupted)" : "",
                 origin.key, offset_writer_name(origin.writer));
        if (strcmp(own, origin.key) != 0)
            LOG_INFO("positions are stored from now on under %s, the key of "
                     "debezium.compatibility %s",
                     own, w->cfg->dialect == MCDC_DIALECT_1_9 ? "1.9" : "3.x");
        if (origin.writer != OFFSET_WRITER_MONGOCDC)
            warn_debezium_transaction(&w->stream_pos);
        free(own);
    } else {
        LOG_INFO("stored position: none");
    }
    offset_origin_clear(&origin);
    return true;
}

enum phase worker_service(struct worker *w, bool force_commit)
{
    struct mcdc_error err = MCDC_ERROR_INIT;
    enum pipeline_status st = pipeline_service(w->pipe, force_commit, &err);

    worker_metrics_service(w);
    if (st == PIPELINE_RETRY || st == PIPELINE_FATAL)
        w->err = err;
    return worker_phase_of(st);
}
