/*
 * topology: decides which replica sets to capture and runs one capture task
 * (worker thread) per replica set (design.md §2). Lives on the main thread.
 *
 * From a replica-set connection string: one task. From a sharded cluster
 * (mongos or config servers): one task per shard from config.shards, tasks
 * started/stopped as shards come and go, or one merged stream through mongos
 * when mongodb.connection.mode is `sharded` (topology/merged.h).
 *
 * Thread: main. Workers report "stopped" / "failed" through an ev_async on
 * the loop given to topology_start().
 */
#ifndef MCDC_TOPOLOGY_TOPOLOGY_H
#define MCDC_TOPOLOGY_TOPOLOGY_H

#include <stdbool.h>

#include "common/error.h"
#include "config/config.h"

struct ev_loop;
struct topology;

/*
 * Discovers the deployment behind cfg->connection_string and starts its
 * capture tasks. cfg is borrowed and must outlive the topology. loop is the
 * main libev loop. bus and notifier (borrowed, may be NULL; they must outlive
 * every task) are handed to each task (worker_options). The caller has
 * called mongoc_init(). Returns NULL and fills err when the deployment cannot be
 * used (e.g. a standalone server: no oplog) or discovery fails after the
 * configured retries.
 */
struct signal_bus;
struct notifier;
struct topology *topology_start(const struct mcdc_config *cfg, struct ev_loop *loop,
                                struct signal_bus *bus, struct notifier *notifier,
                                struct mcdc_error *err);

/*
 * Asks every task to stop (non-blocking): each leaves its loop within
 * cursor.max.await.time.ms, flushes its producer and writes final offsets.
 * When the last task has ended the topology calls ev_break(loop) itself.
 */
void topology_request_stop(struct topology *topo);

/*
 * After the loop returns: joins every task and returns the process exit code
 * (MCDC_EXIT_OK if every task ended cleanly, MCDC_EXIT_FAILURE otherwise).
 */
int topology_join(struct topology *topo);

/* Frees the topology (after topology_join). NULL is a no-op. */
void topology_destroy(struct topology *topo);

#endif
