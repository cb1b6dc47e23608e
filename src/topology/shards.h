/*
 * topology/shards: the shards of a sharded cluster, read from config.shards
 * (debezium-format.md §6.1, mongo-sim-spec.md §6.2), and the connection
 * string of each shard's replica set built from the configured one
 * (debezium-format.md §6.2: one connection string per shard, with
 * mongodb.connection.string.shard.params appended).
 *
 * Thread: main (discovery); the functions keep no state.
 */
#ifndef MCDC_TOPOLOGY_SHARDS_H
#define MCDC_TOPOLOGY_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <mongoc/mongoc.h>

#include "common/error.h"

/* One config.shards document. */
struct shard_info {
    char *name;  /* `_id`: the shard name */
    char *rs;    /* replica-set name, the part of `host` before '/' */
    char *hosts; /* the seed list after '/': "h1:p1,h2:p2" */
    bool draining;
    int64_t topology_time; /* `topologyTime` (5.0+) as a BSON timestamp value (seconds in the
                              high 32 bits, increment low): when the shard joined; -1 if absent */
};

struct shard_list {
    struct shard_info *items;
    size_t count;
};

/*
 * Reads every document of config.shards through pool (a mongos or the config
 * server replica set), in `_id` order. out is overwritten (call
 * shard_list_clear() on it afterwards). Returns false and fills err (retriable
 * for network errors) when the read fails or a document has no usable `host`
 * ("<rs>/<host:port>[,...]"; a bare host list without the replica-set part is
 * refused: mongocdc captures shards that are replica sets).
 */
bool shards_read(mongoc_client_pool_t *pool, struct shard_list *out, struct mcdc_error *err);

/* Frees what list owns and empties it. */
void shard_list_clear(struct shard_list *list);

/*
 * The connection string of shard s, malloc'd (caller frees): the configured
 * connection string `configured` with its host list replaced by s->hosts,
 * its replicaSet set to s->rs, and everything else (user info, database,
 * credentials, TLS and driver options) carried over; a mongodb+srv:// string
 * becomes mongodb:// with tls=true unless it says otherwise (SRV implies TLS)
 * and loses its SRV-only options. directConnection, loadBalanced and any
 * replicaSet of the configured string are dropped: they describe the seed,
 * not the shard. shard_params (mongodb.connection.string.shard.params, may be
 * NULL or empty; a leading '?' or '&' is ignored) is appended last, so it
 * wins over carried-over options. discover false
 * (mongodb.members.auto.discover: false, debezium-format.md §6.1: the
 * addresses as given, for NAT and containers): a single address gets
 * directConnection=true instead of replicaSet, so the driver talks to it
 * alone and never to the member names the shard's hello reports; several
 * addresses keep replicaSet (a driver must find the primary among them, and
 * libmongoc then also learns the members hello lists). Returns NULL and
 * fills err when `configured` is not a mongodb:// or mongodb+srv:// string.
 */
char *shard_connection_string(const char *configured, const struct shard_info *s,
                              const char *shard_params, bool discover, struct mcdc_error *err);

#endif
