/*
 * capture/resume: the pure decisions of a capture task, kept apart from I/O so
 * that they are unit-tested with tables (tests/unit/test_capture.c):
 *   - where a change stream starts from a stored position
 *     (debezium-format.md §4.3);
 *   - whether a snapshot runs first (snapshot.mode, §5.1);
 *   - what a failed change-stream or snapshot command means: retry with
 *     backoff, history lost, or fatal (mongo-sim-spec.md §4.2-4.3; Debezium's
 *     MongoDbErrorHandler, §6.1/§6.3);
 *   - the reconnect backoff delays (connect.backoff.*, §6.1).
 *
 * Thread: any (no state).
 */
#ifndef MCDC_CAPTURE_RESUME_H
#define MCDC_CAPTURE_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "event/position.h"

/* ---- start point (debezium-format.md §4.3) ---- */

enum resume_start_kind {
    RESUME_START_NOW = 0,     /* no position: the stream starts "now" */
    RESUME_START_AFTER_TOKEN, /* resumeAfter: the stored token (exclusive) */
    RESUME_START_AT_OPTIME,   /* startAtOperationTime: Timestamp(sec, ord) (inclusive) */
};

struct resume_start {
    enum resume_start_kind kind;
    const bson_t *token; /* RESUME_START_AFTER_TOKEN: borrowed from the position */
    uint32_t sec, ord;   /* RESUME_START_AT_OPTIME */
};

/*
 * Decides how to open the stream from pos (NULL = no stored position) and
 * capture.start.op.time (start_op_time, a 64-bit BSON timestamp value, -1 =
 * unset): the stored token wins (resumeAfter), else the stored sec/ord
 * (startAtOperationTime, sec >= 0 required), else start_op_time, else now.
 * Same order as Debezium HEAD's MongoDbStreamingChangeEventSource.initChangeStream.
 */
void resume_start_point(const struct mcdc_position *pos, int64_t start_op_time,
                        struct resume_start *out);

/* ---- snapshot decision (debezium-format.md §5.1) ---- */

enum resume_plan {
    RESUME_PLAN_STREAM = 0, /* stream from the stored position (or now) */
    RESUME_PLAN_SNAPSHOT_THEN_STREAM,
    RESUME_PLAN_SNAPSHOT_ONLY, /* initial_only without a complete offset */
    RESUME_PLAN_NOTHING,       /* initial_only whose snapshot already completed */
};

/*
 * What a task does at start-up given snapshot.mode and the stored position
 * (found false = none; pos->initsync = a snapshot was interrupted):
 *   initial, when_needed: snapshot when no offset or initsync; then stream.
 *   always: snapshot on every start; then stream.
 *   initial_only: snapshot when no offset or initsync, never stream.
 *   never, no_data: stream only. An interrupted snapshot (initsync) is not
 *     redone: *warn is set so the caller says that the copy is incomplete.
 * warn may be NULL.
 */
enum resume_plan resume_plan_start(enum mcdc_snapshot_mode mode, bool found,
                                   const struct mcdc_position *pos, bool *warn);

/*
 * What a task does when the stored position is no longer in the oplog
 * (history lost): true = re-snapshot and then stream from the new snapshot's
 * position (initial, when_needed, always: 1.x-2.5 behaviour, §5.1); false =
 * stop with an error telling the user what to do (never, no_data,
 * initial_only).
 */
bool resume_resnapshot_on_history_lost(enum mcdc_snapshot_mode mode);

/* ---- error classification (mongo-sim-spec.md §3.12, §4.2-4.5) ---- */

enum resume_action {
    RESUME_ACTION_RETRY = 0,    /* transient: reconnect with backoff, resume */
    RESUME_ACTION_HISTORY_LOST, /* the position fell off the oplog */
    RESUME_ACTION_FATAL,        /* retrying cannot help (auth, bad option, poison event) */
};

/* A failed command as libmongoc reports it (error API version 2). */
struct resume_failure {
    uint32_t domain;          /* bson_error_t.domain (MONGOC_ERROR_*) */
    uint32_t code;            /* bson_error_t.code: the server code in MONGOC_ERROR_SERVER */
    const char *message;      /* bson_error_t.message or the server's errmsg; may be NULL */
    bool label_resumable;     /* reply errorLabels has ResumableChangeStreamError */
    bool label_non_resumable; /* reply errorLabels has NonResumableChangeStreamError */
};

/*
 * Classifies f:
 *   - history lost: 286 ChangeStreamHistoryLost, 136 CappedPositionLost,
 *     40576 (pre-4.4 history lost), 40585 (pre-4.4 token not found), and 280
 *     ChangeStreamFatalError whose text says the resume point is no longer in
 *     the oplog or the resume token was not found (a wiped or re-created
 *     replica set: the stored position does not exist in this oplog);
 *   - fatal: authentication/authorization (13, 18, SASL/SCRAM), the other
 *     280 (e.g. _id modified), invalid resume token (260, 40647,
 *     9 on a token), standalone (40573), invalid namespace (73), unknown
 *     options (40415, 40324, 2), event too large (10334), a required image
 *     missing (47), command not found (59);
 *   - retry: everything else: network and server-selection errors, state
 *     change errors (not primary, recovering, shutting down), cursor not
 *     found, interrupted, and unknown server errors (Debezium 2.0+ treats
 *     any MongoException as retriable; the attempt bound stops a loop).
 */
enum resume_action resume_classify(const struct resume_failure *f);

/* Lowercase name of an action ("retry", "history lost", "fatal"). */
const char *resume_action_name(enum resume_action a);

/* ---- backoff (connect.backoff.*, debezium-format.md §6.1) ---- */

/*
 * Delay in ms before reconnect attempt number attempt (1-based):
 * initial_ms * 2^(attempt-1), capped at max_ms. Debezium's
 * DelayStrategy.exponential: 1, 2, 4, ... 64, 120, 120 s with the defaults.
 */
int64_t resume_backoff_ms(int64_t initial_ms, int64_t max_ms, int64_t attempt);

/* ---- tokens ---- */

/*
 * Reads the cluster time a resume token encodes, split into seconds and
 * increment: position_token_time (event/position.h, which says the layout).
 * Returns false when token has no string `_data` in that layout (e.g. BinData
 * tokens of MongoDB <= 4.0.6). For log messages and the history-lost range
 * only; the token itself stays opaque.
 */
bool resume_token_time(const bson_t *token, uint32_t *sec, uint32_t *ord);

/*
 * Writes a human description of pos ("Timestamp(1700000000, 1)", "resume
 * token 8265...(time ...)", "none") into buf of cap bytes. pos may be NULL.
 */
void resume_describe_position(const struct mcdc_position *pos, char *buf, size_t cap);

#endif
