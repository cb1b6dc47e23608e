/*
 * topology internals shared by topology.c (probing the seed, the task list,
 * the replica-set and merged tasks, stop and join) and topology_shards.c (the
 * per-shard tasks of a sharded cluster and their discovery). Main thread
 * unless a function says otherwise. Not a public contract.
 */
#ifndef MCDC_TOPOLOGY_TOPOLOGY_INTERNAL_H
#define MCDC_TOPOLOGY_TOPOLOGY_INTERNAL_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "common/error.h"
#include "config/config.h"
#include "topology/topology.h"
#include "worker/worker.h"

/* Shards the order gate can follow (tasks of shards added while running count too). */
#define GATE_MAX_SHARDS 1024

/* What a shard's task asks for at each snapshot start: its owned chunks. */
struct owned_source {
    mongoc_client_pool_t *seed; /* the topology's seed pool (thread-safe pop/push); borrowed */
    char *shard;
    bson_t *first;    /* the map read at daemon start for every shard at once (a pointer:
                         bson_t's 128-byte alignment is more than xcalloc gives) */
    bool first_used;  /* later snapshots (a restart of the snapshot) read afresh */
};

/* One capture task: a replica set (or shard) with its own pool. */
struct task {
    char *name;            /* shard name, or NULL for a replica-set seed */
    mongoc_uri_t *uri;     /* owned */
    mongoc_client_pool_t *pool; /* owned; outlives the worker */
    struct worker *w;
    struct owned_source *owned; /* shards only; freed after the worker */
    struct primary_finder *finder; /* addresses used as given; the worker's pools; or NULL */
    bool removed; /* the shard left config.shards: its task was asked to drain */
};

struct topology {
    const struct mcdc_config *cfg;
    struct ev_loop *loop;
    struct signal_bus *bus;    /* handed to every task (worker_options) */
    struct notifier *notifier; /* handed to every task (worker_options) */
    ev_async notice;
    bool notice_started;
    struct task *tasks;
    size_t ntasks;
    bool stopping;
    /* Sharded cluster (per-shard tasks): the seed's pool (chunk maps, the
     * order gate); config.shards is polled by discovery (topology/discovery.h). */
    struct task seed;
    struct discovery *disc;
    struct gate_registry *gate; /* per-document order across shards */
    bool failed_start; /* a shard added while running could not get a task */
    bool drain_failed; /* a removed shard's task ended before its tail was read */
};

/* Appends a zeroed task to t and returns it (the array may move: earlier
 * task pointers are invalidated). */
struct task *topology_task_add(struct topology *t);

/* worker_exit_cb of every task (task thread): wakes the main loop. ctx is the
 * topology. */
void topology_task_ended(struct worker *w, void *ctx);

/* mongodb.members.auto.discover false with several addresses: gives task a
 * primary finder over hosts (topology/primary.h), owned by the task; fills
 * prim for worker_start() and returns it. */
const struct worker_primary *topology_use_finder(struct topology *t, struct task *task,
                                                 const char *hosts, const char *rs,
                                                 const char *shard_params,
                                                 struct worker_primary *prim);

/* The per-shard tasks of a sharded cluster at start (t->seed and t->gate
 * set): config.shards through the seed's pool, one task per shard, then
 * discovery of shards coming and going. Returns false with err when a step
 * fails; the tasks already started are left in t for the caller to stop. */
bool topology_start_shard_tasks(struct topology *t, struct mcdc_error *err);

#endif
