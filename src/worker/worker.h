/*
 * worker: one capture task, the thread of one replica set (design.md §3,
 * style.md §4.7, §4.9). The only module that wires capture -> encode -> sink
 * -> offsets.
 *
 * The thread discovers its replica set with `hello` (the set name becomes the
 * thread name and the log component), loads the stored position, runs the
 * initial snapshot when snapshot.mode asks for one, then streams. Transient
 * failures reconnect with exponential backoff (connect.backoff.*, at most
 * connect.max.attempts in a row) and resume from the last delivered position;
 * history lost follows snapshot.mode; everything else stops the task with an
 * error. On stop it flushes the producer and writes the final offsets.
 *
 * Thread: worker_start/request_stop/join/destroy from the main thread; the
 * rest of the task runs on its own thread.
 */
#ifndef MCDC_WORKER_WORKER_H
#define MCDC_WORKER_WORKER_H

#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "common/error.h"
#include "config/config.h"
#include "offsets/offsets.h"

struct worker;

/*
 * Supplies, at the start of each initial snapshot (after its start position
 * is recorded, before any collection is read), the documents this task's
 * replica set owns: out (initialised, empty) gets one member per collection,
 * key "<db>.<coll>", value a find filter that the snapshot ANDs with the
 * collection's own filter. Collections not named are read whole. Called on
 * the task's thread. Returns false with err to make the snapshot retry
 * (with backoff). Used for shards, whose primaries also hold orphans
 * (topology/chunks.h).
 */
typedef bool (*worker_snapshot_filters_fn)(void *ctx, bson_t *out, struct mcdc_error *err);

/*
 * The per-document order gate across shards (topology/gate.h), as callbacks
 * so that the worker does not depend on topology. All on the task's thread.
 *   check:   for a change event (db/coll NUL-terminated, documentKey, cluster
 *            time as a BSON timestamp value), the cluster time the donor
 *            shard's task must have acknowledged first, or 0; *donor gets an
 *            opaque donor handle (it may stand for several tasks) and
 *            *donor_name the shard(s) it names, for logs ("shard01",
 *            "every other shard").
 *   passed:  true once donor has acknowledged everything up to need (or
 *            has ended); never blocks.
 *   publish: this task's acknowledged watermark (BSON timestamp value): its
 *            committed position, and the stored one it starts from; 0
 *            once its server first answers (until then other tasks do not
 *            wait for it: topology/gate.h).
 *   ended:   this task will produce nothing more.
 */
struct worker_order_gate {
    void *ctx;
    uint64_t (*check)(void *ctx, const char *db, const char *coll, const bson_t *document_key,
                      uint64_t ts, void **donor, const char **donor_name);
    bool (*passed)(void *ctx, void *donor, uint64_t need);
    void (*publish)(void *ctx, uint64_t ts);
    void (*ended)(void *ctx);
    /* the task's stored offsets are loaded (and published when there are
     * any): until then the other tasks wait for it (topology/gate.h) */
    void (*loaded)(void *ctx);
    /* event.key.mode document_key (may be NULL): the shard key pattern of
     * db.coll (config.collections `key`) appended to out (initialised,
     * empty), left empty for an unsharded collection; false with err when
     * the read fails. Lets snapshot records carry the key a change stream's
     * documentKey gives (mongo-sim-spec.md §3.8). */
    bool (*shard_key)(void *ctx, const char *db, const char *coll, bson_t *out,
                      struct mcdc_error *err);
};

/*
 * A pool that follows the primary among fixed addresses
 * (mongodb.members.auto.discover false, topology/primary.h), instead of a
 * pool the driver's discovery keeps on the primary. find (task thread):
 * the pool to use, connected to the primary, and its address (both owned by
 * ctx; the previous pool may be destroyed, so the task pushes back its
 * client first); false with err when no address is primary (retriable: the
 * task backs off and calls find again; *pool is still one to use) or, with
 * *pool NULL, when no pool can be opened (fatal). lost (task thread): true
 * when client's server is no longer primary; the streaming loop asks it
 * between batches and the task reconnects through find.
 */
struct worker_primary {
    void *ctx;
    bool (*find)(void *ctx, mongoc_client_pool_t **pool, const char **address,
                 struct mcdc_error *err);
    bool (*lost)(void *ctx, mongoc_client_t *client);
};

/* Called on the worker's thread once, just before it ends (e.g. ev_async_send). */
typedef void (*worker_exit_cb)(struct worker *w, void *ctx);

struct signal_bus;
struct notifier;

/*
 * What a task starts with (worker_start, worker_start_merged). Everything
 * borrowed must outlive the worker; gate and primary are copied.
 *   cfg:        the configuration (borrowed).
 *   pool:       the pool the task pops its client from (borrowed; ignored,
 *               may be NULL, with primary).
 *   expected_rs: the replica-set name topology already knows, or NULL to
 *               discover it (messages before discovery use the URI's
 *               replicaSet).
 *   per_shard:  the task reads one shard of a sharded cluster: its offsets
 *               stay in the per-replica-set partition {rs, server_id}
 *               whatever the layout (offsets_layout_partition).
 *   selection_timeout_ms: the overall server-selection budget of one
 *               connection attempt (mongodb.server.selection.timeout.ms, or
 *               the URI's serverSelectionTimeoutMS; <= 0: the config's). The
 *               pool's URI carries only a slice of it
 *               (WORKER_SELECTION_SLICE_MS), so a stop is never held up by
 *               an unreachable server.
 *   start_at:   a BSON timestamp value or -1. Set and nothing stored: no
 *               snapshot, streaming from that cluster time (inclusive), that
 *               position stored first; a stored offset older than it is
 *               passed over the same way. How a shard added to a running
 *               cluster is read from the moment it joined (`topologyTime`,
 *               mongo-sim-spec.md §6.5 item 6): it holds only migrated
 *               documents, which are not changes.
 *   snapshot_filters, filters_ctx: see worker_snapshot_filters_fn (NULL:
 *               collections are read whole).
 *   gate:       orders a document's events across shards (NULL: none).
 *   primary:    the task gets its pool from primary->find before connecting
 *               and after every backoff (NULL: pool as given).
 *   bus:        the daemon's signal bus (signals/signals.h; NULL: the task
 *               handles the signals of its own stream only). The task
 *               subscribes under its replica-set name and drains its queue
 *               between events; source-channel signals it sees in its stream
 *               are published on it, so every shard's task gets them.
 *   notifier:   the daemon's notifier (signals/notify.h; NULL: no
 *               notification is sent).
 *   on_exit, ctx: called on the task's thread once, just before it ends.
 */
struct worker_options {
    const struct mcdc_config *cfg;
    mongoc_client_pool_t *pool;
    const char *expected_rs;
    bool per_shard;
    int64_t selection_timeout_ms;
    int64_t start_at;
    worker_snapshot_filters_fn snapshot_filters;
    void *filters_ctx;
    const struct worker_order_gate *gate;
    const struct worker_primary *primary;
    struct signal_bus *bus;
    struct notifier *notifier;
    worker_exit_cb on_exit;
    void *ctx;
};

/*
 * Starts a replica set's (or one shard's) task as opt says (opt borrowed for
 * the call). Returns NULL and fills err if the thread cannot start.
 */
struct worker *worker_start(const struct worker_options *opt, struct mcdc_error *err);

/*
 * mongodb.connection.mode sharded: one change stream through mongos for the
 * whole cluster (Debezium 2.5+ and 3.x, debezium-format.md §6.2/§6.3).
 *   name:      the task's name in logs, metrics and source.rs ("cluster",
 *              Debezium 2.2-2.5's ConnectionStrings.CLUSTER_RS_NAME).
 *   rs_partition: true: offsets under {server_id, rs: name} (2.2-2.5, the
 *              1.9 dialect); false: {server_id} (2.6+, the 3.x dialect).
 *   start:     used when nothing is stored under that partition (may be NULL):
 *              the position to stream from, stored at once before anything
 *              else, without a snapshot (the oldest shard position of a
 *              switch from per-shard offsets, §4.4); borrowed, copied.
 */
struct worker_merged {
    const char *name;
    bool rs_partition;
    const struct mcdc_position *start;
};

/*
 * Starts the merged task on opt->pool (a mongos) as worker_start() does for
 * a replica set, with no discovery (mongos answers hello without a set
 * name), no snapshot filters (reads through mongos never return orphans),
 * no order gate (mongos merges the shards' events by cluster time) and no
 * start_at or primary: those members of opt are ignored. Returns NULL and
 * fills err if the thread cannot start.
 */
struct worker *worker_start_merged(const struct worker_options *opt,
                                   const struct worker_merged *merged, struct mcdc_error *err);

/* The longest single blocking server selection (ms); see worker_start(). */
#define WORKER_SELECTION_SLICE_MS 1000

/* Asks the task to stop (any thread; non-blocking). */
void worker_request_stop(struct worker *w);

/*
 * Asks the task of a shard removed from the cluster to drain (any thread;
 * non-blocking): it reads, on its own thread and connection, the replica
 * set's last write (`hello` lastWrite.opTime.ts, else the reply's
 * operationTime), goes on streaming until its position has reached that
 * time with every record acknowledged, then stops as on
 * worker_request_stop() and writes its final offsets. Why the task reads
 * the time itself: the shard may be unreachable, and a read on the main
 * loop would block it; once removeShard has completed nothing the cluster
 * writes lands on the shard, so its last write bounds its tail
 * (mongo-sim-spec.md §6.2). Unreachable while draining: the normal reconnect
 * budget, then the task fails with an ERROR naming the shard and the
 * position it could not read past. worker_drained(): true once it drained.
 */
void worker_request_drain(struct worker *w);
bool worker_drained(struct worker *w);

/* True once the task's thread has finished its work (any thread). */
bool worker_finished(struct worker *w);

/* True if the task finished with an error (valid once worker_finished()). */
bool worker_failed(struct worker *w);

/* The replica-set name: discovered, else the one the connection string names
 * (replicaSet=), else "capture". Borrowed; read it once the task finished. */
const char *worker_name(struct worker *w);

/*
 * Joins the thread. Returns MCDC_EXIT_OK when the task ended cleanly (stop
 * requested, or initial_only done), MCDC_EXIT_FAILURE otherwise; *err (if not
 * NULL) gets the task's error.
 */
int worker_join(struct worker *w, struct mcdc_error *err);

/* Frees the worker (after worker_join). NULL is a no-op. */
void worker_destroy(struct worker *w);

#endif
