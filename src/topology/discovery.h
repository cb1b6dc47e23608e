/*
 * topology/discovery: the poll of config.shards every mongodb.poll.interval.ms
 * (debezium-format.md §6.1: Debezium 1.x re-runs discovery on this interval)
 * on a thread of its own, so that an unreachable config server or mongos
 * never holds up the main loop (SIGTERM, metrics, health). Each successful
 * read is handed to the main loop through an ev_async; starting and stopping
 * tasks stays on the main thread (topology.c). Failed reads are logged here:
 * a WARN with how long discovery has failed (at the first failure, then
 * every DISCOVERY_WARN_MS while it goes on failing), an INFO when it works
 * again.
 *
 * Bound on a stop: the thread reads through its own pool whose single
 * server selection, connect and socket timeouts are at most
 * DISCOVERY_IO_TIMEOUT_MS, so discovery_destroy() waits for an in-flight
 * read at most about twice that, never the configured
 * serverSelectionTimeoutMS. A short bound rather than a detached thread: a
 * detached read would still use the pool and the loop after they are freed.
 *
 * Thread: discovery_start/take/request_stop/destroy on the main thread.
 */
#ifndef MCDC_TOPOLOGY_DISCOVERY_H
#define MCDC_TOPOLOGY_DISCOVERY_H

#include <stdbool.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "common/error.h"
#include "config/config.h"
#include "topology/shards.h"

struct ev_loop;
struct discovery;

/* The interval between WARNs while discovery goes on failing (ms). */
#define DISCOVERY_WARN_MS 30000
/* The longest selection, connect or socket wait of one poll read (ms). */
#define DISCOVERY_IO_TIMEOUT_MS 2000

/* Main thread: a new config.shards list is ready (call discovery_take()). */
typedef void (*discovery_ready_fn)(void *ctx);

/*
 * Starts polling config.shards through a pool of its own on a copy of
 * seed_uri (borrowed; the seed's options, the timeouts capped as above),
 * every cfg->poll_interval_ms_topology ms (cfg borrowed, outlives it);
 * ready(ctx) runs on loop's thread after each successful read. Returns NULL
 * with err when the pool or the thread cannot be created.
 */
struct discovery *discovery_start(const struct mcdc_config *cfg, const mongoc_uri_t *seed_uri,
                                  struct ev_loop *loop, discovery_ready_fn ready, void *ctx,
                                  struct mcdc_error *err);

/* Main thread: moves the latest list into out (overwritten; caller clears
 * it). False when none is waiting. */
bool discovery_take(struct discovery *d, struct shard_list *out);

/* Asks the thread to stop (non-blocking). NULL is a no-op. */
void discovery_request_stop(struct discovery *d);

/* Stops and joins the thread (bounded, see above) and frees d. NULL: no-op. */
void discovery_destroy(struct discovery *d);

#endif
