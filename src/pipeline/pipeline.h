/*
 * pipeline: the delivery pipeline of one capture task, the at-least-once
 * core (design.md §7). It owns the encoder, the sink, the in-flight tracker
 * and the offset store, and the state around them: the commit timer
 * (offsets.flush.interval.ms), the ack-stall watch, the stalled-offsets
 * watch (offsets.stall.threshold.ms), the delivery failure and the counts.
 *
 * The life of a change in it: pipeline_emit encodes an event, produces its
 * records and registers each in the tracker, only the last one carrying the
 * event's position; pipeline_pass records a position without a record (a
 * filtered event, a no-op). The sink reports deliveries to the pipeline's
 * callback (latency and dead-letter flag as arguments); the tracker hands
 * out the newest position whose records, and every earlier record, are
 * acknowledged; pipeline_service keeps that position and commits it when
 * the flush interval has passed; pipeline_finish flushes and commits once
 * more. A record that failed is never acknowledged, so no committed offset
 * ever passes it: a restart resumes at or before the first unacknowledged
 * change; records may be produced twice, none is lost.
 *
 * The commit step (pipeline_commit) is the one place where "the records up
 * to here, and the offset that covers them" become durable together. Today
 * the records are durable already (Kafka acknowledged them: the tracker only
 * hands out such positions) and the step stores the offset. A transactional
 * (exactly-once) sink plugs in there: the records produced since the last
 * commit belong to an open Kafka transaction (begun at the first produce
 * after a commit), and the step produces the offset record into that same
 * transaction and commits it; the offset counts as stored only when the
 * transaction committed, and an aborted transaction takes both back.
 *
 * Lifecycle: pipeline_new (state only, no I/O) once per task;
 * pipeline_open / pipeline_drop around each run of the task (a delivery
 * failure drops the producer, tracker, store and encoder and the task opens
 * them again from the stored offsets, as a restart would); the counts, the
 * failure streak and the watches live across them; pipeline_close frees all.
 *
 * Thread: the owning capture task's, except the stop flag (another thread
 * sets it; read with atomic_load).
 */
#ifndef MCDC_PIPELINE_PIPELINE_H
#define MCDC_PIPELINE_PIPELINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "config/config.h"
#include "encode/encode.h"
#include "event/event.h"
#include "offsets/offsets.h"

struct metrics_task;
struct pipeline;

/* What a pipeline call asks of its caller. */
enum pipeline_status {
    PIPELINE_OK = 0,  /* go on */
    PIPELINE_STOPPED, /* the stop flag was set while waiting */
    PIPELINE_RETRY,   /* a record failed and may pass on a second try: restart from
                         the stored offsets (pipeline_drop, then pipeline_open) */
    PIPELINE_FATAL,   /* the error says why; retrying cannot help */
};

struct pipeline_options {
    const struct mcdc_config *cfg; /* borrowed; outlives the pipeline */
    const atomic_bool *stop;       /* borrowed, may be NULL: ends waits (backpressure, pauses) */
    /* borrowed, may be NULL: how far the task has read (the stalled-offsets
     * watch compares the stored position with it) */
    const struct mcdc_position *read_pos;
    /* may be NULL: called with every new committable position (acknowledged,
     * not yet stored; borrowed for the call), e.g. the order gate's watermark */
    void (*acked)(void *ctx, const struct mcdc_position *pos);
    void *ctx; /* for acked */
};

/* A pipeline in state only (nothing opened); o copied. Never NULL. */
struct pipeline *pipeline_new(const struct pipeline_options *o);

/*
 * Opens the encoder, the in-flight tracker, the sink and the offset store.
 * name: the task's name (replica set) for the producer's client.id and for
 * messages, copied. partition: the offsets partition's rs (NULL: the
 * {server_id} partition), copied. m: the task's metrics slot (borrowed, may
 * be NULL). False with err (as encoder_new, sink_new, offset_store_open) and
 * nothing open; the pipeline must not be open already.
 */
bool pipeline_open(struct pipeline *p, const char *name, const char *partition,
                   struct metrics_task *m, struct mcdc_error *err);

/* True between pipeline_open and pipeline_drop. */
bool pipeline_is_open(const struct pipeline *p);

/*
 * Drops the producer (its queued records go with it, never waited for), the
 * tracker, the store and the encoder, and forgets the delivery failure and
 * the position waiting for the timer: the next pipeline_open starts again
 * from the stored offsets. Counts, the failure streak and the watches stay.
 * Nothing happens when not open.
 */
void pipeline_drop(struct pipeline *p);

/* Drops (no flush) and frees everything. NULL ok. */
void pipeline_close(struct pipeline *p);

/* The open pipeline's encoder and offset store (borrowed; valid until
 * pipeline_drop). The store is for loading the stored position and for the
 * saves a task makes before anything is produced. */
struct encoder *pipeline_encoder(struct pipeline *p);
struct offset_store *pipeline_store(struct pipeline *p);

/*
 * Encodes ev and produces its records, each registered in the tracker; the
 * last carries pos (borrowed; the position reached once they are all
 * acknowledged; NULL: none). An event without records passes pos. An event
 * that cannot be encoded goes to pipeline_event_failed. With a dead-letter
 * topic, each record names the namespace and _id for a dead-letter copy's
 * metadata. PIPELINE_OK, PIPELINE_STOPPED or PIPELINE_FATAL with err.
 */
enum pipeline_status pipeline_emit(struct pipeline *p, const struct mcdc_event *ev,
                                   const struct mcdc_position *pos, struct mcdc_error *err);

/*
 * An event that cannot be encoded (cause says why), per
 * event.processing.failure.handling.mode (Debezium's
 * EventProcessingFailureHandlingMode): fail = PIPELINE_FATAL with err naming
 * the namespace, _id and the setting; warn (WARN) / skip, ignore (INFO) =
 * logged with the namespace, _id and reason, counted, and pos (borrowed;
 * NULL: no move) passed; PIPELINE_OK.
 */
enum pipeline_status pipeline_event_failed(struct pipeline *p, const struct mcdc_event *ev,
                                           const struct mcdc_position *pos,
                                           const struct mcdc_error *cause, struct mcdc_error *err);

/*
 * Produces recs (taking their buffers; released in every case), each
 * registered in the tracker; only the last carries pos (NULL: none; no
 * record: pos is passed). A topic not known yet is waited for (a WARN every
 * 10 s), never dropped. what names the records' source in errors.
 * PIPELINE_OK, PIPELINE_STOPPED, or PIPELINE_FATAL with err (a record that
 * can never be delivered: too large, a fatal producer); with exactly-once
 * also PIPELINE_RETRY (the broker timed the transaction out: restart) and
 * the fenced message of pipeline_txn_failed.
 */
enum pipeline_status pipeline_produce(struct pipeline *p, struct mcdc_records *recs,
                                      const struct mcdc_position *pos, const char *what,
                                      struct mcdc_error *err);

/* A position reached without a record (pos borrowed): committable once
 * every record before it is acknowledged. */
void pipeline_pass(struct pipeline *p, const struct mcdc_position *pos);

/* Serves delivery reports without waiting. Nothing when not open. */
void pipeline_poll(struct pipeline *p);

/* Waits up to offsets.flush.timeout.ms for every produced record to be
 * reported; false with err (retriable) on timeout. True when not open. */
bool pipeline_flush(struct pipeline *p, struct mcdc_error *err);

/* Sleeps ms (monotonic) in steps of 100 ms, serving delivery reports when
 * open; false as soon as the stop flag is set. */
bool pipeline_pause_ms(struct pipeline *p, int64_t ms);

/*
 * Serves delivery reports, watches acknowledgements and the stored
 * position, takes the newest committable position (given to the acked
 * hook) and, when offsets.flush.interval.ms has passed since the last
 * commit (or force_commit, or a record failed), runs pipeline_commit.
 * Returns PIPELINE_OK; PIPELINE_RETRY with err after a failed delivery that
 * a restart from the stored offsets may pass (counted in the failure
 * streak); PIPELINE_FATAL with err for a record too large, a closed pipe,
 * a fatal producer or a store failure.
 */
enum pipeline_status pipeline_service(struct pipeline *p, bool force_commit,
                                      struct mcdc_error *err);

/*
 * The commit step: makes the acknowledged records and the offset that
 * covers them durable as one operation (see the top of this header for
 * where a transaction begins and commits). Stores the newest committable
 * position when it moved; a position older than the stored one is refused
 * by the store (logged at ERROR there) and capture goes on. PIPELINE_OK, or
 * PIPELINE_FATAL with err when the store fails.
 */
enum pipeline_status pipeline_commit(struct pipeline *p, struct mcdc_error *err);

/*
 * At the end of a run: waits up to offsets.flush.timeout.ms for every record
 * to be acknowledged (a WARN when not), then services with a forced commit.
 * *unacked: records still unacknowledged after it. Returns what the final
 * pipeline_service returned. Nothing (PIPELINE_OK, 0) when not open.
 */
enum pipeline_status pipeline_finish(struct pipeline *p, size_t *unacked, struct mcdc_error *err);

/*
 * Exactly-once (exactly.once.support, pipeline_txn.c): with
 * transaction.boundary poll, the source has nothing more ready (the end of a
 * batch): the next pipeline_service commits the open transaction. Nothing
 * otherwise. NULL ok.
 */
void pipeline_batch_end(struct pipeline *p);
/* transaction.boundary interval: how long a transaction stays open, ms:
 * transaction.boundary.interval.ms, or with -1 offsets.flush.interval.ms
 * capped at half of kafka.transaction.timeout.ms. */
int64_t pipeline_txn_interval_ms(const struct mcdc_config *cfg);
/* True when this run delivers exactly-once (transactions in use). */
bool pipeline_exactly_once(const struct pipeline *p);
/* This run's transactional.id, NULL without exactly-once. */
const char *pipeline_transactional_id(const struct pipeline *p);

/* Read accessors. */
size_t pipeline_in_flight(const struct pipeline *p);       /* produced, not reported (sink) */
size_t pipeline_pending(const struct pipeline *p);         /* registered in the tracker, not
                                                              yet committable */
uint64_t pipeline_records(const struct pipeline *p);       /* records produced */
uint64_t pipeline_failed_events(const struct pipeline *p); /* unencodable, moved past */
uint64_t pipeline_dead_lettered(const struct pipeline *p); /* acked as dead-letter copies */
/* Delivery failures in a row with the stored position unmoved (the streak
 * connect.max.attempts bounds). */
int64_t pipeline_failure_streak(const struct pipeline *p);
/* True once pipeline_service returned PIPELINE_RETRY, until pipeline_drop:
 * the task must restart from the stored offsets. */
bool pipeline_must_restart(const struct pipeline *p);
/* JSON of the last position stored by this pipeline (NULL: none), borrowed
 * until the next commit. */
const char *pipeline_stored_json(const struct pipeline *p);
/* Seconds (epoch) of the last stored position's cluster time, 0 none. */
int64_t pipeline_stored_sec(const struct pipeline *p);

/* Writes ev's document _id as relaxed extended JSON (`{"_id": ...}`, the
 * project's writer, encode/ejson.h) to out (size bytes, cut to fit); leaves
 * out untouched when ev has none. */
void pipeline_event_id(const struct mcdc_event *ev, char *out, size_t size);

/* True for a record over message.max.bytes (retrying cannot help). */
bool pipeline_too_large(const struct mcdc_error *err);

#endif
