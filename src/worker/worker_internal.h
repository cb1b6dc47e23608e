/*
 * worker internals shared by worker.c (thread, reconnects, streaming) and
 * worker_snapshot.c (the snapshot phase). Not a public contract.
 */
#ifndef MCDC_WORKER_WORKER_INTERNAL_H
#define MCDC_WORKER_WORKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "capture/oplog.h"
#include "capture/resume.h"
#include "encode/encode.h"
#include "event/event.h"
#include "metrics/metrics.h"
#include "offsets/offsets.h"
#include "pipeline/pipeline.h"
#include "sink/sink.h"
#include "worker/worker.h"

/* How a phase (discover, snapshot, stream) ended. */
enum phase {
    PHASE_OK = 0,       /* finished its job */
    PHASE_STOPPED,      /* stop requested */
    PHASE_RETRY,        /* transient failure: back off and reconnect */
    PHASE_HISTORY_LOST, /* the position is no longer in the oplog */
    PHASE_FATAL,        /* w->err says why */
};

#define WORKER_GATE_BUCKETS 320

struct worker {
    const struct mcdc_config *cfg;
    mongoc_client_pool_t *pool;
    char rs[128];
    bool rs_known;
    bool rs_named; /* rs is the set the connection string names, not yet confirmed */
    worker_exit_cb on_exit;
    void *ctx;
    pthread_t thread;
    atomic_bool stop; /* worker_request_stop(), from the main thread */
    atomic_bool finished;
    int exit_code;
    struct mcdc_error err; /* why the task failed, or the last transient failure */

    mongoc_client_t *client; /* popped from pool, this thread only */
    struct pipeline *pipe; /* encoder, sink, tracker, store, commits (pipeline.h) */
    bson_t pipeline; /* stages after $changeStream */
    bool has_pipeline;
    bson_t oplog_query; /* capture.mode oplog: namespace/operation conditions on entries */
    bool has_oplog_query;
    struct oplog_held oplog_held; /* what the last oplog reader held back (not yet committed) */
    bool warned_mode;   /* the capture-mode migration WARN was given */

    struct mcdc_position stream_pos; /* after the last processed event: where to resume */
    bool have_stored;                /* stream_pos came from the store (or a finished snapshot) */
    char *snap_progress; /* the stored, interrupted initial snapshot's progress member
                          * (snapshot.resumable; snapshot/progress.h), or NULL */
    bool need_snapshot;
    bool delayed_snapshot, delayed_stream; /* snapshot.delay.ms / streaming.delay.ms done */
    bool snapshot_only;                    /* initial_only: stop after the snapshot */
    int64_t attempts;                      /* failed connection attempts in a row */
    int64_t history_lost_runs; /* re-snapshots for history lost, none streamed since */
    int64_t selection_timeout_ms;          /* overall server-selection budget per attempt */
    int64_t start_at; /* BSON timestamp to stream from when nothing is stored, or -1 */
    worker_snapshot_filters_fn snapshot_filters; /* NULL: collections are read whole */
    void *filters_ctx;
    struct worker_order_gate gate;
    bool has_gate;
    bool gate_started; /* the gate was told this task reached its shard */
    struct worker_primary primary; /* addresses used as given (worker_primary.c) */
    bool has_primary;
    bool need_primary;             /* find the primary before the next connection */
    char primary_addr[256];        /* the address of the last primary found */
    int64_t primary_checked_ms;    /* when primary.lost was last asked */
    bool merged;        /* one stream through mongos (worker_start_merged) */
    bool per_shard;     /* one shard of a sharded cluster (worker_start) */
    bool stored_time_checked; /* the stored position was compared with the oplog */
    bool rs_partition;  /* merged: offsets under {server_id, rs} rather than {server_id} */
    struct mcdc_position merged_start; /* merged: where to start when nothing is stored */
    bool has_merged_start;
    bson_t key_patterns; /* event.key.mode document_key: "<db>.<coll>" -> shard key pattern */
    bson_t snap_key;     /* the documentKey built for one snapshot record */
    int64_t gate_waits;      /* events held by the gate */
    int64_t gate_wait_ms;    /* total ms they were held */
    uint64_t gate_hist[WORKER_GATE_BUCKETS]; /* added latency per checked event (worker_stream.c) */
    uint64_t gate_checked;                   /* events the gate looked at */
    uint64_t events, skipped;
    struct metrics_task *m;     /* this task's metrics slot (NULL: registry full) */
    int64_t last_headroom_ms;   /* monotonic ms of the last oplog headroom check */
    bool headroom_warned;       /* WARN given while the headroom is under the threshold */
    uint64_t oversize_skipped; /* cursor.oversize.handling.mode skip: stubs moved past */
    uint64_t split_events;     /* events reassembled from split fragments */
    bool split_checked;        /* the server was found to support the split stage */
    struct incr *inc;             /* incremental snapshot engine (worker_incremental.c) */
    struct incr_reader *inc_reader; /* its chunk reader thread, started at the first chunk */
    /* the signal document's own position, while the signal is handled */
    const struct mcdc_position *signal_pos;
    struct mcdc_position inc_pos; /* a position stamped with its progress */
    struct signal_queue *sigq;    /* this task's signal queue on the bus, NULL: none */
    struct signal_bus *bus;       /* the daemon's signal bus (worker_options), NULL: none */
    struct notifier *notifier;    /* the daemon's notifier (worker_options), NULL: none */
    atomic_bool drain_requested; /* worker_request_drain(), from the main thread */
    atomic_bool drained;         /* drained up to drain_until and stopped (read by main) */
    uint64_t drain_until; /* the removed shard's last write (BSON timestamp), 0: not read yet */
    uint64_t drain_events, drain_records; /* the counts when draining began */
};

/*
 * Draining a removed shard (worker_drain.c). worker_drain_step, after each
 * batch or event of a streaming loop: once a drain is requested, reads the
 * replica set's last write (PHASE_RETRY with w->err when it cannot), and
 * when the stream position has reached it with every record acknowledged
 * logs the counts and sets the stop flag. worker_drain_failed: the ERROR of
 * a task that ended in failure before its drain was done.
 * worker_position_time: pos's cluster time (BSON timestamp), 0 if none.
 */
enum phase worker_drain_step(struct worker *w);
void worker_drain_failed(struct worker *w);
uint64_t worker_position_time(const struct mcdc_position *pos);

/*
 * cursor.oversize.handling.mode (worker_oversize.c). worker_oversize_ready:
 * before a change stream is opened under split, checks once that the
 * server has $changeStreamSplitLargeEvent (PHASE_FATAL with w->err naming
 * the version and the setting when not; PHASE_RETRY when buildInfo failed).
 * worker_oversize_skipped: a skip stub doc at pos (capture/oversize.h) is
 * logged (namespace, _id, sizes, threshold), counted and passed like a
 * filtered event, so the stored position moves past it.
 */
enum phase worker_oversize_ready(struct worker *w);
enum phase worker_oversize_skipped(struct worker *w, const bson_t *doc,
                                   const struct mcdc_position *pos, int64_t full_size,
                                   int64_t before_size);
/*
 * One run's discovery and setup (worker_setup.c), called by run() on each
 * (re)connect. worker_discover: the replica set's name from `hello` into
 * w->rs; PHASE_FATAL (w->err) at a mongos or a standalone server, the phase
 * of a failed command otherwise. worker_setup: opens encoder, sink, tracker
 * and store, loads the position and decides the plan; *proceed false: the
 * task ends with the returned phase (PHASE_FATAL with w->err on a failure).
 */
enum phase worker_discover(struct worker *w);
enum phase worker_setup(struct worker *w, bool *proceed);

/*
 * Loads the task's stored position into w->stream_pos (worker_commit.c):
 * every partition form Debezium 1.x/2.x/3.x or mongocdc may have written for
 * this source, the newest wins (offset_store_load_forms, debezium-format.md
 * §4.4), logged at INFO with the key and writer adopted (and the key stored
 * under from then on when it differs); a Debezium value with an open
 * transaction is WARNed about. *found false: none. False with err as the
 * store's load.
 */
bool worker_load_stored(struct worker *w, bool *found, struct mcdc_error *err);

/* The q-quantile (0..1) of the order gate's added latency per checked event,
 * µs (bucket lower bound, ~9 % resolution); 0 when none was checked. */
double worker_gate_percentile_us(const struct worker *w, double q);

/* The offsets partition's rs (NULL: the {server_id} partition of a merged
 * stream in the 3.x dialect). */
static inline const char *worker_partition(const struct worker *w)
{
    if (w->merged)
        return w->rs_partition ? w->rs : NULL;
    return offsets_layout_partition(w->cfg, w->rs, false, w->per_shard);
}

/* The stop flag, read atomically (worker_request_stop() runs on the main
 * thread). The sink and the snapshot readers read the same flag through
 * their const atomic_bool pointer. */
static inline bool worker_stopping(const struct worker *w)
{
    return atomic_load(&w->stop);
}

/*
 * Produces recs (taking their buffers) through the pipeline
 * (pipeline_produce), each registered in the in-flight tracker; only the
 * last carries pos (NULL: none), stamped with the incremental snapshot's
 * progress. what names the records' source in errors. PHASE_OK,
 * PHASE_STOPPED or PHASE_FATAL (w->err).
 */
enum phase worker_produce(struct worker *w, struct mcdc_records *recs,
                          const struct mcdc_position *pos, const char *what);

/* Sleeps ms while serving delivery reports (pipeline_pause_ms); false if
 * stop was requested. */
bool worker_pause_ms(struct worker *w, int64_t ms);

/*
 * Waits until a server matching the client's read preference is selectable:
 * blocking selections of at most WORKER_SELECTION_SLICE_MS each (the pool
 * URI's serverSelectionTimeoutMS), the stop flag checked between them, for
 * up to w->selection_timeout_ms in all (MongoDB Server Selection spec:
 * serverSelectionTimeoutMS bounds the whole selection). PHASE_OK when
 * selectable, PHASE_STOPPED on stop, PHASE_RETRY (w->err: the selection
 * error) when the budget ran out (worker_recover.c).
 */
enum phase worker_await_server(struct worker *w);

/*
 * Once per task, before streaming from a stored position: refuses one
 * whose cluster time is later than the newest oplog entry by more than
 * WORKER_FUTURE_TOLERANCE_S (offsets of another deployment, or a deployment
 * restored from an older backup: streaming would wait for a time the server
 * reaches only later, then skip everything before it). PHASE_FATAL with
 * w->err naming both times and what to do; PHASE_OK otherwise, also when
 * the oplog cannot be read (no privilege: the check is skipped, said at
 * DEBUG) or the task streams through mongos (no oplog). worker_recover.c.
 */
#define WORKER_FUTURE_TOLERANCE_S 60
enum phase worker_check_stored_time(struct worker *w);

/* After PHASE_RETRY: counts the attempt (a delivery failure: the pipeline's
 * failure streak, failures in a row with the stored offsets unmoved;
 * otherwise attempts),
 * waits the backoff delay; PHASE_OK to reconnect, PHASE_FATAL after
 * connect.max.attempts (worker_recover.c). */
enum phase worker_backoff(struct worker *w);

/*
 * Addresses used as given (w->primary, worker_primary.c). connect: pushes
 * back the task's client, asks primary.find for the pool on the primary and
 * pops a client from it; PHASE_OK, PHASE_RETRY (w->err: no primary among
 * the addresses) or PHASE_FATAL (no pool). check (streaming loops, at most
 * every WORKER_PRIMARY_CHECK_MS): PHASE_RETRY with w->err when the server
 * stepped down, so the task reconnects to the new primary; PHASE_OK
 * otherwise, and always without w->primary.
 */
#define WORKER_PRIMARY_CHECK_MS 250
enum phase worker_primary_connect(struct worker *w);
enum phase worker_primary_check(struct worker *w);

/* After PHASE_HISTORY_LOST: PHASE_OK with a new snapshot scheduled (WARN
 * naming the lost range), or PHASE_FATAL by snapshot.mode (worker_recover.c). */
enum phase worker_history_lost(struct worker *w);

/* The streaming phase until stop or failure (worker_stream.c): change
 * streams, or the oplog reader when worker_uses_oplog(). */
enum phase worker_stream(struct worker *w);

/* The metrics op label of a change (worker_metrics.c). */
enum metrics_op worker_metrics_op(enum mcdc_op op);

/* Every oplog.headroom.check.interval.ms, reads the oplog's oldest entry
 * for the headroom of the last stored position (the pipeline's) and WARNs
 * under oplog.headroom.warn.seconds (worker_metrics.c). */
void worker_metrics_service(struct worker *w);

/*
 * The sources of worker_stream's loop (capture/source.h). worker_oplog_open
 * (worker_oplog.c): capture.mode oplog, tailing local.oplog.rs from
 * w->stream_pos (debezium-format.md §1.4, §3.5); worker_store_start
 * (worker_stream.c): with nothing stored, the source's start stored before
 * anything is produced, so a restart without acknowledged records resumes
 * there. Both: PHASE_OK or the phase of a failure (w->err); *out is the
 * opened source (NULL: it could not open).
 */
struct mcdc_source;
enum phase worker_oplog_open(struct worker *w, struct mcdc_source **out);
enum phase worker_store_start(struct worker *w, struct mcdc_source *src);

/*
 * The migration table of debezium-format.md §4.4 for this task: true when
 * capture.mode is oplog and the stored position (if any) was written by oplog
 * capture. A stored change-stream position keeps change streams (with one
 * WARN, worker_oplog.c); a stored oplog position under a change_streams mode
 * streams from its operation time (worker_stream.c).
 */
bool worker_uses_oplog(struct worker *w);

/*
 * A position that is not an emitted data event (a filtered event, a no-op, a
 * post-batch resume token): closes an open transaction eagerly when
 * transaction.eager.end is on, else just advances the position
 * (worker_stream.c).
 */
enum phase worker_pass_position(struct worker *w, const struct mcdc_position *pos);

/* heartbeat.interval.ms: a heartbeat record carrying w->stream_pos when due
 * (debezium-format.md §1.9; worker_stream.c). */
enum phase worker_maybe_heartbeat(struct worker *w, int64_t *last_ms);

/* Sharded clusters: holds ev until the donor shard's task has every earlier
 * event of a migrated document acknowledged (topology/gate.h; design.md §2).
 * Serves this task's deliveries while waiting. Returns PHASE_OK when ev may
 * be produced, PHASE_STOPPED on a stop, or the phase worker_service gave. */
enum phase worker_hold_for_donor(struct worker *w, const struct mcdc_event *ev);

/* Sharded clusters: publishes pos (acknowledged: committed or stored) as this
 * task's order-gate watermark, the cluster time of its operation or resume
 * token (topology/gate.h); nothing without a gate or a time (worker_commit.c). */
void worker_gate_publish(struct worker *w, const struct mcdc_position *pos);

/*
 * Encodes ev and produces its records through the pipeline (pipeline_emit),
 * pos stamped with the incremental snapshot's progress. Returns PHASE_OK,
 * PHASE_STOPPED or PHASE_FATAL (w->err names the namespace, key and size).
 */
enum phase worker_emit(struct worker *w, const struct mcdc_event *ev,
                       const struct mcdc_position *pos);

/* An event that cannot be encoded (err says why): pipeline_event_failed
 * with pos stamped (NULL: no move); PHASE_OK or PHASE_FATAL (w->err). */
enum phase worker_event_failed(struct worker *w, const struct mcdc_event *ev,
                               const struct mcdc_position *pos, const struct mcdc_error *err);

/* pipeline_event_id (worker_fail.c). */
void worker_event_id(const struct mcdc_event *ev, char *out, size_t size);

/* pipeline_service, then the oplog headroom check (worker_metrics_service).
 * PHASE_OK; PHASE_RETRY (w->err) after a failed delivery a restart from the
 * stored offsets may pass; PHASE_FATAL (w->err) on a delivery error that
 * cannot pass or an offset store failure (worker_commit.c). */
enum phase worker_service(struct worker *w, bool force_commit);

/* The phase of a pipeline status. */
enum phase worker_phase_of(enum pipeline_status st);

/* Converts a capture/snapshot failure into a phase, filling w->err. */
enum phase worker_phase_from_failure(struct worker *w, const struct resume_failure *fail,
                                     const struct mcdc_error *err);

/*
 * Incremental snapshots and signals (worker_incremental.c).
 * worker_incremental_setup: a new engine restored from the loaded
 * w->stream_pos's offset members (PHASE_FATAL with w->err when they are
 * unreadable); subscribes to the signal bus if one is attached.
 * worker_incremental: the one hook of the streaming loops, after each
 * iteration: ev the event just handled (NULL: none), idle true after an
 * empty batch. Feeds the window, handles source-channel signals and the
 * queue, emits closed windows and hands the next chunk to the reader
 * thread (a finished read is attached here, never waited for, except at a
 * close marker that came before it). PHASE_OK, or the phase of a failed
 * read or produce.
 * worker_incremental_stream_end: the stream stops: the reader is stopped
 * (a read in flight abandoned; the chunk is read again later).
 * worker_incremental_stamp: pos with the engine's progress added (a
 * borrowed copy valid until the next call), or pos itself when idle.
 */
enum phase worker_incremental_setup(struct worker *w);

/*
 * worker_signal_event: a change of the signal collection, handled before
 * the stream position passes it (called by the streaming loops before the
 * event is emitted or its position passed; pos the event's position, which
 * a `log` signal prints, as Debezium does): an insert that is a signal is
 * published and this task's queue drained, so what the signal asked for is
 * in every later position (worker_incremental_stamp). PHASE_OK, or
 * PHASE_STOPPED when a stop ended its handling (the position must then stay
 * before the event, so that the next run reads the signal again), or the
 * phase of a blocking snapshot's failure.
 */
enum phase worker_signal_event(struct worker *w, const struct mcdc_event *ev,
                               const struct mcdc_position *pos);

/*
 * worker_signals_at_stop: at a stop, the signals still waiting in this
 * task's queue (another shard's source signal, the kafka or file channel's,
 * which those channels no longer hold) are handled before the last commit,
 * so that the offsets record what they asked for, and the engine's state
 * is advanced at the stream position for the final commit; a blocking
 * snapshot cannot run then and is refused with an ERROR naming the signal;
 * during the initial snapshot nothing is handled (an ERROR gives the count).
 * The queue is closed first: a signal published later is not delivered to
 * it and its channel keeps it for the next run (signal_bus_publish).
 */
void worker_signals_at_stop(struct worker *w);

/*
 * worker_signals_drain: the signals waiting in the task's queue (kafka and
 * file channels, other shards' source signals) handled, and what they
 * queued recorded by a position advance at once. PHASE_OK or the phase of
 * a blocking snapshot's failure (worker_signals.c).
 */
enum phase worker_signals_drain(struct worker *w);

/* A notification of the "Incremental Snapshot" aggregate on the daemon's
 * notifier (none: nothing); id the signal's, kv n pairs (notify.h). */
struct notify_kv;
void worker_notify(struct worker *w, const char *type, const char *id, const struct notify_kv *kv,
                   size_t n);

/* Whether ev is a change of the namespace ns ("db.coll"; NULL: false). */
bool worker_event_in(const struct mcdc_event *ev, const char *ns);

/* One collection an execute-snapshot signal names (worker_resolve.c). */
struct worker_want {
    char db[256], coll[256];
    const bson_t *cond; /* additional condition, borrowed from the request; NULL none */
};

struct mcdc_snapshot_request;

/*
 * The collections req (signal id, for the log) names on this task's server
 * (worker_resolve.c): into *out (malloc'd, caller frees) and *count, each
 * collection once. One listDatabases and one listCollections per database;
 * entries matching nothing are summarised in one WARN per kind. PHASE_OK,
 * or, when stoppable, PHASE_STOPPED once a stop is requested (*out NULL;
 * only for a signal the task will read again from its own stream).
 */
/*
 * A blocking snapshot of the n collections v (signal id): streaming waits
 * while the initial-snapshot procedure copies them (worker_incremental.c).
 * PHASE_OK, PHASE_STOPPED, or a failure's phase.
 */
enum phase worker_blocking_snapshot(struct worker *w, const struct worker_want *v, size_t n,
                                    const char *id);

enum phase worker_resolve(struct worker *w, const struct mcdc_snapshot_request *req,
                          const char *id, bool stoppable, struct worker_want **out,
                          size_t *count);
void worker_incremental_teardown(struct worker *w);
void worker_incremental_stream_end(struct worker *w);
enum phase worker_incremental(struct worker *w, const struct mcdc_event *ev, bool idle);
const struct mcdc_position *worker_incremental_stamp(struct worker *w,
                                                     const struct mcdc_position *pos);

/*
 * Resumable initial snapshots (worker_snapshot_resume.c). _load, at setup
 * while stream_pos is the stored position: takes the progress member out of
 * stream_pos's extra members (always: it is never carried on) into
 * w->snap_progress when the position is initsync and snapshot.resumable is
 * on. _resumable, before the copy: marks the plan resumable as
 * snapshot.resumable says, with during's extra members as the records'
 * base, and attaches w->snap_progress to it when it parses and fits the plan
 * (INFO: what is resumed) or says at WARN why not (the copy is then redone
 * whole); during then carries the stored progress until the first record.
 * A copy retried in the same process resumes from the progress its pipeline
 * stored last (pipeline_stored_json) when streaming resumes from the stored
 * position; a copy that started from no stored position is redone whole,
 * as its retry streams from a new start.
 */
struct snapshot_plan;
void worker_snapshot_progress_load(struct worker *w);
void worker_snapshot_resumable(struct worker *w, struct snapshot_plan *plan,
                               struct mcdc_position *during);

/* The initial snapshot, then w->stream_pos = the recorded start (worker_snapshot.c). */
enum phase worker_snapshot(struct worker *w);

/*
 * The rows of a running snapshot (the initial one and a blocking one share
 * this loop, worker_snapshot.c). emit is called for each document the
 * readers copy (d borrowed for the call), holding one back so that the
 * final one comes with last = true; when the snapshot copied nothing, emit
 * gets d = NULL and last = true once. progress (may be NULL) runs after each
 * step. The loop fills rows (documents emitted) and done (the readers
 * finished and the last row went to emit).
 */
struct snapshot;
struct snapshot_doc;
struct worker_snapshot_rows {
    enum phase (*emit)(struct worker *w, const struct snapshot_doc *d, bool last, void *ctx);
    void (*progress)(struct worker *w, struct snapshot *snap, void *ctx);
    void *ctx;
    int64_t rows;
    bool done;
};

/*
 * Takes snap's documents (snap borrowed) until the readers finish, the task
 * stops or a step fails, serving deliveries and offsets between them
 * (worker_service). Returns PHASE_OK when done, PHASE_STOPPED on a stop, the
 * phase of a failed read (worker_phase_from_failure) or what emit or
 * worker_service returned. Thread: the task's.
 */
enum phase worker_snapshot_take(struct worker *w, struct snapshot *snap,
                                struct worker_snapshot_rows *r);

#endif
