/*
 * preflight internals shared by preflight.c (server, oplog, images, Kafka),
 * access.c (privileges) and offsets.c (stored offsets).
 */
#ifndef MCDC_PREFLIGHT_INTERNAL_H
#define MCDC_PREFLIGHT_INTERNAL_H

#include <mongoc/mongoc.h>
#include <stdbool.h>
#include <stdio.h>

#include "config/config.h"
#include "snapshot/snapshot.h"

/* One run's output and the failed checks' names. */
struct pf {
    FILE *out;
    int failed;
    char failures[512];
};

/* Prints "<verdict>  <check>: <detail>"; a FAIL counts and names check in
 * the verdict line. */
void pf_say(struct pf *p, const char *verdict, const char *check, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * The access checks of one replica set (client c borrowed): a change stream
 * as capture opens it, find on each collection of plan (may be NULL), find
 * and collStats on local.oplog.rs, listDatabases on the cluster, and, when
 * signal is true and signal.data.collection is set, insert and delete
 * there. A refusal with error 13 Unauthorized names the missing privilege
 * (action on resource), what in mongocdc needs it and a built-in role that
 * grants it (MongoDB manual, "Built-In Roles"; "Change Streams" > "Access
 * Control"). *oplog_readable tells whether local.oplog.rs can be read.
 */
void pf_check_access(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                     const struct snapshot_plan *plan, bool *oplog_readable, bool signal);

/* The Kafka checks (kafka.c): "kafka" and "offsets-topic" when the sink or
 * the offset store uses Kafka (SKIP otherwise), "kafka-signal" when
 * signal.enabled.channels has kafka. Verdicts through pf_say. */
void pf_check_kafka(struct pf *p, const struct mcdc_config *cfg);

/* Whether a server error is 13 Unauthorized (a missing privilege). */
bool pf_unauthorized(const bson_error_t *error);

/* The access checks of mongodb.connection.mode sharded, all through mongos
 * (c): the whole-cluster change stream, find on every collection of plan
 * (NULL: not listed), the signal collection write unless read.only. No
 * oplog: mongos has none. Verdicts through pf_say. */
void pf_check_access_merged(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                            const struct snapshot_plan *plan);

/*
 * mongodb.members.auto.discover false with several addresses
 * (topology/primary.h, the rule the capture tasks use): d->client is a
 * client on the primary found among hosts with directConnection=true,
 * connected with the credentials and options of cfg's connection string
 * (shard_params appended for a shard, may be NULL; rs checked against each
 * member's setName, may be NULL). Returns false with err naming what each
 * address answered (d left empty). Release with pf_direct_close(d).
 */
struct pf_direct {
    struct primary_finder *finder;
    mongoc_client_pool_t *pool; /* owned by finder */
    mongoc_client_t *client;    /* popped from pool */
};
bool pf_direct_open(const struct mcdc_config *cfg, const char *hosts, const char *rs,
                    const char *shard_params, struct pf_direct *d, struct mcdc_error *err);

/* Pushes d's client back and frees the finder; an empty d is a no-op. */
void pf_direct_close(struct pf_direct *d);

/*
 * The seed (uri, borrowed) with its addresses used as given: d->client on
 * the primary among them, as the replica set's capture task finds it, or
 * NULL when the rule does not apply or no address is a primary (a WARN
 * through p then; a seed of mongos routers has none and is checked as
 * usual by the caller).
 */
mongoc_client_t *pf_direct_seed(struct pf *p, const struct mcdc_config *cfg,
                                const mongoc_uri_t *uri, struct pf_direct *d);

/*
 * The offsets check (offsets.c). pf_check_offsets: the task of replica set rs
 * (per_shard: a shard's task) and, when found, whether its time is inside
 * the oplog whose oldest entry is at oldest (epoch s; 0 unknown).
 * pf_check_offsets_merged: the merged stream's position (mongodb.connection.mode
 * sharded). Both look every partition form up under both connector names as
 * the daemon does, name the key and writer found, and, with no position,
 * name entries of another `name` or topic.prefix ("is `name` right?")
 * instead of a PASS: a FAIL when the entry shares the name or the prefix
 * (the start would snapshot past this source's position), else a WARN.
 */
void pf_check_offsets(struct pf *p, const struct mcdc_config *cfg, const char *rs, bool per_shard,
                      int64_t oldest);
void pf_check_offsets_merged(struct pf *p, const struct mcdc_config *cfg);

#endif
