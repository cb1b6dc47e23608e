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

    /* exactly-once (pipeline_txn.c): on for this run when eos */
    bool eos;
    char *txn_id;                  /* the transactional.id */
    bool txn_open;                 /* a transaction is begun and not yet ended */
    bool txn_in_commit;            /* the commit step is saving the offset record */
    bool txn_committing;           /* a commit timed out and goes on (called again) */
    enum sink_txn_status txn_status; /* what the store's writer last hit */
    uint64_t txn_records;          /* records produced in the open transaction */
    int64_t txn_begun_ms;          /* monotonic ms it began */
    bool batch_end;                /* poll boundary: the source has nothing more ready */
    struct mcdc_position txn_pos;  /* the newest position handed to the pipeline */
    bool txn_pos_dirty;            /* not yet in a committed transaction */
};

/* The sink's delivery callback (sink_delivery_cb), ctx the pipeline. */
void pipeline_on_delivery(void *opaque, const struct mcdc_error *err, int64_t latency_us,
                          bool dead_lettered, void *ctx);

/* After a failed delivery (p->delivery_err): PIPELINE_RETRY (restart from
 * the stored offsets, counted in the failure streak) or PIPELINE_FATAL
 * (too large, a closed pipe), err set. */
enum pipeline_status pipeline_delivery_failure(struct pipeline *p, struct mcdc_error *err);

/* Exactly-once (pipeline_txn.c). pipeline_txn_start creates p->sink:
 * transactional with init_transactions done when exactly.once.support is on
 * and the broker allows it (p->eos), else the plain sink; false with err.
 * pipeline_txn_attach gives the open store the transaction's writer.
 * pipeline_txn_stop aborts an open transaction (before the sink goes).
 * pipeline_txn_begin begins one unless open (false with err and
 * p->txn_status). pipeline_txn_reached notes the newest position (borrowed).
 * pipeline_txn_due: the boundary is reached (or force). */
bool pipeline_txn_start(struct pipeline *p, struct mcdc_error *err);
void pipeline_txn_attach(struct pipeline *p);
void pipeline_txn_stop(struct pipeline *p);
bool pipeline_txn_begin(struct pipeline *p, struct mcdc_error *err);
void pipeline_txn_reached(struct pipeline *p, const struct mcdc_position *pos);
bool pipeline_txn_due(const struct pipeline *p, bool force);

/* A transaction error (st, e) that ends the task or, when the transaction
 * was open longer than kafka.transaction.timeout.ms and the producer finds
 * itself fenced, restarts it (pipeline_commit.c): PIPELINE_FATAL or
 * PIPELINE_RETRY, err set. */
enum pipeline_status pipeline_txn_failed(struct pipeline *p, enum sink_txn_status st,
                                         const struct mcdc_error *e, struct mcdc_error *err);

/* Aborts the open transaction (cause: why) and asks for a restart from the
 * committed offsets (pipeline_commit.c): PIPELINE_RETRY, or what
 * pipeline_txn_failed returns when the abort finds the producer fenced. */
enum pipeline_status pipeline_txn_abort(struct pipeline *p, const struct mcdc_error *cause,
                                        struct mcdc_error *err);

/* The exactly-once commit step (pipeline_commit.c): with_offset, the offset
 * record of p->txn_pos into the open transaction, then commit. OK;
 * PIPELINE_RETRY after an abort (restart from the committed offsets);
 * PIPELINE_STOPPED; PIPELINE_FATAL (fenced, fatal, store). */
enum pipeline_status pipeline_txn_commit_now(struct pipeline *p, bool with_offset,
                                             struct mcdc_error *err);

/* The stop flag (false without one). */
static inline bool pipeline_stopping(const struct pipeline *p)
{
    return p->o.stop != NULL && atomic_load(p->o.stop);
}

#endif
