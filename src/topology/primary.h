/*
 * topology/primary: mongodb.members.auto.discover false with several
 * addresses (debezium-format.md §6.1, Debezium 1.x: "whether the address(es)
 * should be used as is ... fronted by a proxy"). Behind NAT or in containers
 * the member names a replica set reports in `hello` do not resolve here, so
 * the driver's own discovery (SDAM, which replaces the seeds with those
 * names) connects to nothing. The finder talks only to the given addresses:
 * it probes each with directConnection=true (`hello`: isWritablePrimary,
 * setName checked), owns a pool connected directly to the one that is
 * primary, and finds the primary again among the same addresses when asked
 * (a capture task asks after a stepdown or a failure, before reconnecting).
 *
 * Thread: created and destroyed on the main thread; find/lost/address are
 * called by the one capture task that uses it (never concurrently).
 */
#ifndef MCDC_TOPOLOGY_PRIMARY_H
#define MCDC_TOPOLOGY_PRIMARY_H

#include <stdbool.h>

#include <mongoc/mongoc.h>

#include "common/error.h"
#include "config/config.h"
#include "worker/worker.h"

struct primary_finder;

/*
 * Opens a pool on uri_text with the task's timeouts (the topology's own
 * pool settings). Returns false with err on a URI the driver refuses. Called
 * on the capture task's thread.
 */
typedef bool (*primary_open_fn)(void *ctx, const char *uri_text, mongoc_client_pool_t **pool,
                                struct mcdc_error *err);

/*
 * The rule for "use the addresses as given": true when cfg's
 * mongodb.members.auto.discover is false and hosts (a "h1:p1,h2:p2" list)
 * has more than one address. A single address needs no finder: it gets
 * directConnection=true (shard_connection_string()). The capture tasks and
 * `mongocdc check` both decide with this function.
 */
bool primary_as_given(const struct mcdc_config *cfg, const char *hosts);

/*
 * The host list of a mongodb:// connection string as "h1:p1,h2:p2",
 * malloc'd (caller frees), or NULL for a mongodb+srv:// string (its hosts
 * come from DNS: nothing to use as given) or an unparsable one.
 */
char *primary_uri_hosts(const char *uri_text);

/*
 * A finder over hosts ("h1:p1,h2:p2", copied). configured is the connection
 * string whose credentials, TLS and options every direct connection carries
 * (copied; see shard_connection_string()); shard_params is appended as for
 * a shard (may be NULL). rs is the replica-set name a member must report
 * (copied; NULL accepts the first set seen, then sticks to it). open and
 * open_ctx (borrowed, must outlive the finder) open the pools. Never NULL.
 */
struct primary_finder *primary_finder_new(const char *configured, const char *hosts, const char *rs,
                                          const char *shard_params, primary_open_fn open,
                                          void *open_ctx);

/*
 * Frees the finder and the pool it owns; every client popped from that pool
 * must have been pushed back. NULL is a no-op.
 */
void primary_finder_destroy(struct primary_finder *pf);

/*
 * Finds the primary: probes the address in use first, then the others in
 * their order. On success *pool is a pool connected directly to the primary
 * (owned by the finder, valid until the next call or destroy; a pool given
 * out before is destroyed when the primary moved, so the caller must have
 * pushed back all its clients before calling) and true is returned. When no
 * address is a writable primary of the set: false with err (retriable,
 * naming each address and what it answered) and *pool is the pool in use
 * (or, on the first call, one on the first address), so the caller always
 * has a pool to retry on. A URI the driver refuses: false with a CONFIG err
 * and *pool NULL.
 */
bool primary_finder_find(struct primary_finder *pf, mongoc_client_pool_t **pool,
                         struct mcdc_error *err);

/* "host:port" of the address the pool is connected to ("" before the first find). */
const char *primary_finder_address(const struct primary_finder *pf);

/*
 * True when the driver's monitor last saw client's server (a client of the
 * finder's pool) as anything but a primary (a stepdown, or unreachable):
 * the caller should find the primary again. Reads the driver's topology
 * description only (no I/O); the monitor refreshes it every
 * heartbeatFrequencyMS and at once when the server says its state changed
 * (awaitable hello, MongoDB 4.4+).
 */
bool primary_finder_lost(const struct primary_finder *pf, mongoc_client_t *client);

/* Fills out with pf's find (primary_finder_find + primary_finder_address)
 * and lost, the hooks a capture task calls (worker_start()). */
void primary_finder_hooks(struct primary_finder *pf, struct worker_primary *out);

#endif
