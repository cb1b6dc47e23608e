/*
 * preflight/access: does the configured user hold the privileges mongocdc
 * needs? Checked by doing what the daemon does (the server decides, whatever
 * roles or custom privileges grant it) and, on 13 Unauthorized, saying which
 * privilege on which resource is missing, what needs it and a built-in role
 * that grants it:
 *
 *   changeStream + find on every database   change streams: mongocdc opens
 *       (resource {db: "", collection: ""}) one stream on the whole
 *                                           deployment and filters
 *                                           (readAnyDatabase)
 *   find on each captured collection        the initial snapshot, updateLookup
 *                                           (read on the database)
 *   find on local.oplog.rs                  capture.mode oplog; the oplog
 *                                           headroom metric and its WARN
 *                                           (read on local)
 *   collStats on local.oplog.rs             knowing the oplog is full
 *                                           (clusterMonitor or read on local)
 *   listDatabases on the cluster            seeing every database (without
 *                                           it listDatabases answers only the
 *                                           databases the user has privileges
 *                                           on; readAnyDatabase, clusterMonitor)
 *   insert + remove on the signal           incremental snapshots write their
 *       collection                          window markers there (readWrite)
 */
#include <stdarg.h>
#include <string.h>

#include "preflight/preflight_internal.h"
#include "signals/signals.h"

bool pf_unauthorized(const bson_error_t *error)
{
    return error->code == 13 &&
           (error->domain == MONGOC_ERROR_SERVER || error->domain == MONGOC_ERROR_QUERY ||
            error->domain == MONGOC_ERROR_COLLECTION || error->domain == MONGOC_ERROR_COMMAND);
}

/* The server's "not authorized on <db> to execute command { <whole command> }"
 * shortened to its first words (the command itself is long and carries the
 * session id). */
static void server_said(const bson_error_t *error, char *buf, size_t n)
{
    const char *cut = strstr(error->message, " to execute command");
    size_t len = cut != NULL ? (size_t)(cut - error->message) : strlen(error->message);

    if (n == 0)
        return;
    if (len >= n) /* cut to fit */
        len = n - 1;
    memcpy(buf, error->message, len);
    buf[len] = '\0';
}

/* find {} limit 1 on db.coll; false with error when refused. */
static bool can_find(mongoc_client_t *c, const char *db, const char *coll, bson_error_t *error)
{
    mongoc_collection_t *col = mongoc_client_get_collection(c, db, coll);
    bson_t filter = BSON_INITIALIZER, opts = BSON_INITIALIZER;
    const bson_t *doc;
    mongoc_cursor_t *cur;
    bool ok;

    BSON_APPEND_INT64(&opts, "limit", 1);
    cur = mongoc_collection_find_with_opts(col, &filter, &opts, NULL);
    (void)mongoc_cursor_next(cur, &doc);
    ok = !mongoc_cursor_error(cur, error);
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(col);
    bson_destroy(&filter);
    bson_destroy(&opts);
    return ok;
}

/* Opens a change stream on the whole deployment, as capture does. */
static bool can_watch(mongoc_client_t *c, bson_error_t *error)
{
    bson_t pipeline = BSON_INITIALIZER, opts = BSON_INITIALIZER;
    const bson_t *doc;
    mongoc_change_stream_t *cs;
    bool ok;

    BSON_APPEND_INT64(&opts, "maxAwaitTimeMS", 100);
    cs = mongoc_client_watch(c, &pipeline, &opts);
    (void)mongoc_change_stream_next(cs, &doc);
    ok = !mongoc_change_stream_error_document(cs, error, NULL);
    mongoc_change_stream_destroy(cs);
    bson_destroy(&pipeline);
    bson_destroy(&opts);
    return ok;
}

/* One command on db; false with error when refused. */
static bool run(mongoc_client_t *c, const char *db, const bson_t *cmd, bson_error_t *error)
{
    bson_t reply;
    bool ok = mongoc_client_command_simple(c, db, cmd, NULL, &reply, error);
    bson_destroy(&reply);
    return ok;
}

static void check_stream(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg)
{
    bool oplog_mode = cfg->capture_mode == MCDC_CAPTURE_OPLOG;
    bson_error_t error;
    char said[160];

    if (can_watch(c, &error)) {
        pf_say(p, "PASS", "access", "change stream opened");
        return;
    }
    if (!pf_unauthorized(&error)) {
        pf_say(p, oplog_mode ? "WARN" : "FAIL", "access", "cannot open a change stream: %s",
               error.message);
        return;
    }
    server_said(&error, said, sizeof said);
    pf_say(p, oplog_mode ? "WARN" : "FAIL", "access",
           "missing privilege changeStream and find on every database (resource {db: \"\", "
           "collection: \"\"}), which %s: grant the role readAnyDatabase (server: %s)",
           oplog_mode ? "change streams would need (capture.mode oplog does not)"
                      : "the change stream needs (mongocdc watches the whole deployment and "
                        "filters)",
           said);
}

static void check_collections(struct pf *p, mongoc_client_t *c, const struct snapshot_plan *plan)
{
    bson_error_t error;
    size_t refused = 0;
    char said[160];

    for (size_t i = 0; plan != NULL && i < plan->count; i++) {
        const char *db = plan->colls[i].db, *coll = plan->colls[i].coll;
        if (can_find(c, db, coll, &error))
            continue;
        if (refused++ >= 5)
            continue;
        if (pf_unauthorized(&error)) {
            server_said(&error, said, sizeof said);
            pf_say(p, "FAIL", "access",
                   "missing privilege find on %s.%s, which the snapshot and updateLookup need: "
                   "grant the role read on %s (server: %s)",
                   db, coll, db, said);
        } else {
            pf_say(p, "FAIL", "access", "find on %s.%s failed: %s", db, coll, error.message);
        }
    }
    if (plan != NULL && refused == 0)
        pf_say(p, "PASS", "access", "find allowed on all %zu captured collections", plan->count);
    else if (refused > 5)
        pf_say(p, "FAIL", "access", "find refused on %zu captured collections in all", refused);
}

static void check_local(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                        bool *oplog_readable)
{
    bool oplog_mode = cfg->capture_mode == MCDC_CAPTURE_OPLOG;
    bson_t cmd = BSON_INITIALIZER;
    bson_error_t error;
    char said[160];

    *oplog_readable = can_find(c, "local", "oplog.rs", &error);
    if (*oplog_readable) {
        pf_say(p, "PASS", "access", "find on local.oplog.rs allowed");
    } else if (pf_unauthorized(&error)) {
        server_said(&error, said, sizeof said);
        pf_say(p, oplog_mode ? "FAIL" : "WARN", "access",
               "missing privilege find on local.oplog.rs, which %s: grant the role read on "
               "local (readAnyDatabase leaves local out) (server: %s)",
               oplog_mode ? "capture.mode oplog needs (it tails the oplog)"
                          : "the oplog headroom metric, its WARN and the oplog check need",
               said);
    } else {
        pf_say(p, oplog_mode ? "FAIL" : "WARN", "access", "find on local.oplog.rs failed: %s (%s)",
               error.message,
               oplog_mode ? "capture.mode oplog reads it"
                          : "the oplog headroom metric and its WARN need it");
    }
    BSON_APPEND_UTF8(&cmd, "collStats", "oplog.rs");
    if (!run(c, "local", &cmd, &error) && pf_unauthorized(&error))
        pf_say(p, "WARN", "access",
               "missing privilege collStats on local.oplog.rs, which telling a full oplog from "
               "a young one needs (the oplog check and the headroom WARN then assume full): "
               "grant clusterMonitor or read on local");
    bson_destroy(&cmd);
    bson_init(&cmd);
    /* authorizedDatabases false: refused (13) exactly when the user lacks the
     * listDatabases action, instead of a silently shorter list. */
    BSON_APPEND_INT32(&cmd, "listDatabases", 1);
    BSON_APPEND_BOOL(&cmd, "nameOnly", true);
    BSON_APPEND_BOOL(&cmd, "authorizedDatabases", false);
    if (!run(c, "admin", &cmd, &error) && pf_unauthorized(&error))
        pf_say(p, "WARN", "access",
               "missing privilege listDatabases on the cluster: listDatabases then answers only "
               "the databases the user holds privileges on, so the snapshot and the collection "
               "filters see only those: grant readAnyDatabase or clusterMonitor");
    bson_destroy(&cmd);
}

/* insert + delete of a marker document: what incremental snapshots do with
 * their window markers (debezium-format.md §5.3-5.4). */
static void check_signal(struct pf *p, mongoc_client_t *c, const char *ns)
{
    char db[256], said[160];
    const char *dot = strchr(ns, '.');
    mongoc_collection_t *col;
    bson_t doc = BSON_INITIALIZER;
    bson_error_t error;

    if (dot == NULL || (size_t)(dot - ns) >= sizeof db) {
        pf_say(p, "FAIL", "access", "signal.data.collection '%s' is not <database>.<collection>",
               ns);
        return;
    }
    snprintf(db, sizeof db, "%.*s", (int)(dot - ns), ns);
    col = mongoc_client_get_collection(c, db, dot + 1);
    /* daemons capturing this collection skip this _id silently */
    BSON_APPEND_UTF8(&doc, "_id", MCDC_CHECK_PROBE_ID);
    BSON_APPEND_UTF8(&doc, "type", MCDC_CHECK_PROBE_ID);
    if (!mongoc_collection_insert_one(col, &doc, NULL, NULL, &error)) {
        if (pf_unauthorized(&error)) {
            server_said(&error, said, sizeof said);
            pf_say(p, "FAIL", "access",
                   "missing privilege insert on %s, which signal.data.collection needs "
                   "(incremental snapshots write their window markers there): grant the role "
                   "readWrite on %s (server: %s)",
                   ns, db, said);
        } else {
            pf_say(p, "FAIL", "access", "cannot write signal.data.collection %s: %s", ns,
                   error.message);
        }
    } else if (!mongoc_collection_delete_one(col, &doc, NULL, NULL, &error)) {
        pf_say(p, "WARN", "access",
               "insert on signal.data.collection %s allowed, delete refused (%s): "
               "incremental.snapshot.watermarking.strategy insert_delete needs the privilege "
               "remove; the check's document {_id: \"mongocdc-check\"} stays there",
               ns, pf_unauthorized(&error) ? "missing privilege remove" : error.message);
    } else {
        pf_say(p, "PASS", "access", "insert and delete on signal.data.collection %s allowed", ns);
    }
    mongoc_collection_destroy(col);
    bson_destroy(&doc);
}

void pf_check_access(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                     const struct snapshot_plan *plan, bool *oplog_readable, bool signal)
{
    check_stream(p, c, cfg);
    check_collections(p, c, plan);
    check_local(p, c, cfg, oplog_readable);
    if (signal && cfg->read_only)
        pf_say(p, "PASS", "access", "read.only: no write to the source is made or checked");
    else if (signal && cfg->signal_data_collection != NULL &&
             cfg->signal_data_collection[0] != '\0')
        check_signal(p, c, cfg->signal_data_collection);
}

void pf_check_access_merged(struct pf *p, mongoc_client_t *c, const struct mcdc_config *cfg,
                            const struct snapshot_plan *plan)
{
    check_stream(p, c, cfg);
    if (plan != NULL)
        check_collections(p, c, plan);
    if (cfg->read_only)
        pf_say(p, "PASS", "access", "read.only: no write to the source is made or checked");
    else if (cfg->signal_data_collection != NULL && cfg->signal_data_collection[0] != '\0')
        check_signal(p, c, cfg->signal_data_collection);
}
