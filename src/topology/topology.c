/*
 * topology: the replica-set part of design.md §2. Probes the deployment with
 * `hello`, refuses what cannot be captured (a standalone server has no oplog,
 * hence no change streams; a mongos needs the sharded mode of a later
 * release), and runs one capture task per replica set. Tasks report their
 * end through an ev_async; when the last one has ended the loop is broken.
 */
#include "topology/topology.h"

#include <ev.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mongoc/mongoc.h>

#include "common/log.h"
#include "common/xalloc.h"
#include "worker/worker.h"

struct topology {
    const struct mcdc_config *cfg;
    struct ev_loop *loop;
    ev_async notice;
    mongoc_uri_t *uri;
    mongoc_client_pool_t *pool;
    struct worker **tasks;
    size_t ntasks;
    bool stopping;
};

/* Main thread: a task ended. Stop the others if it failed; break when all ended. */
static void on_notice(struct ev_loop *loop, ev_async *w, int revents)
{
    struct topology *t = w->data;
    size_t alive = 0;
    (void)revents;

    for (size_t i = 0; i < t->ntasks; i++) {
        if (!worker_finished(t->tasks[i])) {
            alive++;
        } else if (worker_failed(t->tasks[i]) && !t->stopping) {
            LOG_ERROR("capture task %s failed; stopping the other tasks", worker_name(t->tasks[i]));
            topology_request_stop(t);
        }
    }
    if (alive == 0)
        ev_break(loop, EVBREAK_ALL);
}

/* Task thread: wake the main loop (ev_async_send is thread-safe). */
static void task_ended(struct worker *w, void *ctx)
{
    struct topology *t = ctx;
    (void)w;
    ev_async_send(t->loop, &t->notice);
}

/*
 * One hello through the pool. Returns true when the deployment answered:
 * *rs is the replica-set name (malloc'd), or *refusal says why it cannot be
 * captured. Returns false with err when it did not answer.
 */
static bool probe(mongoc_client_pool_t *pool, char **rs, const char **refusal,
                  struct mcdc_error *err)
{
    mongoc_client_t *c = mongoc_client_pool_pop(pool);
    bson_t cmd = BSON_INITIALIZER, reply;
    bson_error_t error;
    bson_iter_t it;
    bool ok;

    *rs = NULL;
    *refusal = NULL;
    BSON_APPEND_INT32(&cmd, "hello", 1);
    ok = mongoc_client_command_simple(c, "admin", &cmd, NULL, &reply, &error);
    if (!ok) {
        mcdc_error_from_bson(err, error.code, error.message, true);
    } else if (bson_iter_init_find(&it, &reply, "setName") && BSON_ITER_HOLDS_UTF8(&it)) {
        *rs = xstrdup(bson_iter_utf8(&it, NULL));
    } else if (bson_iter_init_find(&it, &reply, "msg") && BSON_ITER_HOLDS_UTF8(&it) &&
               strcmp(bson_iter_utf8(&it, NULL), "isdbgrid") == 0) {
        *refusal = "mongodb.connection.string points at a mongos (sharded cluster); this build "
                   "captures replica sets: give the connection string of each shard's replica set";
    } else {
        *refusal = "mongodb.connection.string points at a standalone server: a standalone has no "
                   "oplog, so it has no change streams to capture. Run it as a replica set "
                   "(mongod --replSet rs0, then rs.initiate(); one member is enough) and connect "
                   "with ?replicaSet=rs0";
    }
    bson_destroy(&cmd);
    bson_destroy(&reply);
    mongoc_client_pool_push(pool, c);
    return ok;
}

/* Fills err with a connection-string error whose driver message may quote
 * parts of the URI: the text goes through the redactor first. */
static void set_redacted_error(struct mcdc_error *err, const struct mcdc_config *cfg, int code,
                               const char *redacted_uri, const char *message)
{
    char *why = config_redact_text(message, cfg->connection_string);
    mcdc_error_set(err, MCDC_ERR_CONFIG, code, "mongodb.connection.string %s: %s", redacted_uri,
                   why);
    free(why);
}

struct topology *topology_start(const struct mcdc_config *cfg, struct ev_loop *loop,
                                struct mcdc_error *err)
{
    struct topology *t;
    bson_error_t error;
    struct mcdc_error perr = MCDC_ERROR_INIT;
    char *rs = NULL;
    const char *refusal = NULL;
    char redacted[512];
    int64_t selection_ms;

    /* libmongoc is initialised by main, whose log handler (which redacts
     * secrets) receives the driver's logs. */
    config_redact_uri(cfg->connection_string, redacted, sizeof redacted);

    t = xcalloc(1, sizeof *t);
    t->cfg = cfg;
    t->loop = loop;
    t->uri = mongoc_uri_new_with_error(cfg->connection_string, &error);
    if (t->uri == NULL) {
        set_redacted_error(err, cfg, (int)error.code, redacted, error.message);
        goto fail;
    }
    if (mongoc_uri_get_appname(t->uri) == NULL)
        mongoc_uri_set_appname(t->uri, "mongocdc");
    /* The configured selection timeout is the budget of a whole connection
     * attempt; one blocking selection in libmongoc gets only a slice of it,
     * so a stop request is seen within a slice (worker_start()). */
    if (mongoc_uri_has_option(t->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
        selection_ms = mongoc_uri_get_option_as_int32(t->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                                      (int32_t)cfg->server_selection_timeout_ms);
    else
        selection_ms = cfg->server_selection_timeout_ms;
    mongoc_uri_set_option_as_int32(t->uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS,
                                   (int32_t)(selection_ms < WORKER_SELECTION_SLICE_MS
                                                 ? selection_ms
                                                 : WORKER_SELECTION_SLICE_MS));
    if (!mongoc_uri_has_option(t->uri, MONGOC_URI_CONNECTTIMEOUTMS))
        mongoc_uri_set_option_as_int32(t->uri, MONGOC_URI_CONNECTTIMEOUTMS,
                                       (int32_t)cfg->connect_timeout_ms);
    if (!mongoc_uri_has_option(t->uri, MONGOC_URI_HEARTBEATFREQUENCYMS))
        mongoc_uri_set_option_as_int32(t->uri, MONGOC_URI_HEARTBEATFREQUENCYMS,
                                       (int32_t)cfg->heartbeat_frequency_ms);
    if (cfg->socket_timeout_ms > 0 && !mongoc_uri_has_option(t->uri, MONGOC_URI_SOCKETTIMEOUTMS))
        mongoc_uri_set_option_as_int32(t->uri, MONGOC_URI_SOCKETTIMEOUTMS,
                                       (int32_t)cfg->socket_timeout_ms);
    t->pool = mongoc_client_pool_new_with_error(t->uri, &error);
    if (t->pool == NULL) {
        set_redacted_error(err, cfg, (int)error.code, redacted, error.message);
        goto fail;
    }
    mongoc_client_pool_set_error_api(t->pool, MONGOC_ERROR_API_VERSION_2);

    if (!probe(t->pool, &rs, &refusal, &perr)) {
        /* Unreachable now: the task retries with backoff and discovers the set itself. */
        char *why = config_redact_text(perr.msg, cfg->connection_string);
        LOG_WARN("cannot reach %s yet: %s; the capture task retries with backoff", redacted, why);
        free(why);
    } else if (refusal != NULL) {
        mcdc_error_set(err, MCDC_ERR_CONFIG, 0, "%s", refusal);
        goto fail;
    } else {
        LOG_INFO("replica set %s found at %s", rs, redacted);
    }

    ev_async_init(&t->notice, on_notice);
    t->notice.data = t;
    ev_async_start(loop, &t->notice);
    t->tasks = xcalloc(1, sizeof *t->tasks);
    t->tasks[0] = worker_start(cfg, t->pool, rs, selection_ms, task_ended, t, err);
    free(rs);
    rs = NULL;
    if (t->tasks[0] == NULL) {
        ev_async_stop(loop, &t->notice);
        goto fail;
    }
    t->ntasks = 1;
    return t;
fail:
    free(rs);
    topology_destroy(t);
    return NULL;
}

void topology_request_stop(struct topology *t)
{
    if (t == NULL)
        return;
    t->stopping = true;
    for (size_t i = 0; i < t->ntasks; i++)
        worker_request_stop(t->tasks[i]);
}

int topology_join(struct topology *t)
{
    int code = MCDC_EXIT_OK;
    for (size_t i = 0; i < t->ntasks; i++) {
        if (worker_join(t->tasks[i], NULL) != MCDC_EXIT_OK)
            code = MCDC_EXIT_FAILURE;
    }
    return code;
}

void topology_destroy(struct topology *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->ntasks; i++)
        worker_destroy(t->tasks[i]);
    free(t->tasks);
    if (t->ntasks > 0 && ev_is_active(&t->notice))
        ev_async_stop(t->loop, &t->notice);
    if (t->pool != NULL)
        mongoc_client_pool_destroy(t->pool);
    mongoc_uri_destroy(t->uri);
    free(t);
}
