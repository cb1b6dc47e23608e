/*
 * preflight: `mongocdc check`. See preflight.h for the checks and where each
 * requirement comes from.
 */
#include "preflight/preflight.h"
#include "preflight/preflight_internal.h"

#include <errno.h>
#include <mongoc/mongoc.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/hello.h"
#include "capture/oplog.h"
#include "capture/resume.h"
#include "common/error.h"
#include "encode/encode.h"
#include "offsets/offsets.h"
#include "snapshot/snapshot.h"
#include "topology/primary.h"
#include "topology/shards.h"

void pf_say(struct pf *p, const char *verdict, const char *check, const char *fmt, ...)
{
    va_list ap;

    fprintf(p->out, "%-4s  %s: ", verdict, check);
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    if (strcmp(verdict, "FAIL") == 0) {
        size_t n = strlen(p->failures);
        if (strstr(p->failures, check) == NULL)
            snprintf(p->failures + n, sizeof p->failures - n, "%s%s", n ? ", " : "", check);
        p->failed++;
    }
}

static bool command(mongoc_client_t *c, const char *db, const bson_t *cmd, bson_t *reply,
                    bson_error_t *error)
{
    return mongoc_client_command_simple(c, db, cmd, NULL, reply, error);
}

/* ---- mongodb: version and topology ---- */

static bool check_server(struct pf *p, mongoc_client_t *c, int *major, int *minor, char *rs,
                         size_t rs_cap, enum mcdc_server_kind *kind)
{
    bson_t cmd = BSON_INITIALIZER, first;
    bson_error_t error, first_error;
    bson_iter_t it;
    struct mcdc_hello h;
    char version[64] = "unknown";
    bool ok, first_ok;

    BSON_APPEND_INT32(&cmd, "buildInfo", 1);
    first_ok = command(c, "admin", &cmd, &first, &error);
    if (first_ok && bson_iter_init_find(&it, &first, "version") && BSON_ITER_HOLDS_UTF8(&it))
        snprintf(version, sizeof version, "%s", bson_iter_utf8(&it, NULL));
    bson_destroy(&first);
    if (!first_ok)
        first_error = error; /* the hello right after only says "No servers yet eligible
                              * for rescan": libmongoc's cooldown after a failed scan */
    bson_destroy(&cmd);
    *major = *minor = 0;
    sscanf(version, "%d.%d", major, minor);
    ok = mcdc_hello_run(c, 0, &h, &error);
    if (!ok) {
        char hosts[256] = "";
        for (const mongoc_host_list_t *hl = mongoc_uri_get_hosts(mongoc_client_get_uri(c));
             hl != NULL; hl = hl->next) {
            size_t n = strlen(hosts), add = strlen(hl->host_and_port) + (n ? 1 : 0);
            if (n + add >= sizeof hosts)
                break; /* the hosts that fit are named */
            if (n)
                hosts[n++] = ',';
            memcpy(hosts + n, hl->host_and_port, strlen(hl->host_and_port) + 1);
        }
        pf_say(p, "FAIL", "mongodb", "cannot connect or authenticate to %s: %s",
               hosts[0] ? hosts : "the configured hosts",
               first_ok ? error.message : first_error.message);
        mcdc_hello_destroy(&h);
        return false;
    }
    *kind = h.kind;
    if (h.kind == MCDC_SERVER_CONFIG_SERVER) {
        pf_say(p, "PASS", "mongodb",
               "MongoDB %s, config server replica set %s (sharded cluster): every shard is "
               "checked below",
               version, h.set_name);
    } else if (h.kind == MCDC_SERVER_REPLICA_SET) {
        snprintf(rs, rs_cap, "%s", h.set_name);
        if (*major > 0 && (*major < 3 || (*major == 3 && *minor < 6)))
            pf_say(p, "FAIL", "mongodb",
                   "MongoDB %s, replica set %s: change streams need 3.6 or later", version,
                   h.set_name);
        else
            pf_say(p, "PASS", "mongodb", "MongoDB %s, replica set %s", version, h.set_name);
    } else if (h.kind == MCDC_SERVER_MONGOS) {
        pf_say(p, "PASS", "mongodb",
               "MongoDB %s through mongos (sharded cluster): every shard is checked below",
               version);
    } else {
        pf_say(p, "FAIL", "mongodb",
               "MongoDB %s standalone: no oplog and so no change streams; run it as a replica set",
               version);
    }
    mcdc_hello_destroy(&h);
    return true;
}

/* ---- oplog ---- */

/* ts seconds of the oldest or newest oplog entry (capture/oplog.h); 0 unknown. */
static int64_t oplog_edge_sec(mongoc_client_t *c, bool newest)
{
    struct resume_failure fail;
    struct mcdc_error err = MCDC_ERROR_INIT;
    uint32_t sec = 0, ord = 0;
    return oplog_edge(c, newest, &sec, &ord, &fail, &err) ? (int64_t)sec : 0;
}

static int64_t reply_int(const bson_t *reply, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, reply, key) && BSON_ITER_HOLDS_NUMBER(&it)
               ? bson_iter_as_int64(&it)
               : -1;
}

static void check_oplog(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                        int64_t *oldest)
{
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_error_t error;
    int64_t newest, size = -1, max = -1, span, flush_s = cfg->offsets_flush_interval_ms / 1000;

    *oldest = oplog_edge_sec(c, false);
    newest = oplog_edge_sec(c, true);
    if (*oldest == 0 || newest == 0) {
        pf_say(p, "SKIP", "oplog", "local.oplog.rs cannot be read: window unknown");
        return;
    }
    BSON_APPEND_UTF8(&cmd, "collStats", "oplog.rs");
    if (command(c, "local", &cmd, &reply, &error)) {
        size = reply_int(&reply, "size");
        max = reply_int(&reply, "maxSize");
    }
    bson_destroy(&reply);
    bson_destroy(&cmd);
    span = newest - *oldest;
    if (size < 0 || max <= 0 || size < max * 9 / 10) {
        pf_say(p, "PASS", "oplog", "spans %lld s so far and is not full (%lld of %lld bytes)",
               (long long)span, (long long)size, (long long)max);
    } else if (span <= flush_s * 2) {
        pf_say(p, "FAIL", "oplog",
               "the full oplog spans only %lld s; offsets.flush.interval.ms is %lld ms: a stored "
               "position can fall off before the next one is written. Grow the oplog "
               "(replSetResizeOplog) to hold hours of writes",
               (long long)span, (long long)cfg->offsets_flush_interval_ms);
    } else {
        pf_say(p, span < 3600 ? "WARN" : "PASS", "oplog",
               "the full oplog spans %lld s (%lld bytes): that is how long mongocdc may be down "
               "before it must re-snapshot",
               (long long)span, (long long)max);
    }
}

/* ---- pre-images ---- */

static bool images_enabled(mongoc_client_t *c, const char *db, const char *coll)
{
    mongoc_database_t *d = mongoc_client_get_database(c, db);
    bson_t opts = BSON_INITIALIZER, filter;
    mongoc_cursor_t *cur;
    const bson_t *info;
    bson_iter_t it;
    bool on = false;

    BSON_APPEND_DOCUMENT_BEGIN(&opts, "filter", &filter);
    BSON_APPEND_UTF8(&filter, "name", coll);
    bson_append_document_end(&opts, &filter);
    cur = mongoc_database_find_collections_with_opts(d, &opts);
    while (mongoc_cursor_next(cur, &info))
        if (bson_iter_init(&it, info) &&
            bson_iter_find_descendant(&it, "options.changeStreamPreAndPostImages.enabled", &it) &&
            BSON_ITER_HOLDS_BOOL(&it))
            on = bson_iter_bool(&it);
    mongoc_cursor_destroy(cur);
    mongoc_database_destroy(d);
    bson_destroy(&opts);
    return on;
}

static void check_images(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                         const struct snapshot_plan *plan, int major)
{
    bool need = cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_WITH_PRE_IMAGE ||
                cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL_WITH_PRE_IMAGE ||
                ((cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL ||
                  cfg->capture_mode == MCDC_CAPTURE_CHANGE_STREAMS_UPDATE_FULL_WITH_PRE_IMAGE) &&
                 cfg->full_update_type == MCDC_FULL_UPDATE_POST_IMAGE);
    size_t off = 0;

    if (!need) {
        pf_say(p, "SKIP", "pre-images", "capture.mode does not use pre- or post-images");
        return;
    }
    if (major > 0 && major < 6) {
        pf_say(p, "FAIL", "pre-images", "pre- and post-images need MongoDB 6.0 or later");
        return;
    }
    for (size_t i = 0; plan != NULL && i < plan->count; i++) {
        if (images_enabled(c, plan->colls[i].db, plan->colls[i].coll))
            continue;
        if (off++ < 5)
            pf_say(p, "FAIL", "pre-images",
                   "%s.%s has changeStreamPreAndPostImages off; enable it: db.runCommand({collMod: "
                   "\"%s\", changeStreamPreAndPostImages: {enabled: true}})",
                   plan->colls[i].db, plan->colls[i].coll, plan->colls[i].coll);
    }
    if (off == 0)
        pf_say(p, "PASS", "pre-images", "enabled on all %zu captured collections",
               plan != NULL ? plan->count : 0);
    else if (off > 5)
        pf_say(p, "FAIL", "pre-images", "off on %zu captured collections in all", off);
}

/* ---- a replica set, or each shard ---- */

/* The checks of one replica set (the configured one, or a shard's): captured
 * collections, access, oplog, images, stored offsets of partition rs.
 * signal: also try writing the signal collection (not on a shard directly:
 * writes to a sharded cluster go through mongos). */
static void check_replica_set(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                              const char *rs, int major, bool signal)
{
    struct snapshot_plan *plan = NULL;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(cfg, &err);
    struct resume_failure fail;
    int64_t oldest = 0;
    bool oplog_readable = false;

    if (enc == NULL || !snapshot_plan(c, cfg, enc, &plan, &fail, &err)) {
        if (strstr(err.msg, "not authorized on ") != NULL) {
            const char *on = strstr(err.msg, "not authorized on ");
            const char *cut = strstr(on, " to execute command");
            pf_say(p, "FAIL", "access",
                   "missing privilege listCollections on a database listDatabases shows, which "
                   "the snapshot and the collection filters need to list %s's collections: "
                   "grant read on each captured database, or readAnyDatabase (server: %.*s)",
                   rs, cut != NULL ? (int)(cut - on) : (int)strlen(on), on);
        } else {
            pf_say(p, "FAIL", "access", "cannot list the captured collections of %s: %s", rs,
                   err.msg);
        }
    } else
        pf_say(p, "PASS", "collections", "%s: %zu collections captured now", rs, plan->count);
    pf_check_access(p, c, cfg, plan, &oplog_readable, signal);
    if (oplog_readable)
        check_oplog(p, c, cfg, &oldest);
    else
        pf_say(p, "SKIP", "oplog", "local.oplog.rs of %s cannot be read", rs);
    check_images(p, c, cfg, plan, major);
    /* signal false: a shard of a sharded cluster (see above) */
    pf_check_offsets(p, cfg, rs, !signal, oldest);
    snapshot_plan_free(plan);
    encoder_destroy(enc);
}

/* A sharded cluster: config.shards through the seed, then each shard's
 * replica set on the connection string its capture task would use
 * (topology/shards.h; debezium-format.md §6.2). */
static void check_shards(struct pf *p, const mongoc_uri_t *uri, const struct mcdc_config *cfg)
{
    mongoc_client_pool_t *pool = mongoc_client_pool_new(uri);
    struct shard_list shards = {0};
    struct mcdc_error err = MCDC_ERROR_INIT;
    bool read = pool != NULL && shards_read(pool, &shards, &err);

    if (pool != NULL && !read && err.domain == MCDC_ERR_MONGO && err.code == 13) {
        pf_say(p, "FAIL", "shards",
               "missing privilege find on config.shards, which finding the shards of the "
               "cluster needs (each one gets its capture task): grant the role clusterMonitor "
               "(readAnyDatabase leaves config out)");
        shard_list_clear(&shards);
        mongoc_client_pool_destroy(pool);
        return;
    }
    if (!read) {
        pf_say(p, "FAIL", "shards", "cannot read config.shards: %s",
               pool == NULL ? "cannot create a client pool" : err.msg);
        if (pool != NULL)
            mongoc_client_pool_destroy(pool);
        return;
    }
    pf_say(p, shards.count > 0 ? "PASS" : "FAIL", "shards", "%zu shards in config.shards",
           shards.count);
    for (size_t i = 0; i < shards.count; i++) {
        const struct shard_info *s = &shards.items[i];
        char *cs = shard_connection_string(cfg->connection_string, s, cfg->shard_params,
                                           cfg->members_auto_discover, &err);
        bson_error_t error = {0};
        struct pf_direct direct = {0};
        bool as_given = cs != NULL && primary_as_given(cfg, s->hosts);
        mongoc_uri_t *su = cs != NULL && !as_given ? mongoc_uri_new_with_error(cs, &error) : NULL;
        mongoc_client_t *sc = su != NULL ? mongoc_client_new_from_uri_with_error(su, &error) : NULL;
        enum mcdc_server_kind kind = MCDC_SERVER_STANDALONE;
        int major = 0, minor = 0;
        char rs[128] = "";

        if (as_given && pf_direct_open(cfg, s->hosts, s->rs, cfg->shard_params, &direct, &err))
            sc = direct.client;
        if (sc == NULL) {
            pf_say(p, "FAIL", "shards", "shard %s: cannot build its connection: %s", s->name,
                   cs == NULL || as_given ? err.msg : error.message);
        } else if (check_server(p, sc, &major, &minor, rs, sizeof rs, &kind) &&
                   kind == MCDC_SERVER_REPLICA_SET) {
            check_replica_set(p, sc, cfg, s->rs, major, false);
        }
        if (direct.client != NULL)
            pf_direct_close(&direct);
        else if (sc != NULL)
            mongoc_client_destroy(sc);
        mongoc_uri_destroy(su);
        free(cs);
    }
    shard_list_clear(&shards);
    mongoc_client_pool_destroy(pool);
}

/* mongodb.connection.mode sharded: the daemon streams through mongos alone
 * and never connects to a shard, so only mongos is checked (collections,
 * change stream and find through it) and the merged stream's offsets
 * partition; mongos has no oplog to read (no oplog checks). */
static void check_merged(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                         int major)
{
    struct snapshot_plan *plan = NULL;
    struct mcdc_error err = MCDC_ERROR_INIT;
    struct encoder *enc = encoder_new(cfg, &err);
    struct resume_failure fail;

    pf_say(p, "PASS", "topology", "mongodb.connection.mode sharded: one change stream through "
        "mongos; shards are not connected to");
    if (enc == NULL || !snapshot_plan(c, cfg, enc, &plan, &fail, &err))
        pf_say(p, "FAIL", "access", "cannot list the captured collections through mongos: %s",
            err.msg);
    else
        pf_say(p, "PASS", "collections", "%zu collections captured now", plan->count);
    pf_check_access_merged(p, c, cfg, plan);
    check_images(p, c, cfg, plan, major);
    pf_check_offsets_merged(p, cfg);
    snapshot_plan_free(plan);
    encoder_destroy(enc);
}

/* ---- all ---- */

int preflight_run(const struct mcdc_config *cfg, FILE *out)
{
    struct pf p = {.out = out};
    bson_error_t error;
    mongoc_uri_t *uri = mongoc_uri_new_with_error(cfg->connection_string, &error);
    mongoc_client_t *c = NULL;
    enum mcdc_server_kind kind = MCDC_SERVER_STANDALONE;
    int major = 0, minor = 0;
    char rs[128] = "";
    struct pf_direct direct = {0};

    if (uri != NULL)
        c = pf_direct_seed(&p, cfg, uri, &direct);
    if (uri != NULL && c == NULL) {
        if (!mongoc_uri_has_option(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
            mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                           (int32_t)cfg->server_selection_timeout_ms);
        c = mongoc_client_new_from_uri_with_error(uri, &error);
    }
    if (c == NULL) {
        pf_say(&p, "FAIL", "mongodb", "mongodb.connection.string: %s", error.message);
    } else if (check_server(&p, c, &major, &minor, rs, sizeof rs, &kind)) {
        if (kind == MCDC_SERVER_REPLICA_SET)
            check_replica_set(&p, c, cfg, rs, major, true);
        else if (kind == MCDC_SERVER_MONGOS && cfg->connection_mode == MCDC_CONNECTION_SHARDED)
            check_merged(&p, c, cfg, major);
        else if (kind == MCDC_SERVER_CONFIG_SERVER || kind == MCDC_SERVER_MONGOS)
            check_shards(&p, uri, cfg);
    }
    pf_check_kafka(&p, cfg);
    if (p.failed == 0)
        fprintf(out, "OK: every check passed\n");
    else
        fprintf(out, "FAILED: %d check(s) failed: %s\n", p.failed, p.failures);
    if (direct.client != NULL)
        pf_direct_close(&direct);
    else if (c != NULL)
        mongoc_client_destroy(c);
    mongoc_uri_destroy(uri);
    return p.failed == 0 ? MCDC_EXIT_OK : MCDC_EXIT_FAILURE;
}
