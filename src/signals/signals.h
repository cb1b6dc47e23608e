/*
 * signals: Debezium signals (debezium-format.md §5.3) from every channel, and
 * the daemon-wide bus that hands each one to every capture task.
 *
 * Channels (signal.enabled.channels): `source` (inserts into
 * signal.data.collection, seen by a task in its own stream), `kafka`
 * (signal.kafka.topic, records keyed by topic.prefix), `file`
 * (signal.file, one JSON object per line). Every channel produces the same
 * id/type/data triple, parsed here, and publishes it on the bus; each task
 * drains its own queue between events. In a sharded cluster a signal seen on
 * one shard's stream reaches every shard's task the same way.
 *
 * Ownership: a struct mcdc_signal owns its strings and data; free it with
 * mcdc_signal_destroy(). The bus and its queues are thread-safe.
 */
#ifndef MCDC_SIGNALS_SIGNALS_H
#define MCDC_SIGNALS_SIGNALS_H

#include <bson/bson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

enum mcdc_signal_type {
    MCDC_SIGNAL_EXECUTE_SNAPSHOT, /* execute-snapshot */
    MCDC_SIGNAL_STOP_SNAPSHOT,    /* stop-snapshot */
    MCDC_SIGNAL_PAUSE_SNAPSHOT,   /* pause-snapshot */
    MCDC_SIGNAL_RESUME_SNAPSHOT,  /* resume-snapshot */
    MCDC_SIGNAL_LOG,              /* log */
    MCDC_SIGNAL_WINDOW_OPEN,      /* snapshot-window-open (internal marker) */
    MCDC_SIGNAL_WINDOW_CLOSE,     /* snapshot-window-close (internal marker) */
};

enum mcdc_signal_channel {
    MCDC_SIGNAL_CHANNEL_SOURCE,
    MCDC_SIGNAL_CHANNEL_KAFKA,
    MCDC_SIGNAL_CHANNEL_FILE,
};

struct mcdc_signal {
    char *id; /* 1st field, as Debezium's toString(): ObjectId as 24 hex */
    enum mcdc_signal_type type;
    bson_t data; /* 3rd field as a document (a JSON string parsed); empty if none */
    enum mcdc_signal_channel channel;
    char task[128]; /* the task (replica set / shard) that saw it; "" if not a stream */
};

/* One additional-conditions entry of execute-snapshot. */
struct mcdc_snapshot_condition {
    char *collection; /* data-collection: case-insensitive regex on db.coll */
    bson_t filter;    /* the MongoDB query document the JSON filter gave */
};

/* execute-snapshot / stop-snapshot data, checked. */
struct mcdc_snapshot_request {
    bool blocking;      /* "type": "blocking" (default incremental, case-insensitive) */
    char **collections; /* data-collections: regexes on db.coll; stop: 0 = all */
    size_t collection_count;
    struct mcdc_snapshot_condition *conditions;
    size_t condition_count;
};

/*
 * The _id of the document `mongocdc check` inserts into and deletes from
 * signal.data.collection to prove the privileges incremental snapshots
 * need (preflight/access.c). A daemon capturing that collection skips it
 * without a WARN: it is no signal (docs/OPERATIONS.md).
 */
#define MCDC_CHECK_PROBE_ID "mongocdc-check"

/*
 * Parses a signal document positionally (§5.3): exactly three fields, the
 * first the id, the second the type name, the third the data as a
 * sub-document or a JSON string. Returns true and fills *out (caller
 * destroys it), or false with err naming the id (when one was readable) and
 * the problem: not three fields, unknown type, data neither document nor
 * valid JSON. Never aborts on any input.
 */
bool mcdc_signal_parse_doc(const bson_t *doc, enum mcdc_signal_channel channel,
                           struct mcdc_signal *out, struct mcdc_error *err);

/*
 * Parses the kafka and file channels' JSON shape
 * {"id": "...", "type": "...", "data": {...}} (Debezium's KafkaSignalChannel
 * / FileSignalChannel). len bytes of json. Same contract as
 * mcdc_signal_parse_doc.
 */
bool mcdc_signal_parse_json(const char *json, size_t len, enum mcdc_signal_channel channel,
                            struct mcdc_signal *out, struct mcdc_error *err);

/*
 * The data of an execute-snapshot or stop-snapshot signal, checked:
 * data-collections a non-empty array of strings for execute-snapshot,
 * every regex compiling, additional-conditions' filters valid JSON
 * documents, surrogate-key refused. Returns true and fills *out (caller
 * destroys it) or false with err naming the signal id and the problem.
 */
bool mcdc_signal_snapshot_request(const struct mcdc_signal *sig, struct mcdc_snapshot_request *out,
                                  struct mcdc_error *err);

/* Frees what sig owns; sig stays a valid empty signal (destroying it again
 * is harmless). NULL is a no-op. */
void mcdc_signal_destroy(struct mcdc_signal *sig);
void mcdc_snapshot_request_destroy(struct mcdc_snapshot_request *req);

/* A deep copy of src into *dst (uninitialised on entry; destroy it). Never
 * copy a struct mcdc_signal by assignment: its bson_t may point into itself. */
void mcdc_signal_copy(const struct mcdc_signal *src, struct mcdc_signal *dst);

/*
 * The `log` signal (Debezium's signal action Log): writes data's "message"
 * at INFO with its first "{}" replaced by offset_json, the task's current
 * offset as JSON ("<none>" when offset_json is NULL, as Debezium prints for
 * no offset context); SLF4J fills one placeholder, so later "{}" stay. A log
 * signal with no or an empty message gets Debezium's WARN instead.
 */
void mcdc_signal_log(const struct mcdc_signal *sig, const char *offset_json);

/* The Debezium type name of t ("execute-snapshot", ...). Static string. */
const char *mcdc_signal_type_name(enum mcdc_signal_type t);

/* ---- the bus ------------------------------------------------------------ */

struct signal_bus;
struct signal_queue;

struct signal_bus *signal_bus_new(void);
void signal_bus_destroy(struct signal_bus *bus);

/* A queue for one task (name: the replica set or shard). Owned by the bus. */
struct signal_queue *signal_bus_subscribe(struct signal_bus *bus, const char *task);

/* Signals one queue holds before it refuses more. */
#define SIGNAL_QUEUE_MAX 1024

/* Copies sig into every subscribed queue. Thread-safe; never blocks on a
 * task: a full queue (SIGNAL_QUEUE_MAX waiting) refuses the signal for that
 * task with an ERROR naming the signal and the task, and counts it in
 * signal_queue_dropped(). Calls each queue's wake function, if set, with the
 * bus lock held (it must only nudge, e.g. ev_async_send). Returns false,
 * delivering nothing, once the bus is closed (or bus NULL): the caller then
 * keeps the signal where it came from (the kafka channel does not commit
 * it, the file channel writes it back, a source signal's position is not
 * passed), so the next run reads it again. */
bool signal_bus_publish(struct signal_bus *bus, const struct mcdc_signal *sig);

/* The daemon stops (SIGTERM/SIGINT): from now on signal_bus_publish
 * delivers nothing; what queues hold stays for the tasks' last drain
 * (their stop path). Thread-safe; idempotent. signal_bus_closed says so
 * (true for NULL). */
void signal_bus_close(struct signal_bus *bus);
bool signal_bus_closed(struct signal_bus *bus);

/* Moves the oldest signal of q into *out (caller destroys it); false when
 * empty. Never blocks. */
bool signal_queue_pop(struct signal_queue *q, struct mcdc_signal *out);

/* Sets a function called whenever a signal lands in q (NULL: none). */
void signal_queue_set_wake(struct signal_queue *q, void (*wake)(void *ctx), void *ctx);

/* Tasks subscribed to bus. The kafka and file channels read nothing while
 * it is 0, so a signal sent before the first task is up is not lost. */
size_t signal_bus_subscribers(struct signal_bus *bus);

/* Signals waiting in q; signals q refused because it was full. */
size_t signal_queue_pending(struct signal_queue *q);
uint64_t signal_queue_dropped(struct signal_queue *q);

/* The task name q was subscribed with. Borrowed. */
const char *signal_queue_task(const struct signal_queue *q);

/* ---- the kafka and file channels ------------------------------------- */

struct signal_channels;
struct mcdc_config;

/*
 * Starts the non-source channels of cfg's signal.enabled.channels on one
 * thread that publishes what they read on bus (both borrowed; they outlive
 * the channels):
 *  - kafka: partition 0 of signal.kafka.topic (default <topic.prefix>-signal)
 *    read by a consumer of group signal.kafka.groupId from the group's
 *    committed offset (earliest when it has none), as Debezium's
 *    KafkaSignalChannel; only records keyed topic.prefix are signals, the
 *    value their JSON shape. Each record's offset is committed once the
 *    signal is on the bus (Debezium auto-commits every 5 s, so a restart
 *    could run a signal twice). A broker that cannot be reached is WARNed
 *    about once per outage and retried; capture never waits for it.
 *  - file: signal.file read every signal.poll.interval.ms under an
 *    exclusive flock; complete lines are signals and are removed, a partial
 *    last line and lines appended meanwhile stay (Debezium's
 *    FileSignalChannel truncates, losing lines written during its read).
 * A malformed signal gets one WARN naming its id (or line) and the problem.
 * Returns NULL with err untouched when neither channel is enabled, NULL
 * with err filled when the consumer cannot be created.
 */
struct signal_channels *signal_channels_start(const struct mcdc_config *cfg, struct signal_bus *bus,
                                              struct mcdc_error *err);

/* Stops the thread (within one poll), commits, frees. NULL is a no-op. */
void signal_channels_stop(struct signal_channels *ch);

/*
 * The `mongocdc signal` command: argv[0] is "signal". Sends one signal
 * through the first channel of signal.enabled.channels that can carry it
 * (source: an insert into signal.data.collection; kafka: a record keyed
 * topic.prefix; file: a line appended to signal.file) and prints the id
 * used. Returns 0, 1 (failure, message on stderr) or 2 (usage).
 */
int signal_cli_main(int argc, char **argv);

#endif
