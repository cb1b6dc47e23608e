/*
 * pipeline internals shared by pipeline.c (lifecycle, produce, deliveries)
 * and pipeline_commit.c (service, commit, watches). Not a public contract.
 *
 * Thread: the owning capture task's.
 */
#ifndef MCDC_PIPELINE_PIPELINE_INTERNAL_H
#define MCDC_PIPELINE_PIPELINE_INTERNAL_H

#include "pipeline/pipeline.h"
#include "sink/sink.h"

struct pipeline {
    struct pipeline_options o;
    char *name;      /* the task's name, for client.id and messages */
    char *partition; /* the offsets partition's rs, NULL: {server_id} */
    struct metrics_task *m;

    /* open between pipeline_open and pipeline_drop */
    struct encoder *enc;
    struct sink *sink;
    struct inflight *inf;
    struct offset_store *store;

    /* the commit timer: the newest committable position not yet stored */
    struct mcdc_position to_commit;
    bool to_commit_dirty;
    int64_t last_commit_ms; /* monotonic ms of the last commit step */

    /* the ack-stall watch */
    int64_t last_ack_ms;       /* monotonic ms of the last acknowledgement */
    int64_t ack_wait_since_ms; /* records in flight since (0: none in flight) */
    bool ack_stalled;          /* WARN given for the current stall */

    /* the stalled-offsets watch (offsets.stall.threshold.ms) */
    uint64_t stall_stored_t; /* offset_position_time of the stored position, 0 none */
    int64_t stall_since_ms;  /* monotonic ms it was last seen to move (0: not yet) */
    bool stall_warned;       /* WARN given for the current stall */

    /* delivery failure */
    bool delivery_failed;
    bool must_restart;              /* pipeline_service returned PIPELINE_RETRY */
    struct mcdc_error delivery_err; /* the first failure since the last open */
    int64_t failures;               /* delivery failures in a row with the stored offsets unmoved */
    char *failed_at;                /* progress text of the stored position at the last of them */
    char *stored_json;              /* progress text of the last position stored, NULL none */
    int64_t stored_sec;             /* epoch s of the last stored position, 0 none */

    uint64_t records, failed_events, dead_lettered;
};

/* The sink's delivery callback (sink_delivery_cb), ctx the pipeline. */
void pipeline_on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                          bool dead_lettered, void *ctx);

/* The stop flag (false without one). */
static inline bool pipeline_stopping(const struct pipeline *p)
{
    return p->o.stop != NULL && atomic_load(p->o.stop);
}

#endif
