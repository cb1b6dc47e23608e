/*
 * topology/seed: opening a pool on a connection string with the configured
 * timeouts, and probing what the seed is with `hello` (design.md §2,
 * mongo-sim-spec.md §2.2, §6.1). Any thread; no state.
 */
#ifndef MCDC_TOPOLOGY_SEED_H
#define MCDC_TOPOLOGY_SEED_H

#include <stdbool.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "capture/hello.h"
#include "common/error.h"
#include "config/config.h"

/* What `hello` says the seed is (mongo-sim-spec.md §2.2, §6.1). */
enum seed_kind {
    /* what hello says (capture/hello.h) */
    SEED_REPLICA_SET = MCDC_SERVER_REPLICA_SET,
    SEED_CONFIG_SERVER = MCDC_SERVER_CONFIG_SERVER,
    SEED_MONGOS = MCDC_SERVER_MONGOS,
    SEED_STANDALONE = MCDC_SERVER_STANDALONE,
};

/*
 * One hello through pool. Returns true when the deployment answered: *kind
 * says what it is and *rs is the replica-set name (malloc'd, caller frees)
 * for the replica-set kinds. Returns false with err when it did not answer.
 */
bool seed_probe(mongoc_client_pool_t *pool, enum seed_kind *kind, char **rs,
                struct mcdc_error *err);

/*
 * Parses uri_text and opens a pool on it with cfg's timeouts (URI options
 * win; the selection timeout the URI carries is at most
 * WORKER_SELECTION_SLICE_MS). *uri_out and *pool_out are owned by the caller
 * (either may be set when false is returned: free what is not NULL);
 * *selection_ms gets the overall selection budget (ms). Returns false with
 * err (redacted) on a bad URI.
 */
bool seed_open_pool(const struct mcdc_config *cfg, const char *uri_text, mongoc_uri_t **uri_out,
                    mongoc_client_pool_t **pool_out, int64_t *selection_ms,
                    struct mcdc_error *err);

/* The socket timeout of a sharded cluster's seed pool when
 * mongodb.socket.timeout.ms (or the URI) sets none (ms). */
#define SEED_SOCKET_TIMEOUT_MS 5000

/*
 * Replaces *pool (destroyed) with a pool on *uri whose socketTimeoutMS is
 * socket_timeout_ms unless the URI sets one above 0 already, and whose
 * connectTimeoutMS is at most socket_timeout_ms (libmongoc's server monitor
 * reads with it, and destroying a pool joins the monitor); *uri is
 * updated in place (still owned by the caller). Returns false with err when
 * the new pool cannot be created (then *pool is NULL).
 */
bool seed_reopen_bounded(mongoc_uri_t **uri, mongoc_client_pool_t **pool,
                         int32_t socket_timeout_ms, struct mcdc_error *err);

#endif
